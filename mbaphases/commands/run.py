"""mbaphases run: the formal A/B run with asv (locked, interleaved, raw runs kept), and runs added
until decisive."""
from __future__ import annotations

import sys
from pathlib import Path

from mbaphases import exits, inputs, until_decisive
from mbaphases.commands import target
from mbaphases.run import batch, prepare


def add_parser(sub) -> None:
    r = sub.add_parser("run", help="the formal A/B run with asv (locked, interleaved, raw runs kept)")
    r.add_argument("--config", default="asv.conf.json",
                   help="asv config: the target repository, results and environments (default: asv.conf.json)")
    r.add_argument("--pins", default="pins.toml", help="pins file: sides, cases, profiles, design and gate (default: pins.toml)")
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
                        "report's function table and flame graphs; in turns, after the verdicts and only of the "
                        "cases a candidate FAILs, for it and the baseline (default: pins 'profile_functions', off)")
    r.add_argument("--until-decisive", action="store_true",
                   help="after the pinned runs, add interleaved rounds while a case is INCONCLUSIVE")
    r.add_argument("--max-runs", type=int, default=10, help="with --until-decisive: most runs per side (default 10)")
    r.add_argument("--budget-min", type=float, default=120.0,
                   help="with --until-decisive: no new round after this many minutes (default 120)")
    target.add_design_arguments(r)
    r.add_argument("--deadline-min", type=float, default=None,
                   help="end within this many minutes of the command's start (a CI job's cap, less the report's "
                        "time): no pair or round starts that would not end by then, estimated from those so far; "
                        "every completed run is kept and the report says what is still open")
    target.add_fleet_arguments(r)
    r.add_argument("--resume", action="store_true",
                   help="if the newest batch of these pins on the machine was interrupted (or its command killed), "
                        "go on with it: its kept runs stay, only what its plan misses runs; otherwise a new batch")
    r.set_defaults(handler=main)


def main(args) -> int:
    deadline = target.deadline(args.deadline_min)
    pins = inputs.load_active_pins(Path(args.pins), args.profile)
    if args.baseline:
        pins["baseline"] = {**pins["baseline"], "ref": args.baseline}
    if args.candidate:
        pins["candidates"] = [{"ref": args.candidate, "label": pins["candidates"][0]["label"]}]
    design = target.design_setting(args, pins, args.field_repo)
    conf = target.target_conf(Path(args.config), pins, args.field_repo, args.field_package)
    runs = args.runs if args.runs is not None else int(pins["runs"])
    until = until_decisive.plan(pins, runs, args.max_runs, args.budget_min) if args.until_decisive else None
    only = [x.strip() for x in args.sides.split(",") if x.strip()] if args.sides else None
    try:
        with prepare.formal_run_lock(f"mbaphases run {conf}", 60 * args.lock_timeout_min):
            profile_functions = (args.profile_functions if args.profile_functions is not None
                                 else bool(pins.get("profile_functions", False)))
            return batch.run_sides(conf, pins, runs, args.machine, args.python, only, until,
                                    allow_other_hardware=args.allow_other_hardware,
                                    profile_functions=profile_functions, design=design, resume=args.resume,
                                    deadline=deadline, fleet=target.fleet_setting(args, pins))
    except prepare.LockBusy as e:
        print(f"error: {e}", file=sys.stderr)
        return exits.LOCK_TIMEOUT
