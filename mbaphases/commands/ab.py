"""mbaphases ab BASE CAND: one command for an A/B of two versions. It writes the pins file of the
comparison (kept beside the report, so the usual `mbaphases run/report --pins` repeat it), runs
it formally and reports it.

BASE and CAND are requirements of the published framework (``'unilab[mujoco,motrix]==1.4.0'``),
or with ``--repo`` two refs of a repository (the demo target's or a checkout of the field's); a
``--swap PKG==V`` replaces one package on the candidate side (CAND then defaults to BASE)."""
from __future__ import annotations

import copy
import os
import re
import shutil
import sys
from pathlib import Path

import tomli_w
from packaging.requirements import InvalidRequirement, Requirement

from mbaphases import ci_summary, exits, inputs
from mbaphases.commands import report, target
from mbaphases.errors import UsageError
from mbaphases.run import batch, prepare
from mbaphases.run import design as design_mod

# the shipped pins each kind of side starts from: cases, profiles, gate, how sides are installed
TEMPLATES = {"published": "pins.unilab.toml", "demo": "pins.toml", "field": "pins.field.toml"}


def add_parser(sub) -> None:
    a = sub.add_parser("ab", help="an A/B of two versions in one command: pins written, run, reported")
    a.add_argument("base", help="the baseline: a requirement ('unilab[mujoco,motrix]==1.4.0'), or a ref with --repo")
    a.add_argument("cand", nargs="?", default=None,
                   help="the candidate, of the same kind (default with --swap: the baseline's requirement)")
    a.add_argument("--swap", action="append", default=[], metavar="PKG==V",
                   help="on the candidate side, this package replaced (installed without dependencies; repeatable)")
    a.add_argument("--repo", default=None, help="BASE and CAND are refs of this repository (the demo target or the "
                                                 "field's checkout)")
    a.add_argument("--cases", default=None, help="comma list of cases (default: the template pins' seven)")
    a.add_argument("--profile", default=None, help="profile of the template pins (default: its 'profile')")
    a.add_argument("--runs", type=int, default=None, help="independent runs per side (default: the template's)")
    a.add_argument("--out", default=None, help="where the pins file, report and page go (default: reports/ab-<labels>)")
    a.add_argument("--machine", default=None, help="asv machine name (default: <host>-<hardware>-<profile>)")
    a.add_argument("--python", default=None, help="use this existing python instead of building environments "
                                                   "(refs of a repository only)")
    target.add_design_arguments(a)
    target.add_fleet_arguments(a)
    a.add_argument("--deadline-min", type=float, default=None,
                   help="end the runs within this many minutes (mbaphases run --deadline-min): a CI job's cap less "
                        "the environments' and the report's time; the report says what is still open")
    a.add_argument("--summary", default=None, metavar="FILE",
                   help="also write a short Markdown summary (the gate per case with its interval, the phases that "
                        "moved with their top function, where the page is) for a CI step summary or a pull-request "
                        "comment")
    a.add_argument("--lock-timeout-min", type=float, default=120.0,
                   help="wait at most this long for another formal run to finish (default 120)")
    a.set_defaults(handler=main)


def _label(requirement: str, flag: str) -> str:
    """'unilab[mujoco,motrix]==1.4.0' -> 'unilab 1.4.0' (the requirement itself when not one version)."""
    try:
        req = Requirement(requirement)
    except InvalidRequirement:
        raise UsageError(f"{flag} {requirement!r} is not a requirement (valid: e.g. 'unilab[mujoco,motrix]==1.5.2', "
                         "or refs with --repo)") from None
    pinned = [s.version for s in req.specifier if s.operator == "=="]
    return f"{req.name} {pinned[0]}" if len(pinned) == 1 else requirement


def _kind(args) -> str:
    if args.repo is None:
        if args.python:
            raise UsageError("--python runs refs of a repository in an existing environment; a requirement side "
                             "is installed into its own (give --repo, or drop --python)")
        return "published"
    if args.swap:
        raise UsageError("--swap replaces a package of an installed requirement: give BASE as a requirement, "
                         "not --repo refs")
    repo = Path(args.repo)
    if not (repo / ".git").exists():
        raise UsageError(f"--repo {repo} is not a git repository (valid: the demo target, mbaphases demo-repo, or a "
                         "checkout of the field's repository)")
    demo = Path(inputs.load_asv_conf(Path("asv.conf.json"))["repo"]) if Path("asv.conf.json").is_file() else None
    return "demo" if demo is not None and repo.resolve() == demo.resolve() else "field"


def sides(args, kind: str) -> tuple[dict, dict]:
    """(baseline, candidate) tables of the pins file."""
    if kind != "published":
        if args.cand is None:
            raise UsageError("CAND is missing: give the candidate's ref")
        for ref in (args.base, args.cand):
            prepare.resolve_ref(Path(args.repo), ref)
        return {"ref": args.base, "label": args.base}, {"ref": args.cand, "label": args.cand}
    base = {"label": _label(args.base, "BASE"), "install": args.base}
    if args.cand is None and not args.swap:
        raise UsageError("CAND is missing: give the candidate's requirement, or --swap PKG==V")
    cand_req = args.cand or args.base
    cand = {"label": _label(cand_req, "CAND"), "install": cand_req}
    if args.swap:
        for s in args.swap:
            if "==" not in s:
                raise UsageError(f"--swap {s!r} names no version (valid: PKG==V, e.g. unisim-core==2.1.0)")
        cand["swap"] = list(args.swap)
        cand["label"] += " + " + " + ".join(_label(s, "--swap") for s in args.swap)
    if cand["label"] == base["label"]:
        raise UsageError(f"BASE and CAND are the same ({args.base}); give two versions, or --swap")
    return base, cand


def pins_doc(args, kind: str) -> dict:
    """The template pins with the two sides, the cases, profile and runs asked for."""
    template = Path(TEMPLATES[kind])
    doc = copy.deepcopy(inputs.read_toml(template, "template pins"))
    base, cand = sides(args, kind)
    for key in ("candidate", "candidates", "reference"):
        doc.pop(key, None)
    doc["baseline"], doc["candidates"] = base, [cand]
    if args.cases:
        doc["cases"] = [c.strip() for c in args.cases.split(",") if c.strip()]
        unknown = [c for c in doc["cases"] if c.count("/") != 2]
        if unknown:
            raise UsageError(f"--cases {unknown[0]!r} is not <algo>/<task>/<sim>")
    if args.profile:
        if args.profile not in doc.get("profiles", {}):
            raise UsageError(f"--profile {args.profile!r} is not a profile of {template}; valid: "
                             f"{', '.join(doc.get('profiles', {}))}")
        doc["profile"] = args.profile
    if args.runs is not None:
        if args.runs < 1:
            raise UsageError(f"--runs {args.runs} must be >= 1")
        doc["runs"] = args.runs
    # the design the comparison runs in, written out so that `mbaphases run --pins FILE` adds runs of the same
    chosen = target.design_setting(args, doc, args.repo if kind == "field" else None)
    for key in ("duet", "duet_share_cpu", "duet_pairing", "duet_turn_ms"):
        doc.pop(key, None)
    doc.update(chosen.as_pins())
    exceptions = doc.get("gate", {}).get("exceptions")
    if exceptions:
        # the maintainer's exceptions still apply; the path is the template's, relative to its folder
        doc["gate"]["exceptions"] = str((template.parent / exceptions).resolve())
    if kind == "published":
        # a pin repository of its own: the comparison's commits never move another pins file's tags
        doc["published"] = {**doc["published"], "repo": f"published-ab/{slug(base['label'], cand['label'])}"}
    return doc


def slug(base: str, cand: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", f"{base}-vs-{cand}").strip("-")


def main(args) -> int:
    deadline = target.deadline(args.deadline_min)
    summary_path = inputs.writable_file(Path(args.summary), "--summary") if args.summary else None
    if summary_path is not None and args.fleet:
        raise UsageError("--summary with --fleet: a fleet's report is one per hardware class; "
                         "`mbaphases report --machine M --out DIR` writes each class's summary.json")
    kind = _kind(args)
    doc = pins_doc(args, kind)
    name = slug(doc["baseline"]["label"], doc["candidates"][0]["label"])
    out = inputs.writable_dir(Path(args.out or f"reports/ab-{name}"), "--out")
    made_out, pins_path = not out.exists(), out / f"pins.ab-{name}.toml"
    had_pins = pins_path.exists()
    out.mkdir(parents=True, exist_ok=True)
    checked = out / f".pins.ab-{name}.{os.getpid()}.toml"
    try:
        # checked as any pins file is before it is kept: a bad one leaves nothing behind
        checked.write_text(_header(pins_path) + tomli_w.dumps(doc))
        inputs.load_active_pins(checked)
        checked.replace(pins_path)
        pins = inputs.load_active_pins(pins_path)
        conf = target.target_conf(Path("asv.conf.json"), pins, args.repo if kind == "field" else None, None)
    except BaseException:
        checked.unlink(missing_ok=True)
        if not had_pins:
            pins_path.unlink(missing_ok=True)
        if made_out:
            shutil.rmtree(out, ignore_errors=True)
        raise
    print(f"pins: {pins_path}", flush=True)
    runs = args.runs if args.runs is not None else int(pins["runs"])
    # the run takes its design from the file the user will repeat, not from a second copy of the choice
    design = design_mod.settle(pins, takes_turns=target.entry_takes_turns(args.repo if kind == "field" else None))
    fleet = target.fleet_setting(args, pins)
    try:
        with prepare.formal_run_lock(f"mbaphases ab {pins_path}", 60 * args.lock_timeout_min):
            rc = batch.run_sides(conf, pins, runs, args.machine, args.python,
                                  profile_functions=bool(pins.get("profile_functions", False)), design=design,
                                 deadline=deadline, fleet=fleet)
    except prepare.LockBusy as e:
        print(f"error: {e}", file=sys.stderr)
        return exits.LOCK_TIMEOUT
    if rc not in (0, 1):
        return rc  # interrupted: every completed run is kept, the report can follow later
    machine = args.machine or prepare.default_machine(pins["active_profile"]["name"], design.paired)
    opts = report.ReportOptions(out=str(out), config=str(conf), pins=str(pins_path), machine=machine,
                                html=str(out / "page"))
    if fleet is not None:  # one report per hardware class, and whether they agree
        return max(report.per_class(opts, report.fleet_classes(opts)), rc)
    verdict, _ = report.make_report(opts)  # prints where the report and its page are
    if summary_path is not None:
        ci_summary.write(out / "summary.json", summary_path, str(out / "page" / "index.html"))
        print(f"summary: {summary_path}", flush=True)
    return max(verdict, rc)


def _header(pins_path: Path) -> str:
    return (f"# The A/B `mbaphases ab` ran. Repeat or extend it with the usual commands:\n"
            f"#   mbaphases run --pins {pins_path}\n#   mbaphases report --pins {pins_path} --out DIR\n\n")
