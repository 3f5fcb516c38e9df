"""Which asv config a run or a search uses: as given, the field repository's, or the pin
repository of a [published] pins file (generated first), each with the pins' own results folder;
and whether to run duets."""
from __future__ import annotations

import json
from pathlib import Path

from mbaphases import inputs, published, runner, staging
from mbaphases.errors import UsageError


def target_conf(config: Path, pins: dict, field_repo: str | None, field_package: str | None) -> Path:
    """The asv config of the pins' target: as given, the field repository's, or the pin
    repository of a [published] pins file (generated first)."""
    conf = Path(config)
    if not conf.is_file():
        raise UsageError(f"asv config {conf} not found")
    if published.is_published(pins):
        if field_repo:
            raise UsageError("--field-repo with a [published] pins file: the published target's sides are what "
                             "its pins install; give one or the other")
        # the sides' pin repository (one commit per side: its lock, entry and assets), then asv as usual
        made = published.asv_conf(pins, conf.resolve().parent, published.generate(pins, conf.resolve().parent))
        return own_results(made, results_folder(pins, "published"), made)
    if field_repo:
        # asv resolves relative paths against the config's folder: the copy sits beside it
        template = conf.parent / "asv.field.conf.json"
        if not template.is_file():
            raise UsageError(f"field asv config {template} not found")
        field = pins.get("field", {})
        folder = results_folder(pins, "field")
        made = runner.field_conf(template, field_repo, field_package or field.get("package"),
                                 resolved_conf(conf.parent, folder), field)
        return own_results(made, folder, made)
    folder = results_folder(pins, "demo")
    if folder is None:
        return conf
    return own_results(conf, folder, resolved_conf(conf.parent, folder))


def results_folder(pins: dict, kind: str) -> str | None:
    """The asv results folder of a pins file's runs (None: the config's own, for the suite's pins.toml
    on the demo target). asv keeps one benchmark list per results folder (its benchmarks.json,
    rewritten by every run), and a pins file's cases and profile are its benchmarks: runs of two
    pins files in one folder would hide each other's results from asv's pages."""
    name = Path(pins["path"]).stem.removeprefix("pins.")
    if kind == "field":
        return "results-field" + ("" if name == "field" else f"-{name}")
    return None if name == "pins" else f"results-{name}"


def resolved_conf(suite_dir: Path, folder: str) -> Path:
    """Where the config of the runs stored in results folder ``folder`` is written."""
    return suite_dir / f"asv.{folder.removeprefix('results-')}.resolved.conf.json"


def own_results(conf: Path, folder: str, out: Path) -> Path:
    """``conf`` with its results in ``folder`` and its asv pages in html/targets/<the same name> (not
    html/<name>, where a report's page of that name may live), written to ``out`` (``mbaphases
    publish`` publishes every target's and links them from the main pages)."""
    doc = inputs.load_asv_conf(conf)
    doc.update(results_dir=folder, html_dir=f"html/targets/{folder.removeprefix('results-')}")
    staging.write_text_atomic(out, json.dumps(doc, indent=2) + "\n")
    return out


def duet_setting(flag: bool | None, pins: dict, share_cpu: bool | None = None) -> bool:
    """Whether to run duets: --duet, else the pins' 'duet' (or 'duet_share_cpu', a kind of duet).
    ``share_cpu`` (--[no-]duet-share-cpu) sets the pins' 'duet_share_cpu'; asking to share a CPU
    asks for a duet, and --no-duet-share-cpu alone keeps the duet with one CPU a side."""
    duet = flag if flag is not None else bool(pins.get("duet") or pins.get("duet_share_cpu"))
    if share_cpu is not None:
        pins["duet_share_cpu"] = share_cpu
    return duet or bool(share_cpu)
