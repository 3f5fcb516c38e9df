"""mbaphases demo-repo: (re)generate the demo target repository."""
from __future__ import annotations

from pathlib import Path

from mbaphases.demo_repo import generate, generate_field


def add_parser(sub) -> None:
    d = sub.add_parser("demo-repo", help="(re)generate the demo target repository")
    d.add_argument("--path", default="demo-target", help="where the repository is (re)generated (default: demo-target)")
    d.add_argument("--layout", choices=("demo", "field"), default="demo",
                   help="demo: the demo history; field: a repository shaped like the field's (uv lock, extras, "
                        "entry and configs where its eras put them)")
    d.set_defaults(handler=main)


def main(args) -> int:
    shas = (generate_field if args.layout == "field" else generate)(Path(args.path))
    for ref, sha in shas.items():
        print(f"{ref}\t{sha}")
    return 0
