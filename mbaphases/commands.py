"""The report command: inputs resolved, sides loaded, report written."""
from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

from mbaphases import gate as gate_mod
from mbaphases import load, report
from mbaphases.errors import UsageError

EXIT_PASS, EXIT_NOT_PASSED = 0, 1


def _pins(path: str) -> dict:
    p = Path(path)
    if not p.exists():
        return {}
    try:
        return tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"pins file {p} is not valid TOML: {e}") from None


def load_sides(args, pins: dict) -> tuple[load.Side, load.Side, str]:
    labels = (args.baseline_label or pins.get("baseline", {}).get("label", "baseline"),
              args.candidate_label or pins.get("candidate", {}).get("label", "candidate"))
    if args.baseline_raw or args.candidate_raw:
        if not (args.baseline_raw and args.candidate_raw):
            raise UsageError("raw input needs both --baseline-raw and --candidate-raw")
        return (load.load_raw_side(labels[0], args.baseline_raw), load.load_raw_side(labels[1], args.candidate_raw),
                "raw entry JSON")
    conf_path = Path(args.config)
    if args.results:
        results_dir, repo = Path(args.results), None
    else:
        from mbaphases.runner import load_asv_conf

        if not conf_path.is_file():
            raise UsageError(f"asv config {conf_path} not found; pass --results or raw inputs")
        conf = load_asv_conf(conf_path)
        results_dir = conf_path.resolve().parent / conf.get("results_dir", "results")
        repo = conf_path.resolve().parent / conf["repo"]
    machine = args.machine
    if machine is None and len(load.machines(results_dir)) > 1:
        # the runner's default name for the active profile, when it has results
        from mbaphases.runner import default_machine

        profile = os.environ.get("MBAPHASES_PROFILE") or pins.get("profile")
        if profile and default_machine(profile) in load.machines(results_dir):
            machine = default_machine(profile)
    machine = load.pick_machine(results_dir, machine)
    revs = (args.baseline or pins.get("baseline", {}).get("ref"), args.candidate or pins.get("candidate", {}).get("ref"))
    if not all(revs):
        raise UsageError("no revisions: pass --baseline and --candidate (or a pins file with both refs)")
    sides = tuple(load.load_asv_side(label, rev, results_dir, machine, repo) for label, rev in zip(labels, revs))
    return sides[0], sides[1], f"asv results ({results_dir}, machine {machine})"


def report_command(args) -> int:
    pins = _pins(args.pins)
    g = pins.get("gate", {})
    threshold = args.threshold if args.threshold is not None else float(g.get("threshold", 0.90))
    min_runs = args.min_runs if args.min_runs is not None else int(g.get("min_runs", 3))
    if not 0 < threshold:
        raise UsageError(f"--threshold {threshold} must be > 0")
    if min_runs < 1:
        raise UsageError(f"--min-runs {min_runs} must be >= 1")
    b, c, kind = load_sides(args, pins)
    pinned_cases = pins.get("cases") if not args.baseline_raw else None
    cases = report.tables.case_order(b, c, pinned_cases)
    exc_path = args.exceptions or (Path(args.pins).parent / g["exceptions"] if g.get("exceptions") else None)
    exceptions = gate_mod.load_exceptions(Path(exc_path) if exc_path else None, cases)
    rep = report.build(b, c, threshold, min_runs, exceptions, args.dispersion_limit, pinned_cases, kind)
    files = report.write(rep, Path(args.out))
    page = None
    if args.html:
        from mbaphases.html import write_page

        page = write_page(rep, Path(args.html), asv_html=Path(args.html).parent)
    if not args.quiet:
        report.print_tables(rep, sys.stdout)
        print(f"\nreport: {files['report.md']}\nsummary: {files['summary.json']}")
        if page:
            print(f"page: {page}")
    return EXIT_PASS if rep.verdict == "PASS" else EXIT_NOT_PASSED
