import argparse
import sys


class UsageError(Exception):
    """Bad input: the CLI prints it on one line and exits 2."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose complaints are a UsageError (one line, exit 2), not usage text and exit 2."""

    def error(self, message):
        raise UsageError(message)


class ScriptParser(argparse.ArgumentParser):
    """The scripts' parser (scripts/*.py): a complaint is one `error:` line on stderr and exit 2."""

    def error(self, message):
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)
