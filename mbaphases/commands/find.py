"""mbaphases find: bisect a first-parent line (commits, or a pin repository's releases) for the
commit that moved a phase (mbaphases.find)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from mbaphases import exits, inputs
from mbaphases import find as find_mod
from mbaphases.commands import target
from mbaphases.errors import UsageError
from mbaphases.run import prepare
from mbaphases.stats import rules


def add_parser(sub) -> None:
    f = sub.add_parser("find", help="bisect the first-parent line from GOOD to BAD for the commit that moved a phase")
    f.add_argument("good", metavar="GOOD", help="the earlier commit (ref, SHA, or a pins side's label)")
    f.add_argument("bad", metavar="BAD", help="the later commit, which descends from GOOD along first parents")
    what = f.add_mutually_exclusive_group(required=True)
    what.add_argument("--phase", default=None, help="a part of the active time: " + ", ".join(find_mod.PARTS))
    what.add_argument("--metric", default=None, help="a whole-run metric: " + ", ".join(find_mod.METRICS))
    f.add_argument("--case", required=True, help="one of the pins' cases")
    f.add_argument("--config", default="asv.conf.json",
                   help="asv config: the target repository, results and environments (default: asv.conf.json)")
    f.add_argument("--pins", default="pins.toml", help="pins file: sides, cases, profiles, design and gate (default: pins.toml)")
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
    target.add_design_arguments(f)
    target.add_fleet_arguments(f)
    f.add_argument("--field-repo", default=None, help="search the field's repository (URL or path)")
    f.add_argument("--field-package", default=None, help="the field repository's package name")
    f.add_argument("--lock-timeout-min", type=float, default=120.0,
                   help="wait at most this long for another formal run to finish (default 120)")
    f.set_defaults(handler=main)


def main(args) -> int:
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
    design = target.design_setting(args, pins, args.field_repo)
    conf = target.target_conf(Path(args.config), pins, args.field_repo, args.field_package)
    machine = args.machine or prepare.default_machine(pins["active_profile"]["name"], design.paired)
    started = time.time()
    try:
        with prepare.formal_run_lock(f"mbaphases find {conf}", 60 * args.lock_timeout_min):
            search = find_mod.bisect(conf, pins, what, args.case, args.good, args.bad, runs=runs,
                                     max_batches=args.max_batches, budget_s=60 * args.budget_min,
                                     confidence=confidence, machine=machine, python=args.python, design=design,
                                     fleet=target.fleet_setting(args, pins))
    except prepare.LockBusy as e:
        print(f"error: {e}", file=sys.stderr)
        return exits.LOCK_TIMEOUT
    suite_dir = conf.resolve().parent
    out = suite_dir / "raw-runs" / machine / "find" / f"{time.strftime('%Y%m%dT%H%M%S', time.localtime(started))}.json"
    find_mod.record(search, out, started)
    print(search.verdict)
    if search.interrupted:
        print(f"the search so far is recorded in {out}")
        return 130
    if search.runs_needed:
        print(f"about {search.runs_needed} runs a side would decide it")
    print(f"wall {time.time() - started:.0f} s; the search is recorded in {out}")
    return 0 if search.found is not None else 1


