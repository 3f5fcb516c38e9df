"""The report command: inputs resolved and checked, sides loaded, report written."""
from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mbaphases import analysis, inputs, load, outputs, tables
from mbaphases import bundle as bundle_mod
from mbaphases import gate as gate_mod
from mbaphases.errors import UsageError
from mbaphases.page import link_from_asv, write_hardware_page, write_overview_page, write_page
from mbaphases.runner import default_machine, load_asv_conf
from mbaphases.side import Side
from mbaphases.staging import Stage
from mbaphases.stats import rules

EXIT_PASS, EXIT_NOT_PASSED = 0, 1
DEFAULT_PINS = "pins.toml"


def _pins(path: str | None) -> tuple[dict, Path | None]:
    """The pins file: an explicit path must exist; the default is optional."""
    if path is None:
        if not Path(DEFAULT_PINS).is_file():
            return {}, None
        path = DEFAULT_PINS
    return inputs.load_pins(Path(path)), Path(path)


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


def load_sides(args, pins: dict) -> Loaded:
    """The baseline, the candidates (in pins order), the input kind and the machine's batch records."""
    cands_pins = pins.get("candidates", [])
    b_label = args.baseline_label or pins.get("baseline", {}).get("label", "baseline")
    if args.baseline_raw or args.candidate_raw:
        if not (args.baseline_raw and args.candidate_raw):
            raise UsageError("raw input needs both --baseline-raw and --candidate-raw")
        c_label = args.candidate_label or (cands_pins[0]["label"] if len(cands_pins) == 1 else "candidate")
        if b_label == c_label:
            raise UsageError(f"baseline and candidate share the label {b_label!r}; give each side its own")
        b = load.load_raw_side(b_label, args.baseline_raw)
        c = load.load_raw_side(c_label, args.candidate_raw)
        load.check_distinct_runs(b, c)
        return Loaded(b, [c], "raw entry JSON", [])
    conf_path = Path(args.config)
    if getattr(args, "bundle_manifest", None):
        m = args.bundle_manifest
        results_dir, repo = m["root"] / "results", None
        args.machine = m["machine"]
        sides = m["sides"]
        args.baseline, b_label = sides[0]["sha"], sides[0]["label"]
        pins = {**pins, "baseline": {"ref": sides[0]["sha"], "label": b_label},
                "candidates": [{"ref": x["sha"], "label": x["label"]} for x in sides[1:]]}
        cands_pins = pins["candidates"]
    elif args.results:
        results_dir, repo = Path(args.results), None
        if not results_dir.is_dir():
            raise UsageError(f"--results {results_dir} is not a directory")
    else:
        if not conf_path.is_file():
            raise UsageError(f"asv config {conf_path} not found; pass --results or raw inputs")
        conf = load_asv_conf(conf_path)
        results_dir = conf_path.resolve().parent / conf.get("results_dir", "results")
        repo = conf_path.resolve().parent / conf["repo"]
    machine = args.machine
    if machine is None and len(load.machines(results_dir)) > 1:
        # the runner's default name for the active profile, when it has results
        profile = os.environ.get("MBAPHASES_PROFILE") or pins.get("profile")
        if profile and default_machine(profile) in load.machines(results_dir):
            machine = default_machine(profile)
    machine = load.pick_machine(results_dir, machine)
    b_rev = args.baseline or pins.get("baseline", {}).get("ref")
    if args.candidate:
        wanted = [(args.candidate_label or "candidate", args.candidate)]
        known = {c["ref"]: c["label"] for c in cands_pins}
        if args.candidate in known and not args.candidate_label:
            wanted = [(known[args.candidate], args.candidate)]
    else:
        wanted = [(c["label"], c["ref"]) for c in cands_pins]
    if args.sides:
        only = [x.strip() for x in args.sides.split(",") if x.strip()]
        unknown = [o for o in only if o not in [lbl for lbl, _ in wanted]]
        if unknown:
            raise UsageError(f"--sides {unknown[0]!r} is not a candidate; valid: {', '.join(lbl for lbl, _ in wanted)}")
        wanted = [(lbl, ref) for lbl, ref in wanted if lbl in only]
    if not b_rev or not wanted:
        raise UsageError("no revisions: pass --baseline and --candidate (or a pins file with the sides' refs)")
    labels = [b_label] + [lbl for lbl, _ in wanted]
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        raise UsageError(f"the label {dup[0]!r} names more than one side; give each side its own")
    b = load.load_asv_side(b_label, b_rev, results_dir, machine, repo)
    cands = []
    for lbl, ref in wanted:
        c = load.load_asv_side(lbl, ref, results_dir, machine, repo)
        for other in [b, *cands]:
            if other.revision == c.revision:
                raise UsageError(f"{lbl!r} ({ref}) and {other.label!r} are the same commit {c.revision[:12]}")
        cands.append(c)
    records = sorted((results_dir.parent / "raw-runs" / machine / "batches").glob("*.json"))
    kind = (f"evidence bundle {args.bundle}" if getattr(args, "bundle_manifest", None)
            else f"asv results ({results_dir}, machine {machine})")
    return Loaded(b, cands, kind, [str(r) for r in records], results_dir, machine)


def _stopping(records: list[str], sides: list[Side], confidence: float) -> tuple[float, list[str]]:
    """Runs added until decisive looked at the data repeatedly: the report decides at the
    confidence per planned look those batches used, and says how many looks were taken."""
    batches = {bt for s in sides for bt in s.batches.values()}
    notes = []
    for path in records:
        rec = load.read_json_file(Path(path))
        until = rec.get("until_decisive")
        if rec.get("batch") in batches and until:
            confidence = max(confidence, float(until["confidence"]))
            notes.append(f"batch {rec['batch']} added runs until decisive: {rec.get('looks', 0)} look(s) taken of "
                         f"{until['planned_looks']} planned; each look at {until['confidence']:.4f} confidence "
                         f"(the {until['nominal_confidence']:.0%} error split over the planned looks)")
    return confidence, notes


def report_command(args) -> int:
    bundle_dir = None
    if getattr(args, "bundle", None):
        if args.baseline_raw or args.candidate_raw or args.results or args.baseline or args.candidate:
            raise UsageError("--bundle carries its own sides: give no other inputs with it")
        bundle_dir = tempfile.TemporaryDirectory()
        args.bundle_manifest = bundle_mod.open_bundle(Path(args.bundle), Path(bundle_dir.name))
        root = args.bundle_manifest["root"]
        if args.pins is None and (root / "pins.toml").is_file():
            args.pins = str(root / "pins.toml")
        if args.exceptions is None and (root / "exceptions.toml").is_file():
            args.exceptions = str(root / "exceptions.toml")
        args.reference = args.reference or args.bundle_manifest.get("reference")
    try:
        return _report(args)[0]
    finally:
        if bundle_dir is not None:
            bundle_dir.cleanup()


def bundle_command(args) -> int:
    """The report's sides, raw runs, results, pins and report in one verified archive."""
    out = inputs.writable_file(Path(args.out), "--out")
    with tempfile.TemporaryDirectory() as tmp:
        args.out, args.html, args.quiet = str(Path(tmp) / "report"), None, True
        args.baseline_raw = args.candidate_raw = None
        status, made = _report(args)
        loaded = made.loaded
        if loaded.results_dir is None:
            raise UsageError("a bundle is made from asv results (not from raw inputs)")
        bundle_mod.write(out, [loaded.baseline, *loaded.candidates], loaded.results_dir, loaded.machine,
                         made.pins_path, made.exceptions_path, Path(tmp) / "report", made.reference, made.history)
    print(f"bundle: {out} ({out.stat().st_size / 1024:.0f} KiB)")
    return status


@dataclass
class Made:
    """What a report was made from (an evidence bundle packs the same)."""
    loaded: Loaded
    pins_path: Path | None
    exceptions_path: Path | None
    reference: str | None
    history: list[str] | None


def _settings(args, pins: dict, pins_path: Path | None) -> tuple[analysis.Settings, Path | None]:
    """The report's settings from the command line over the pins, checked (and the exceptions file)."""
    g = pins.get("gate", {})
    s = analysis.Settings(
        threshold=args.threshold if args.threshold is not None else float(g.get("threshold", rules.DEFAULT_THRESHOLD)),
        min_runs=args.min_runs if args.min_runs is not None else int(g.get("min_runs", 3)),
        confidence=args.confidence if args.confidence is not None else float(g.get("confidence", rules.DEFAULT_CONFIDENCE)),
        dispersion_limit=args.dispersion_limit, cross_machine=args.cross_machine,
        pinned_cases=pins.get("cases") if not args.baseline_raw else None,
        min_share=pins.get("marks", {}).get("min_share", tables.MIN_SHARE),
        margin_share=pins.get("ledger", {}).get("additivity_margin"),
        margin_ms=pins.get("ledger", {}).get("additivity_margin_ms"))
    _check_number(s.threshold, "--threshold", 0, inclusive=False)
    if not (math.isfinite(s.confidence) and 0 < s.confidence < 1):
        raise UsageError(f"--confidence {s.confidence} must be between 0 and 1 (e.g. 0.90)")
    _check_number(s.dispersion_limit, "--dispersion-limit", 0, inclusive=True)
    if s.min_runs < 1:
        raise UsageError(f"--min-runs {s.min_runs} must be >= 1")
    if args.exceptions:
        exc_path = Path(args.exceptions)
    elif g.get("exceptions"):
        exc_path = pins_path.parent / g["exceptions"]
    else:
        exc_path = None
    return s, exc_path


def _several(args, pins: dict, s: analysis.Settings, cands: list[Side]) -> None:
    """With several candidates: the ledger's reference, the merges and the first-parent order."""
    if len(cands) < 2:
        return
    s.reference = args.reference or pins.get("reference") or cands[0].label
    if s.reference not in [c.label for c in cands]:
        raise UsageError(f"--reference {s.reference!r} is not a candidate; valid: {', '.join(c.label for c in cands)}")
    s.combines = {c["label"]: c["combines"] for c in pins.get("candidates", []) if c.get("combines")}
    s.history = history_order(args, pins, cands)


def _report(args) -> tuple[int, Made]:
    pins, pins_path = _pins(args.pins)
    settings, exc_path = _settings(args, pins, pins_path)
    out = inputs.writable_dir(Path(args.out), "--out")
    html_dir = inputs.writable_dir(Path(args.html), "--html") if args.html else None
    if html_dir is not None and html_dir.resolve() == out.resolve():
        raise UsageError(f"--out and --html are the same directory {out}; give the page its own")
    loaded = load_sides(args, pins)
    if getattr(args, "batch", None):
        restrict_to_batches(loaded, args.batch)
    b, cands = loaded.baseline, loaded.candidates
    settings.confidence, settings.notes = _stopping(loaded.records, [b, *cands], settings.confidence)
    settings.input_kind = loaded.kind
    cases = tables.case_order(b, cands[0], settings.pinned_cases)
    for c in cands[1:]:
        cases += [x for x in tables.case_order(b, c, settings.pinned_cases) if x not in cases]
    settings.exceptions = gate_mod.load_exceptions(exc_path, cases)
    _several(args, pins, settings, cands)
    built = analysis.build_per_hardware(b, cands, settings)
    _write_all(built, out, html_dir, cands)
    overview = built[0][2]
    made = Made(loaded, pins_path, exc_path, settings.reference, overview.history if overview is not None else None)
    page = None
    if html_dir is not None:
        page = html_dir / "index.html"
        link_from_asv(html_dir.parent, html_dir)
    verdict = analysis.overall_verdict([r.verdict for _, reps, _ in built for r in reps])
    if not args.quiet:
        outputs.print_all(built, out, page, sys.stdout)
    return (EXIT_PASS if verdict == "PASS" else EXIT_NOT_PASSED), made


def _write_all(built: list[tuple], out: Path, html_dir: Path | None, cands: list[Side]) -> None:
    """Every comparison's files (and pages), staged: all of them appear, or none."""
    stages = [Stage(out)]
    try:
        if html_dir is not None:
            stages.append(Stage(html_dir, fresh_subdirs=("raw",) + tuple(outputs.slug(c.label) for c in cands)
                                + tuple(u.folder for u, _, _ in built if u.folder)))
        for unit, reps, overview in built:
            sub = unit.folder if len(built) > 1 else ""
            _write_outputs(reps, overview, stages[0].dir / sub, stages[1].dir / sub if html_dir is not None else None)
        if len(built) > 1:
            outputs.write_hardware_index(built, stages[0].dir)
            if html_dir is not None:
                write_hardware_page(built, stages[1].dir)
    except BaseException:
        for s in stages:
            s.discard()
        raise
    for s in stages:
        s.publish()


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


def history_order(args, pins: dict, cands: list[Side]) -> list[str]:
    """The candidates' labels in first-parent order of the last one's history (asv's line)."""
    manifest = getattr(args, "bundle_manifest", None)
    if manifest:
        return manifest.get("history") or [c.label for c in cands]
    if args.baseline_raw or args.results:
        return [c.label for c in cands]

    conf_path = Path(args.config)
    repo = conf_path.resolve().parent / load_asv_conf(conf_path)["repo"]

    p = subprocess.run(["git", "-C", str(repo), "rev-list", "--first-parent", cands[-1].revision],
                       capture_output=True, text=True, check=False)
    line = p.stdout.split()[::-1]
    on_line = sorted((c for c in cands if c.revision in line), key=lambda c: line.index(c.revision))
    return [c.label for c in on_line] or [c.label for c in cands]
