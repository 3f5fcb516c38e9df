"""mbaphases command line."""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from pathlib import Path

from mbaphases import find as find_mod
from mbaphases import inputs, published, runner
from mbaphases.commands import bundle_command, report_command
from mbaphases.demo_repo import generate, generate_field
from mbaphases.errors import UsageError
from mbaphases.stats import rules


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="mbaphases", description="A/B benchmark suite for direct vs manager-based env runtimes")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    d = sub.add_parser("demo-repo", help="(re)generate the demo target repository")
    d.add_argument("--path", default="demo-target")
    d.add_argument("--layout", choices=("demo", "field"), default="demo",
                   help="demo: the demo history; field: a repository shaped like the field's (uv lock, extras, "
                        "entry and configs where its eras put them)")
    r = sub.add_parser("run", help="the formal A/B run with asv (locked, interleaved, raw runs kept)")
    r.add_argument("--config", default="asv.conf.json")
    r.add_argument("--pins", default="pins.toml")
    r.add_argument("--profile", default=None, help="profile in the pins file (default: its 'profile')")
    r.add_argument("--runs", type=int, default=None, help="independent runs per side (default: pins 'runs')")
    r.add_argument("--machine", default=None,
                   help="asv machine name (default: <host>-<hardware fingerprint>-<profile>)")
    r.add_argument("--allow-other-hardware", action="store_true",
                   help="append to a --machine whose stored runs were measured on other hardware")
    r.add_argument("--python", default=None, help="use this existing python instead of building environments")
    r.add_argument("--field-repo", default=None, help="run against the field's repository (URL or path)")
    r.add_argument("--field-package", default=None, help="the field repository's package name")
    r.add_argument("--baseline", default=None, help="the baseline's ref (SHA or tag), instead of the pins'")
    r.add_argument("--candidate", default=None, help="one candidate's ref (SHA or tag), instead of the pins' candidates")
    r.add_argument("--lock-timeout-min", type=float, default=120.0,
                   help="wait at most this long for another formal run to finish (default 120)")
    r.add_argument("--sides", default=None, help="comma list of side labels to run (the baseline always runs)")
    r.add_argument("--profile-functions", action="store_true", default=None,
                   help="one extra entry run per side and case under py-spy, outside the measured runs, for the "
                        "report's function table and flame graphs (default: pins 'profile_functions', off)")
    r.add_argument("--until-decisive", action="store_true",
                   help="after the pinned runs, add interleaved rounds while a case is INCONCLUSIVE")
    r.add_argument("--max-runs", type=int, default=10, help="with --until-decisive: most runs per side (default 10)")
    r.add_argument("--budget-min", type=float, default=120.0,
                   help="with --until-decisive: no new round after this many minutes (default 120)")
    rp = sub.add_parser("report", help="tables, gate and report from stored runs")
    rp.add_argument("--out", required=True, help="output directory (report.md, *.csv, summary.json)")
    rp.add_argument("--config", default="asv.conf.json", help="asv config (results dir, target repo)")
    rp.add_argument("--pins", default=None, help="sides, labels, cases and gate defaults (default: pins.toml if present)")
    rp.add_argument("--results", default=None, help="asv results directory (default: from --config)")
    rp.add_argument("--machine", default=None)
    rp.add_argument("--baseline", default=None, help="revision: SHA, prefix or branch (default: pins)")
    rp.add_argument("--candidate", default=None)
    rp.add_argument("--baseline-raw", nargs="+", default=None, help="raw entry JSON files or globs, one per run")
    rp.add_argument("--candidate-raw", nargs="+", default=None)
    rp.add_argument("--sides", default=None, help="comma list of candidate labels to report (default: every candidate in the pins)")
    rp.add_argument("--reference", default=None,
                    help="the ledger's reference candidate (default: pins 'reference', else the first candidate)")
    rp.add_argument("--baseline-label", default=None)
    rp.add_argument("--candidate-label", default=None)
    rp.add_argument("--threshold", type=float, default=None)
    rp.add_argument("--min-runs", type=int, default=None)
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
    rp.add_argument("--quiet", action="store_true")
    rp.add_argument("--bundle", default=None, help="an evidence bundle (mbaphases bundle) instead of other inputs")
    bd = sub.add_parser("bundle", help="one archive with the sides' raw runs, asv results, pins and report")
    bd.add_argument("--out", required=True, help="the archive to write (.tar.gz)")
    for flag in ("--config", "--pins", "--results", "--machine", "--baseline", "--candidate", "--sides",
                 "--reference", "--exceptions", "--baseline-label", "--candidate-label", "--batch"):
        bd.add_argument(flag, default="asv.conf.json" if flag == "--config" else None)
    for flag, kind in (("--threshold", float), ("--min-runs", int), ("--confidence", float)):
        bd.add_argument(flag, type=kind, default=None)
    bd.add_argument("--dispersion-limit", type=float, default=0.05)
    bd.add_argument("--cross-machine", action="store_true")
    f = sub.add_parser("find", help="bisect the first-parent line from GOOD to BAD for the commit that moved a phase")
    f.add_argument("good", metavar="GOOD", help="the earlier commit (ref, SHA, or a pins side's label)")
    f.add_argument("bad", metavar="BAD", help="the later commit, which descends from GOOD along first parents")
    what = f.add_mutually_exclusive_group(required=True)
    what.add_argument("--phase", default=None, help="a part of the active time: " + ", ".join(find_mod.PARTS))
    what.add_argument("--metric", default=None, help="a whole-run metric: " + ", ".join(find_mod.METRICS))
    f.add_argument("--case", required=True, help="one of the pins' cases")
    f.add_argument("--config", default="asv.conf.json")
    f.add_argument("--pins", default="pins.toml")
    f.add_argument("--profile", default=None, help="profile in the pins file (default: its 'profile')")
    f.add_argument("--runs", type=int, default=None, help="runs per side in each batch (default: pins 'runs')")
    f.add_argument("--max-batches", type=int, default=3,
                   help="most batches per decision before it says it cannot tell (default 3)")
    f.add_argument("--budget-min", type=float, default=120.0, help="no new batch after this many minutes (default 120)")
    f.add_argument("--confidence", type=float, default=None,
                   help="the whole search's confidence, split over its decisions (default: pins gate.confidence, 0.90)")
    f.add_argument("--machine", default=None,
                   help="asv machine name (default: <host>-<hardware fingerprint>-<profile>)")
    f.add_argument("--python", default=None, help="use this existing python instead of building environments")
    f.add_argument("--field-repo", default=None, help="search the field's repository (URL or path)")
    f.add_argument("--field-package", default=None, help="the field repository's package name")
    f.add_argument("--lock-timeout-min", type=float, default=120.0,
                   help="wait at most this long for another formal run to finish (default 120)")
    pb = sub.add_parser("publish", help="asv publish (html/)")
    pb.add_argument("--config", default="asv.conf.json")
    return p


def _target_conf(args, pins: dict) -> Path:
    """The asv config of the pins' target: as given, the field repository's, or the pin
    repository of a [published] pins file (generated first)."""
    conf = Path(args.config)
    if not conf.is_file():
        raise UsageError(f"asv config {conf} not found")
    if published.is_published(pins):
        if args.field_repo:
            raise UsageError("--field-repo with a [published] pins file: the published target's sides are what "
                             "its pins install; give one or the other")
        # the sides' pin repository (one commit per side: its lock, entry and assets), then asv as usual
        return published.asv_conf(pins, conf.resolve().parent, published.generate(pins, conf.resolve().parent))
    if args.field_repo:
        # asv resolves relative paths against the config's folder: the copy sits beside it
        template = conf.parent / "asv.field.conf.json"
        if not template.is_file():
            raise UsageError(f"field asv config {template} not found")
        field = pins.get("field", {})
        return runner.field_conf(template, args.field_repo, args.field_package or field.get("package"),
                                 conf.parent / "asv.field.resolved.conf.json", field)
    return conf


def _find(args) -> int:
    """0: the commit that moved it is named; 1: the search cannot tell (said why, and how many runs would)."""
    pins = inputs.load_active_pins(Path(args.pins), args.profile)
    what = args.phase or args.metric
    valid = find_mod.PARTS if args.phase else find_mod.METRICS
    if what not in valid:
        raise UsageError(f"--{'phase' if args.phase else 'metric'} {what!r} is not one; valid: {', '.join(valid)}")
    if args.case not in pins["cases"]:
        raise UsageError(f"--case {args.case!r} is not a case of {args.pins}; valid: {', '.join(pins['cases'])}")
    runs = args.runs if args.runs is not None else int(pins["runs"])
    if runs < 2:
        raise UsageError(f"--runs {runs} must be >= 2 (an interval needs runs on both sides)")
    if args.max_batches < 1:
        raise UsageError(f"--max-batches {args.max_batches} must be >= 1")
    if not (args.budget_min > 0):
        raise UsageError(f"--budget-min {args.budget_min} must be > 0")
    confidence = args.confidence
    if confidence is None:
        confidence = float(pins.get("gate", {}).get("confidence", rules.DEFAULT_CONFIDENCE))
    if not 0.5 <= confidence < 1:
        raise UsageError(f"--confidence {confidence} must be in [0.5, 1)")
    conf = _target_conf(args, pins)
    machine = args.machine or runner.default_machine(pins["active_profile"]["name"])
    started = time.time()
    try:
        with runner.formal_run_lock(f"mbaphases find {conf}", 60 * args.lock_timeout_min):
            search = find_mod.bisect(conf, pins, what, args.case, args.good, args.bad, runs=runs,
                                     max_batches=args.max_batches, budget_s=60 * args.budget_min,
                                     confidence=confidence, machine=machine, python=args.python)
    except runner.LockBusy as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_LOCK_TIMEOUT
    suite_dir = conf.resolve().parent
    out = suite_dir / "raw-runs" / machine / "find" / f"{time.strftime('%Y%m%dT%H%M%S', time.localtime(started))}.json"
    find_mod.record(search, out, started)
    print(search.verdict)
    if search.runs_needed:
        print(f"about {search.runs_needed} runs a side would decide it")
    print(f"wall {time.time() - started:.0f} s; the search is recorded in {out}")
    return 0 if search.found is not None else 1


def _run(args) -> int:
    if args.command == "demo-repo":
        shas = (generate_field if args.layout == "field" else generate)(Path(args.path))
        for ref, sha in shas.items():
            print(f"{ref}\t{sha}")
        return 0
    if args.command == "find":
        return _find(args)
    if args.command == "run":
        pins = inputs.load_active_pins(Path(args.pins), args.profile)
        if args.baseline:
            pins["baseline"] = {**pins["baseline"], "ref": args.baseline}
        if args.candidate:
            pins["candidates"] = [{"ref": args.candidate, "label": pins["candidates"][0]["label"]}]
        conf = _target_conf(args, pins)
        runs = args.runs if args.runs is not None else int(pins["runs"])
        until = None
        if args.until_decisive:
            if args.max_runs < runs:
                raise UsageError(f"--max-runs {args.max_runs} must be >= the pinned runs ({runs})")
            if not (args.budget_min > 0):
                raise UsageError(f"--budget-min {args.budget_min} must be > 0")
            g = pins.get("gate", {})
            confidence = float(g.get("confidence", rules.DEFAULT_CONFIDENCE))
            looks = args.max_runs - runs + 1
            # repeated looks inflate the error: split it evenly over the planned looks (Bonferroni)
            until = {"max_runs": args.max_runs, "budget_s": 60 * args.budget_min, "planned_looks": looks,
                     "confidence": rules.split_confidence(confidence, looks), "nominal_confidence": confidence,
                     "threshold": float(g.get("threshold", rules.DEFAULT_THRESHOLD))}
        only = [x.strip() for x in args.sides.split(",") if x.strip()] if args.sides else None
        try:
            with runner.formal_run_lock(f"mbaphases run {conf}", 60 * args.lock_timeout_min):
                profile_functions = (args.profile_functions if args.profile_functions is not None
                                     else bool(pins.get("profile_functions", False)))
                return runner.run_sides(conf, pins, runs, args.machine, args.python, only, until,
                                        allow_other_hardware=args.allow_other_hardware,
                                        profile_functions=profile_functions)
        except runner.LockBusy as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_LOCK_TIMEOUT
    if args.command == "report":
        return report_command(args)
    if args.command == "bundle":
        return bundle_command(args)
    if args.command == "publish":
        conf = Path(args.config)
        runner.load_asv_conf(conf)
        return runner.publish(conf)
    raise UsageError(f"unknown command {args.command!r}")


EXIT_USAGE, EXIT_INTERNAL = 2, 3
EXIT_LOCK_TIMEOUT = 75  # EX_TEMPFAIL: another formal run kept the machine


def main(argv=None) -> int:
    """0/1 are verdicts only: bad input is 2, an internal error 3 (traceback in a log file)."""
    try:
        return _run(build_parser().parse_args(argv))
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - the contract: one line, the traceback kept
        log = Path(tempfile.gettempdir()) / f"mbaphases-error-{time.strftime('%Y%m%d-%H%M%S')}.log"
        log.write_text(traceback.format_exc())
        print(f"error: internal error {type(e).__name__}: {e} (traceback in {log})", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
