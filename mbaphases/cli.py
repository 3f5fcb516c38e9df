"""mbaphases command line: the commands' parsers (mbaphases.commands) and the one contract of
every entry point: 0/1 are verdicts, bad input one error line and 2, an internal error 3."""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from pathlib import Path

from mbaphases import exits, processes
from mbaphases.commands import ab, bundle, demo_repo, find, publish, report, run
from mbaphases.errors import ArgumentParser, UsageError

COMMANDS = (demo_repo, run, ab, report, bundle, find, publish)


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="mbaphases", description="A/B benchmark suite for direct vs manager-based env runtimes")
    sub = p.add_subparsers(dest="command", required=True, parser_class=ArgumentParser)
    for command in COMMANDS:
        command.add_parser(sub)
    return p


def main(argv=None) -> int:
    """0/1 are verdicts only: bad input is 2, an internal error 3 (traceback in a log file)."""
    try:
        # SIGTERM and SIGHUP take Ctrl-C's path: staged outputs are discarded, children ended
        with processes.terminate_as_interrupt(), processes.relayed_stdout():
            args = build_parser().parse_args(argv)
            return args.handler(args)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return exits.USAGE
    except KeyboardInterrupt as e:
        why = f" by {e}" if isinstance(e, processes.Interrupted) else ""
        print(f"error: interrupted{why}", file=sys.stderr)
        return exits.INTERRUPTED
    except Exception as e:  # noqa: BLE001 - the contract: one line, the traceback kept
        log = Path(tempfile.gettempdir()) / f"mbaphases-error-{time.strftime('%Y%m%d-%H%M%S')}.log"
        log.write_text(traceback.format_exc())
        print(f"error: internal error {type(e).__name__}: {e} (traceback in {log})", file=sys.stderr)
        return exits.INTERNAL


if __name__ == "__main__":
    sys.exit(main())
