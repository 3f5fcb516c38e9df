"""Statistics, in one home: every interval (intervals) and every rule that decides from one
(rules). The rest of the suite keeps only its tables and their labels."""
