class UsageError(Exception):
    """Bad input: the CLI prints it on one line and exits 2."""
