import argparse


class UsageError(Exception):
    """Bad input: the CLI prints it on one line and exits 2."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose complaints are a UsageError (one line, exit 2), not usage text and exit 2."""

    def error(self, message):
        raise UsageError(message)
