"""Which asv config a run or a search uses: as given, the field repository's, or the pin
repository of a [published] pins file (generated first), each with the pins' own results folder;
and the batch's design (the one setting run, find and ab take)."""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from mbaphases import inputs, published, staging
from mbaphases.errors import UsageError
from mbaphases.run import design as design_mod
from mbaphases.run import prepare
from mbaphases.run.executors import blocks, shipping


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
        made = prepare.field_conf(template, field_repo, field_package or field.get("package"),
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


def add_design_arguments(parser) -> None:
    """The one design setting, alike for run, find and ab (mbaphases.run.design), and the earlier
    flags as its aliases."""
    parser.add_argument("--design", choices=design_mod.KINDS, default=None,
                        help="solo: one side at a time; pairs: two sides at once, a slot of CPUs each; turns: a pair's "
                             "two sides on one slot of the profile's CPUs, their collector loops taking turns between "
                             "steps (default: pins 'design'; where none, turns for an entry that takes turns, the demo "
                             "target's and the suite's collector entry, else solo)")
    parser.add_argument("--pairing", choices=design_mod.PAIRINGS, default=None,
                        help="pairs: 'star' pairs every candidate with the baseline and with the reference each round; "
                             "'round-robin' runs every side once a round (default: pins 'pairing', star)")
    parser.add_argument("--turn-ms", type=float, default=None,
                        help="turns: how long a side's turn lasts (default: pins 'turn_ms', else 25)")
    # earlier versions' flags, still accepted so that stored commands keep working, not shown:
    # --duet is the pins' paired design (else pairs), --no-duet solo; --duet-share-cpu turns,
    # --no-duet-share-cpu pairs; --duet-pairing is --pairing
    parser.add_argument("--duet", action=argparse.BooleanOptionalAction, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--duet-share-cpu", action=argparse.BooleanOptionalAction, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--duet-pairing", dest="pairing", choices=design_mod.PAIRINGS, help=argparse.SUPPRESS)


def add_fleet_arguments(parser) -> None:
    parser.add_argument("--fleet", default=None, metavar="ADDRESS",
                        help="run the pair blocks on a Ray cluster: 'ray' (ray.init('auto')), HOST:PORT or "
                             "ray://HOST:PORT, each node offering slots with the resource mbaphases_slot; or as jobs "
                             "of a Slurm partition: 'slurm' or 'slurm:PARTITION' (docs/fleet.md; default: pins "
                             "[fleet] address, else this machine)")
    parser.add_argument("--fleet-insecure", action="store_true", default=None,
                        help="send the blocks to a cluster this driver does not reach with token authentication "
                             "(anyone who reaches such a cluster runs code on every node)")
    parser.add_argument("--fleet-files", choices=shipping.FILES, default=None,
                        help="shared: every node sees the suite's folder, checkouts and environments at this "
                             "machine's paths (a shared file system); shipped: the suite's folder and the commits "
                             "are sent, each node makes the sides' environments from their locks (default: pins "
                             "[fleet] files, else shared)")


def fleet_setting(args, pins: dict) -> blocks.Fleet | None:
    """The fleet the blocks run on (--fleet, else pins [fleet]), or None: this machine."""
    pinned = pins.get("fleet") or {}
    address = args.fleet or pinned.get("address")
    if not address:
        return None
    insecure = bool(args.fleet_insecure if args.fleet_insecure is not None else pinned.get("insecure", False))
    files = args.fleet_files or pinned.get("files", "shared")
    return blocks.Fleet("auto" if address == "ray" else address, insecure, files)


def entry_takes_turns(field_repo: str | None) -> bool:
    """Whether the target's entry takes turns (mbaphases/turns.py): the demo target's and the suite's
    collector entry for the published framework do; a field repository's own entry does not."""
    return not field_repo


def design_setting(args, pins: dict, field_repo: str | None = None) -> design_mod.Design:
    """The batch's design from the command line, the pins and the target (mbaphases.run.design.settle)."""
    return design_mod.settle(pins, args.design, duet=args.duet, share_cpu=args.duet_share_cpu, pairing=args.pairing,
                             turn_ms=args.turn_ms, takes_turns=entry_takes_turns(field_repo),
                             target=f"the field repository {field_repo}")


def deadline(minutes: float | None) -> float | None:
    """--deadline-min as a time (from now: the command's start)."""
    if minutes is None:
        return None
    if not minutes > 0:
        raise UsageError(f"--deadline-min {minutes} must be > 0")
    return time.time() + 60 * minutes
