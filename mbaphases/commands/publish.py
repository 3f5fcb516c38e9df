"""mbaphases publish: asv publish (html/)."""
from __future__ import annotations

from pathlib import Path

from mbaphases import inputs, runner


def add_parser(sub) -> None:
    pb = sub.add_parser("publish", help="asv publish (html/)")
    pb.add_argument("--config", default="asv.conf.json")
    pb.set_defaults(handler=main)


def main(args) -> int:
    conf = Path(args.config)
    inputs.load_asv_conf(conf)
    return runner.publish(conf)
