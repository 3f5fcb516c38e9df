"""mbaphases report (and bundle): inputs resolved and checked, sides loaded, the report built,
written and printed; a bundle packs the same sides with the report."""
from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mbaphases import analysis, inputs, load, outputs, published, tables, until_decisive
from mbaphases import bundle as bundle_mod
from mbaphases import classes as classes_mod
from mbaphases import gate as gate_mod
from mbaphases.errors import UsageError
from mbaphases.inputs import load_asv_conf
from mbaphases.page import link_from_asv, write_hardware_page, write_overview_page, write_page
from mbaphases.run import prepare, record
from mbaphases.side import Side
from mbaphases.staging import Stages
from mbaphases.stats import rules


def add_parser(sub) -> None:
    rp = sub.add_parser("report", help="tables, gate and report from stored runs")
    rp.add_argument("--out", required=True, help="output directory (report.md, *.csv, summary.json)")
    rp.add_argument("--config", default=None,
                    help="asv config (results dir, target repo); default: the one the newest run of --pins used "
                         "(its batch record), else asv.conf.json")
    rp.add_argument("--pins", default=None, help="sides, labels, cases and gate defaults (default: pins.toml if present)")
    rp.add_argument("--results", default=None, help="asv results directory (default: from --config)")
    rp.add_argument("--machine", default=None, help="asv machine whose runs are read (default: this host's for the profile)")
    rp.add_argument("--baseline", default=None, help="revision: SHA, prefix or branch (default: pins)")
    rp.add_argument("--candidate", default=None, help="revision: SHA, prefix or branch (default: pins)")
    rp.add_argument("--baseline-raw", nargs="+", default=None, help="raw entry JSON files or globs, one per run")
    rp.add_argument("--candidate-raw", nargs="+", default=None, help="as --baseline-raw, for the candidate")
    rp.add_argument("--sides", default=None, help="comma list of candidate labels to report (default: every candidate in the pins)")
    rp.add_argument("--reference", default=None,
                    help="the ledger's reference candidate (default: pins 'reference', else the first candidate)")
    rp.add_argument("--baseline-label", default=None, help="the baseline's name in the tables (default: pins)")
    rp.add_argument("--candidate-label", default=None, help="the candidate's name in the tables (default: pins)")
    rp.add_argument("--threshold", type=float, default=None,
                    help="the gate: candidate throughput at least this share of the baseline's (default: pins "
                         "gate.threshold, 0.90)")
    rp.add_argument("--min-runs", type=int, default=None, help="fewest runs a side for a verdict (default: pins gate.min_runs, 3)")
    rp.add_argument("--confidence", type=float, default=None,
                    help="confidence of the ratio's interval the gate decides on (default: pins gate.confidence, 0.90)")
    rp.add_argument("--exceptions", default=None, help="maintainer's exceptions file (TOML)")
    rp.add_argument("--dispersion-limit", type=float, default=0.05, help="flag range above this share")
    rp.add_argument("--html", default=None, help="also write the HTML page here (e.g. html/mbaphases, linked from asv's html/)")
    rp.add_argument("--cross-machine", action="store_true",
                    help="the sides were measured on different hardware on purpose: gate them anyway, and say so first")
    rp.add_argument("--batch", default=None,
                    help="comma list of batch IDs: only their runs (default: every batch; the gate compares the "
                         "sides inside each batch both ran in)")
    rp.add_argument("--quiet", action="store_true", help="print nothing but errors (the files are written)")
    rp.add_argument("--bundle", default=None, help="an evidence bundle (mbaphases bundle) instead of other inputs")
    rp.set_defaults(handler=report_command)


@dataclass(frozen=True)
class ReportOptions:
    """What `mbaphases report` (and `bundle`) were asked for, typed; derived settings are made
    from it (analysis.Settings), never written back into it."""
    out: str
    config: str | None = None
    pins: str | None = None
    results: str | None = None
    machine: str | None = None
    baseline: str | None = None
    candidate: str | None = None
    baseline_raw: list[str] | None = None
    candidate_raw: list[str] | None = None
    sides: str | None = None
    reference: str | None = None
    baseline_label: str | None = None
    candidate_label: str | None = None
    threshold: float | None = None
    min_runs: int | None = None
    confidence: float | None = None
    exceptions: str | None = None
    dispersion_limit: float = 0.05
    html: str | None = None
    cross_machine: bool = False
    batch: str | None = None
    quiet: bool = False
    bundle: str | None = None
    bundle_manifest: dict | None = None  # an opened evidence bundle: its sides replace the stored ones

    @classmethod
    def from_args(cls, args) -> ReportOptions:
        return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)})


EXIT_PASS, EXIT_NOT_PASSED = 0, 1
DEFAULT_PINS = "pins.toml"


def _pins(path: str | None) -> tuple[dict, Path | None]:
    """The pins file: an explicit path must exist; the default is optional."""
    if path is None:
        if not Path(DEFAULT_PINS).is_file():
            return {}, None
        path = DEFAULT_PINS
    doc = inputs.load_pins(Path(path))
    doc["path"] = str(Path(path).resolve())  # as the runner records it: its runs' batches name it
    return doc, Path(path)


def _config_of(pins: dict, pins_path: Path | None) -> Path:
    """The asv config the newest run of these pins used (a generated one: the published target's
    pin repository, the field repository's), from the batch records; else the demo's."""
    recorded = record.recorded_config(pins_path) if pins_path is not None else None
    if recorded is not None:
        return recorded
    if published.is_published(pins):
        raise UsageError(f"no run of {pins_path} is recorded here, so its asv config is unknown; run it first "
                         f"(mbaphases run --pins {pins_path}) or pass --config")
    return Path("asv.conf.json")


def _check_number(value, flag: str, low: float, inclusive: bool) -> None:
    ok = value is not None and math.isfinite(value) and (value >= low if inclusive else value > low)
    if not ok:
        raise UsageError(f"{flag} {value} must be a finite number {'>=' if inclusive else '>'} {low:g}")


@dataclass
class Loaded:
    baseline: Side
    candidates: list[Side]
    kind: str
    records: list[str]  # batch record files of the machine
    results_dir: Path | None = None
    machine: str | None = None


def load_sides(opts: ReportOptions, pins: dict) -> Loaded:
    """The baseline, the candidates (in pins order), the input kind and the machine's batch records."""
    if opts.baseline_raw or opts.candidate_raw:
        return _raw_sides(opts, pins)
    source = _stored_source(opts, pins)
    machine = _machine(opts.machine if source.machine is None else source.machine, source.results_dir, pins)
    b_label, b_rev, wanted = _wanted_sides(opts, source.pins)
    b = load.load_asv_side(b_label, b_rev, source.results_dir, machine, source.repo)
    cands = []
    for lbl, ref in wanted:
        c = load.load_asv_side(lbl, ref, source.results_dir, machine, source.repo)
        for other in [b, *cands]:
            if other.revision == c.revision:
                raise UsageError(f"{lbl!r} ({ref}) and {other.label!r} are the same commit {c.revision[:12]}")
        cands.append(c)
    records = sorted((source.results_dir.parent / "raw-runs" / machine / "batches").glob("*.json"))
    kind = (f"evidence bundle {opts.bundle}" if opts.bundle_manifest
            else f"asv results ({source.results_dir}, machine {machine})")
    return Loaded(b, cands, kind, [str(r) for r in records], source.results_dir, machine)


def _raw_sides(opts: ReportOptions, pins: dict) -> Loaded:
    """Two sides from raw entry JSON files, one file per run."""
    if not (opts.baseline_raw and opts.candidate_raw):
        raise UsageError("raw input needs both --baseline-raw and --candidate-raw")
    cands_pins = pins.get("candidates", [])
    b_label = opts.baseline_label or pins.get("baseline", {}).get("label", "baseline")
    c_label = opts.candidate_label or (cands_pins[0]["label"] if len(cands_pins) == 1 else "candidate")
    if b_label == c_label:
        raise UsageError(f"baseline and candidate share the label {b_label!r}; give each side its own")
    b = load.load_raw_side(b_label, opts.baseline_raw)
    c = load.load_raw_side(c_label, opts.candidate_raw)
    load.check_distinct_runs(b, c)
    return Loaded(b, [c], "raw entry JSON", [])


@dataclass
class _Source:
    """Where stored sides are read: asv's results, the repository that names their commits (None:
    SHAs only), the pins that name the sides, and the machine a bundle fixes."""
    results_dir: Path
    repo: Path | None
    pins: dict
    machine: str | None = None


def _stored_source(opts: ReportOptions, pins: dict) -> _Source:
    if opts.bundle_manifest:
        m = opts.bundle_manifest
        sides = m["sides"]
        # the bundle's own sides, by SHA: they replace the pins' refs
        return _Source(m["root"] / "results", None,
                       {**pins, "baseline": {"ref": sides[0]["sha"], "label": sides[0]["label"]},
                        "candidates": [{"ref": x["sha"], "label": x["label"]} for x in sides[1:]]},
                       m["machine"])
    if opts.results:
        results_dir = Path(opts.results)
        if not results_dir.is_dir():
            raise UsageError(f"--results {results_dir} is not a directory")
        return _Source(results_dir, None, pins)
    conf_path = Path(opts.config)
    if not conf_path.is_file():
        raise UsageError(f"asv config {conf_path} not found; pass --results or raw inputs")
    conf = load_asv_conf(conf_path)
    return _Source(conf_path.resolve().parent / conf.get("results_dir", "results"),
                   conf_path.resolve().parent / conf["repo"], pins)


def _machine(given: str | None, results_dir: Path, pins: dict) -> str:
    """The machine to read: as given; else the only one; else the machine of the newest run of
    these pins (a paired run has its own), else the runner's default name for the active profile,
    when it has results; else the choice is the user's (mbaphases.load.pick_machine)."""
    machine = given
    stored = load.machines(results_dir)
    if machine is None and len(stored) > 1:
        newest = record.recorded_batch(Path(pins["path"])) if pins.get("path") else None
        profile = os.environ.get("MBAPHASES_PROFILE") or pins.get("profile")
        if newest is not None and newest.get("machine") in stored:
            machine = newest["machine"]
        elif profile and prepare.default_machine(profile) in stored:
            machine = prepare.default_machine(profile)
    return load.pick_machine(results_dir, machine)


def _wanted_sides(opts: ReportOptions, pins: dict) -> tuple[str, str, list[tuple[str, str]]]:
    """(baseline label, baseline ref, [(candidate label, ref)]); every label names one side."""
    base = pins.get("baseline", {})
    if opts.bundle_manifest:  # the bundle's sides, as it recorded them
        b_label, b_rev = base.get("label", "baseline"), base.get("ref")
    else:
        b_label, b_rev = opts.baseline_label or base.get("label", "baseline"), opts.baseline or base.get("ref")
    wanted = _wanted_candidates(opts, pins.get("candidates", []))
    if not b_rev or not wanted:
        raise UsageError("no revisions: pass --baseline and --candidate (or a pins file with the sides' refs)")
    labels = [b_label] + [lbl for lbl, _ in wanted]
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        raise UsageError(f"the label {dup[0]!r} names more than one side; give each side its own")
    return b_label, b_rev, wanted


def _wanted_candidates(opts: ReportOptions, cands_pins: list[dict]) -> list[tuple[str, str]]:
    """The candidate named on the command line (labelled as the pins label its ref), else the pins'
    candidates; restricted to --sides."""
    if opts.candidate:
        known = {c["ref"]: c["label"] for c in cands_pins}
        label = known[opts.candidate] if opts.candidate in known and not opts.candidate_label else None
        wanted = [(label or opts.candidate_label or "candidate", opts.candidate)]
    else:
        wanted = [(c["label"], c["ref"]) for c in cands_pins]
    if opts.sides:
        only = [x.strip() for x in opts.sides.split(",") if x.strip()]
        unknown = [o for o in only if o not in [lbl for lbl, _ in wanted]]
        if unknown:
            raise UsageError(f"--sides {unknown[0]!r} is not a candidate; valid: {', '.join(lbl for lbl, _ in wanted)}")
        wanted = [(lbl, ref) for lbl, ref in wanted if lbl in only]
    return wanted


def report_command(args) -> int:
    opts = ReportOptions.from_args(args)
    bundle_dir = None
    if opts.bundle:
        if opts.baseline_raw or opts.candidate_raw or opts.results or opts.baseline or opts.candidate:
            raise UsageError("--bundle carries its own sides: give no other inputs with it")
        bundle_dir = tempfile.TemporaryDirectory()
        manifest = bundle_mod.open_bundle(Path(opts.bundle), Path(bundle_dir.name))
        root = manifest["root"]
        opts = dataclasses.replace(
            opts, bundle_manifest=manifest,
            pins=opts.pins if opts.pins is not None or not (root / "pins.toml").is_file() else str(root / "pins.toml"),
            exceptions=(opts.exceptions if opts.exceptions is not None or not (root / "exceptions.toml").is_file()
                        else str(root / "exceptions.toml")),
            reference=opts.reference or manifest.get("reference"))
    try:
        classes = fleet_classes(opts)
        if classes:
            return per_class(opts, classes)
        return make_report(opts)[0]
    finally:
        if bundle_dir is not None:
            bundle_dir.cleanup()


def fleet_classes(opts: ReportOptions) -> dict[str, dict]:
    """The hardware classes where --machine names a fleet batch's machine (its runs are stored under
    one machine name per class); empty otherwise."""
    if opts.machine is None or opts.bundle_manifest or opts.baseline_raw or opts.candidate_raw:
        return {}
    pins, pins_path = _pins(opts.pins)
    config = Path(opts.config) if opts.config else _config_of(pins, pins_path)
    root = Path(opts.results).parent if opts.results else config.resolve().parent
    return classes_mod.fleet_classes(root / "raw-runs", opts.machine)


def per_class(opts: ReportOptions, classes: dict[str, dict]) -> int:
    """A fleet batch: one report per hardware class (``<out>/<machine>/``), never pooled, and the
    line per candidate saying whether the classes agree (``classes.md``, ``classes.json``)."""
    out = inputs.writable_dir(Path(opts.out), "--out")
    summaries, codes = {}, []
    for machine in classes:
        sub = dataclasses.replace(opts, machine=machine, out=str(out / machine), html=None, quiet=True)
        codes.append(make_report(sub)[0])
        summaries[machine] = json.loads((out / machine / "summary.json").read_text())
    agreed = classes_mod.agreement(classes, summaries)
    classes_mod.write(out, agreed)
    if not opts.quiet:
        print(f"{len(classes)} hardware class{'es' if len(classes) != 1 else ''} of the fleet, each reported alone "
              f"under {out}/<machine>/:")
        for line in classes_mod.lines(agreed):
            print(f"  {line}")
        print(f"classes: {out / 'classes.md'}")
    return max(codes)


@dataclass
class Made:
    """What a report was made from (an evidence bundle packs the same)."""
    loaded: Loaded
    pins_path: Path | None
    exceptions_path: Path | None
    reference: str | None
    history: list[str] | None


def _settings(opts: ReportOptions, pins: dict, pins_path: Path | None) -> tuple[analysis.Settings, Path | None]:
    """The report's settings from the command line over the pins, checked (and the exceptions file)."""
    g = pins.get("gate", {})
    s = analysis.Settings(
        threshold=opts.threshold if opts.threshold is not None else float(g.get("threshold", rules.DEFAULT_THRESHOLD)),
        min_runs=opts.min_runs if opts.min_runs is not None else int(g.get("min_runs", 3)),
        confidence=opts.confidence if opts.confidence is not None else float(g.get("confidence", rules.DEFAULT_CONFIDENCE)),
        dispersion_limit=opts.dispersion_limit, cross_machine=opts.cross_machine,
        pinned_cases=pins.get("cases") if not opts.baseline_raw else None,
        min_share=pins.get("marks", {}).get("min_share", tables.MIN_SHARE),
        margin_share=pins.get("ledger", {}).get("additivity_margin"),
        margin_ms=pins.get("ledger", {}).get("additivity_margin_ms"))
    _check_number(s.threshold, "--threshold", 0, inclusive=False)
    if not (math.isfinite(s.confidence) and 0 < s.confidence < 1):
        raise UsageError(f"--confidence {s.confidence} must be between 0 and 1 (e.g. 0.90)")
    _check_number(s.dispersion_limit, "--dispersion-limit", 0, inclusive=True)
    if s.min_runs < 1:
        raise UsageError(f"--min-runs {s.min_runs} must be >= 1")
    if opts.exceptions:
        exc_path = Path(opts.exceptions)
    elif g.get("exceptions"):
        exc_path = pins_path.parent / g["exceptions"]
    else:
        exc_path = None
    return s, exc_path


def _several(opts: ReportOptions, pins: dict, s: analysis.Settings, cands: list[Side]) -> None:
    """With several candidates: the ledger's reference, the merges and the first-parent order."""
    if len(cands) < 2:
        return
    s.reference = opts.reference or pins.get("reference") or cands[0].label
    if s.reference not in [c.label for c in cands]:
        raise UsageError(f"--reference {s.reference!r} is not a candidate; valid: {', '.join(c.label for c in cands)}")
    s.combines = {c["label"]: c["combines"] for c in pins.get("candidates", []) if c.get("combines")}
    s.history = history_order(opts, pins, cands)


def make_report(opts: ReportOptions) -> tuple[int, Made]:
    pins, pins_path = _pins(opts.pins)
    if opts.config is None:
        opts = dataclasses.replace(opts, config=str(_config_of(pins, pins_path)))
    settings, exc_path = _settings(opts, pins, pins_path)
    out = inputs.writable_dir(Path(opts.out), "--out")
    html_dir = inputs.writable_dir(Path(opts.html), "--html") if opts.html else None
    if html_dir is not None and html_dir.resolve() == out.resolve():
        raise UsageError(f"--out and --html are the same directory {out}; give the page its own")
    loaded = load_sides(opts, pins)
    if opts.batch:
        restrict_to_batches(loaded, opts.batch)
    b, cands = loaded.baseline, loaded.candidates
    settings.confidence, settings.notes = until_decisive.stopping(loaded.records, [b, *cands], settings.confidence)
    settings.input_kind = loaded.kind
    cases = tables.case_order(b, cands[0], settings.pinned_cases)
    for c in cands[1:]:
        cases += [x for x in tables.case_order(b, c, settings.pinned_cases) if x not in cases]
    settings.exceptions = gate_mod.load_exceptions(exc_path, cases)
    _several(opts, pins, settings, cands)
    built = analysis.build_per_hardware(b, cands, settings)
    _write_all(built, out, html_dir, cands)
    overview = built[0][2]
    made = Made(loaded, pins_path, exc_path, settings.reference, overview.history if overview is not None else None)
    page = None
    if html_dir is not None:
        page = html_dir / "index.html"
        link_from_asv(html_dir.parent, html_dir)
    verdict = analysis.overall_verdict([r.verdict for _, reps, _ in built for r in reps])
    if not opts.quiet:
        outputs.print_all(built, out, page, sys.stdout)
    return (EXIT_PASS if verdict == "PASS" else EXIT_NOT_PASSED), made


def _write_all(built: list[tuple], out: Path, html_dir: Path | None, cands: list[Side]) -> None:
    """Every comparison's files (and pages), staged: all of them appear, or none."""
    with Stages() as stages:
        out_dir = stages.add(out)
        html_stage = None
        if html_dir is not None:
            html_stage = stages.add(html_dir, fresh_subdirs=("raw",) + tuple(outputs.slug(c.label) for c in cands)
                                    + tuple(u.folder for u, _, _ in built if u.folder))
        for unit, reps, overview in built:
            sub = unit.folder if len(built) > 1 else ""
            _write_outputs(reps, overview, out_dir / sub, html_stage / sub if html_stage is not None else None)
        if len(built) > 1:
            outputs.write_hardware_index(built, out_dir)
            if html_stage is not None:
                write_hardware_page(built, html_stage)


def _write_outputs(reps, overview, out: Path, html_dir: Path | None) -> None:
    """One comparison's report (and page): one candidate, or the overview with a folder each."""
    if overview is None:
        outputs.write(reps[0], out)
    else:
        outputs.write_overview(overview, out)
        for rep in reps:
            outputs.write(rep, out / outputs.slug(rep.candidate.label))
    if html_dir is not None:
        if overview is None:
            write_page(reps[0], html_dir)
        else:
            write_overview_page(overview, html_dir, {r.candidate.label: outputs.slug(r.candidate.label) for r in reps})
            for rep in reps:
                write_page(rep, html_dir / outputs.slug(rep.candidate.label))


def restrict_to_batches(loaded: Loaded, spec: str) -> None:
    """``--batch ID[,ID]``: only the runs of the named batches (each must hold some run)."""
    wanted = [x.strip() for x in spec.split(",") if x.strip()]
    sides = [loaded.baseline, *loaded.candidates]
    known = sorted({bt for s in sides for bt in s.batches.values()})
    for w in wanted:
        if w not in known:
            raise UsageError(f"--batch {w!r} holds no run of these sides; valid: {', '.join(known) or 'none recorded'}")
    keep = [s.restrict([r for r in s.runs() if s.batches.get(r) in wanted]) for s in sides]
    loaded.baseline, loaded.candidates = keep[0], keep[1:]


def history_order(opts: ReportOptions, pins: dict, cands: list[Side]) -> list[str]:
    """The candidates' labels in first-parent order of the last one's history (asv's line)."""
    manifest = opts.bundle_manifest
    if manifest:
        return manifest.get("history") or [c.label for c in cands]
    if opts.baseline_raw or opts.results:
        return [c.label for c in cands]

    conf_path = Path(opts.config)
    repo = conf_path.resolve().parent / load_asv_conf(conf_path)["repo"]

    p = subprocess.run(["git", "-C", str(repo), "rev-list", "--first-parent", cands[-1].revision],
                       capture_output=True, text=True, check=False)
    line = p.stdout.split()[::-1]
    on_line = sorted((c for c in cands if c.revision in line), key=lambda c: line.index(c.revision))
    return [c.label for c in on_line] or [c.label for c in cands]
