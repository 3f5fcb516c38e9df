"""mbaphases command line."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mbaphases.errors import UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="mbaphases", description="A/B benchmark suite for direct vs manager-based env runtimes")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    d = sub.add_parser("demo-repo", help="(re)generate the demo target repository")
    d.add_argument("--path", default="demo-target")
    r = sub.add_parser("run", help="the formal A/B run with asv (locked, interleaved, raw runs kept)")
    r.add_argument("--config", default="asv.conf.json")
    r.add_argument("--pins", default="pins.toml")
    r.add_argument("--profile", default=None, help="profile in the pins file (default: its 'profile')")
    r.add_argument("--runs", type=int, default=None, help="independent runs per side (default: pins 'runs')")
    r.add_argument("--machine", default=None, help="asv machine name (default: <host>-<profile>)")
    r.add_argument("--python", default=None, help="use this existing python instead of building environments")
    r.add_argument("--field-repo", default=None, help="run against the field's repository (URL or path)")
    r.add_argument("--field-package", default=None, help="the field repository's package name")
    pb = sub.add_parser("publish", help="asv publish (html/)")
    pb.add_argument("--config", default="asv.conf.json")
    return p


def _run(args) -> int:
    if args.command == "demo-repo":
        from mbaphases.demo_repo import generate

        shas = generate(Path(args.path))
        for branch, sha in shas.items():
            print(f"{branch}\t{sha}")
        return 0
    if args.command == "run":
        from mbaphases import pins as pins_mod
        from mbaphases import runner

        pins = pins_mod.load(Path(args.pins), args.profile)
        conf = Path(args.config)
        if not conf.is_file():
            raise UsageError(f"asv config {conf} not found")
        if args.field_repo:
            conf = runner.field_conf(Path("asv.field.conf.json"), args.field_repo, args.field_package,
                                     Path("asv.field.resolved.conf.json"))
        runs = args.runs if args.runs is not None else int(pins["runs"])
        try:
            with runner.formal_run_lock(f"mbaphases run {conf}"):
                return runner.run_ab(conf, pins, runs, args.machine, args.python)
        except runner.LockBusy as e:
            print(f"error: {e}", file=sys.stderr)
            return 3
    if args.command == "publish":
        from mbaphases import runner

        return runner.publish(Path(args.config))
    raise UsageError(f"unknown command {args.command!r}")


def main(argv=None) -> int:
    try:
        return _run(build_parser().parse_args(argv))
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
