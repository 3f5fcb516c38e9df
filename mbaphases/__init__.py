"""mbaphases: from stored benchmark runs (asv results or raw collector-entry
JSON) to the tables a maintainer decides from."""
