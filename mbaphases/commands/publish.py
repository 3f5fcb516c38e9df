"""mbaphases publish: asv publish (html/), keeping the report page asv's index links to."""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from mbaphases import inputs, page, runner


def add_parser(sub) -> None:
    pb = sub.add_parser("publish", help="asv publish (html/); the linked report page is kept and linked again")
    pb.add_argument("--config", default="asv.conf.json")
    pb.set_defaults(handler=main)


def main(args) -> int:
    conf = Path(args.config)
    html = conf.resolve().parent / inputs.load_asv_conf(conf).get("html_dir", "html")
    linked = page.linked_page(html)
    if linked is None or not linked.is_dir():
        return runner.publish(conf)
    # asv publish empties html_dir: the report's pages wait beside it (same file system, a rename)
    # and come back, linked again, whatever publish did
    aside = Path(tempfile.mkdtemp(prefix=".mbaphases-pages-", dir=html.parent))
    shutil.move(str(linked), str(aside / "pages"))
    try:
        rc = runner.publish(conf)
    finally:
        if linked.exists():  # asv wrote a folder of that name: the pages stay aside, said
            print(f"mbaphases publish: the report pages of {linked} are kept at {aside / 'pages'}", file=sys.stderr)
        else:
            linked.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(aside / "pages"), str(linked))
            aside.rmdir()
    page.link_from_asv(html, linked)
    return rc
