"""mbaphases publish: asv publish (html/), keeping the report page asv's index links to; then every
other target's results (each pins file has its own results folder) into html/targets/<its name>/, linked
from the index."""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from mbaphases import inputs, load, page
from mbaphases.errors import UsageError
from mbaphases.run import prepare


def add_parser(sub) -> None:
    pb = sub.add_parser("publish", help="asv publish (html/), and every other target's results into html/targets/<name>/; "
                                        "the linked report page is kept and linked again")
    pb.add_argument("--config", default="asv.conf.json", help="asv config whose results and pages (default: asv.conf.json)")
    pb.set_defaults(handler=main)


def main(args) -> int:
    conf = Path(args.config)
    html = conf.resolve().parent / inputs.load_asv_conf(conf).get("html_dir", "html")
    rc = _publish_keeping_report(conf, html)
    published = {}
    for name, other, other_html in other_targets(conf, html):
        code = prepare.publish(other)
        if code == 0:
            published[name] = other_html
        else:  # said, and the main pages stay: one target's repository may be out of reach
            print(f"mbaphases publish: {name} ({other}) not published: asv publish exit {code}", file=sys.stderr)
    page.link_targets(html, published)
    return rc


def other_targets(conf: Path, html: Path) -> list[tuple[str, Path, Path]]:
    """(name, config, its html folder) of every other target run beside ``conf``: the configs the
    batch records name, with results of their own and pages under ``html``."""
    suite_dir = conf.resolve().parent
    own = suite_dir / inputs.load_asv_conf(conf).get("results_dir", "results")
    found = {}
    for record in load.batch_records(suite_dir / "raw-runs"):
        try:
            other = Path(record["config"])
            doc = inputs.load_asv_conf(other)
        except (KeyError, UsageError):
            continue  # a record without a readable config names no target to publish
        results = other.parent / doc.get("results_dir", "results")
        other_html = other.parent / doc.get("html_dir", "html")
        # an older config shares results/ or html/ itself: publishing it would clear the main pages
        if (results.resolve() == own.resolve() or not (results / "benchmarks.json").is_file()
                or html.resolve() not in other_html.resolve().parents):
            continue
        found[other.resolve()] = (other_html.name, other, other_html)
    return sorted(found.values())


def _publish_keeping_report(conf: Path, html: Path) -> int:
    linked = page.linked_page(html)
    if linked is None or not linked.is_dir():
        return prepare.publish(conf)
    # asv publish empties html_dir: the report's pages wait beside it (same file system, a rename)
    # and come back, linked again, whatever publish did
    aside = Path(tempfile.mkdtemp(prefix=".mbaphases-pages-", dir=html.parent))
    shutil.move(str(linked), str(aside / "pages"))
    try:
        rc = prepare.publish(conf)
    finally:
        if linked.exists():  # asv wrote a folder of that name: the pages stay aside, said
            print(f"mbaphases publish: the report pages of {linked} are kept at {aside / 'pages'}", file=sys.stderr)
        else:
            linked.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(aside / "pages"), str(linked))
            aside.rmdir()
    page.link_from_asv(html, linked)
    return rc
