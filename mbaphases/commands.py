"""The report command: inputs resolved and checked, sides loaded, report written."""
from __future__ import annotations

import math
import os
import sys
from pathlib import Path

from mbaphases import gate as gate_mod
from mbaphases import inputs, load, report
from mbaphases.errors import UsageError
from mbaphases.staging import Stage

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


def load_sides(args, pins: dict) -> tuple[load.Side, load.Side, str]:
    labels = (args.baseline_label or pins.get("baseline", {}).get("label", "baseline"),
              args.candidate_label or pins.get("candidate", {}).get("label", "candidate"))
    if labels[0] == labels[1]:
        raise UsageError(f"baseline and candidate share the label {labels[0]!r}; give each side its own")
    if args.baseline_raw or args.candidate_raw:
        if not (args.baseline_raw and args.candidate_raw):
            raise UsageError("raw input needs both --baseline-raw and --candidate-raw")
        b = load.load_raw_side(labels[0], args.baseline_raw)
        c = load.load_raw_side(labels[1], args.candidate_raw)
        load.check_distinct_runs(b, c)
        return b, c, "raw entry JSON"
    conf_path = Path(args.config)
    if args.results:
        results_dir, repo = Path(args.results), None
        if not results_dir.is_dir():
            raise UsageError(f"--results {results_dir} is not a directory")
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
    if sides[0].revision == sides[1].revision:
        raise UsageError(f"--baseline {revs[0]} and --candidate {revs[1]} are the same commit {sides[0].revision[:12]}")
    return sides[0], sides[1], f"asv results ({results_dir}, machine {machine})"


def report_command(args) -> int:
    pins, pins_path = _pins(args.pins)
    g = pins.get("gate", {})
    threshold = args.threshold if args.threshold is not None else float(g.get("threshold", 0.90))
    min_runs = args.min_runs if args.min_runs is not None else int(g.get("min_runs", 3))
    confidence = args.confidence if args.confidence is not None else float(g.get("confidence", 0.90))
    _check_number(threshold, "--threshold", 0, inclusive=False)
    if not (math.isfinite(confidence) and 0 < confidence < 1):
        raise UsageError(f"--confidence {confidence} must be between 0 and 1 (e.g. 0.90)")
    _check_number(args.dispersion_limit, "--dispersion-limit", 0, inclusive=True)
    if min_runs < 1:
        raise UsageError(f"--min-runs {min_runs} must be >= 1")
    out = inputs.writable_dir(Path(args.out), "--out")
    html_dir = inputs.writable_dir(Path(args.html), "--html") if args.html else None
    if html_dir is not None and html_dir.resolve() == out.resolve():
        raise UsageError(f"--out and --html are the same directory {out}; give the page its own")
    if args.exceptions:
        exc_path = Path(args.exceptions)
    elif g.get("exceptions"):
        exc_path = pins_path.parent / g["exceptions"]
    else:
        exc_path = None
    b, c, kind = load_sides(args, pins)
    pinned_cases = pins.get("cases") if not args.baseline_raw else None
    cases = report.tables.case_order(b, c, pinned_cases)
    exceptions = gate_mod.load_exceptions(exc_path, cases)
    rep = report.build(b, c, threshold, min_runs, exceptions, args.dispersion_limit, pinned_cases, kind,
                       cross_machine=args.cross_machine, confidence=confidence)
    stages = [Stage(out)]
    try:
        report.write(rep, stages[0].dir)
        if html_dir is not None:
            from mbaphases.html import write_page

            stages.append(Stage(html_dir, fresh_subdirs=("raw",)))
            write_page(rep, stages[1].dir)
    except BaseException:
        for s in stages:
            s.discard()
        raise
    for s in stages:
        s.publish()
    page = None
    if html_dir is not None:
        from mbaphases.html import link_from_asv

        page = html_dir / "index.html"
        link_from_asv(html_dir.parent, html_dir)
    status = EXIT_PASS if rep.verdict == "PASS" else EXIT_NOT_PASSED
    if not args.quiet:
        try:
            report.print_tables(rep, sys.stdout)
            print(f"\nreport: {out / 'report.md'}\nsummary: {out / 'summary.json'}")
            if page:
                print(f"page: {page}")
            sys.stdout.flush()
        except BrokenPipeError:
            # the reader stopped early (| head): the verdict stands, the rest is not printed
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
    return status
