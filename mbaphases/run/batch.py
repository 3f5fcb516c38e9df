"""A formal batch: every side, >= 3 independent runs each, interleaved or in pairs, never overlapping
another formal run on this machine. It settles what runs (the design), where (the executor's slots),
and keeps the batch record; the entry measures, asv stores."""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from mbaphases import allocation, estimate, hardware, inputs, load, processes
from mbaphases import resume as resume_mod
from mbaphases import until_decisive as until_mod
from mbaphases.errors import UsageError
from mbaphases.run import prepare
from mbaphases.run import record as record_mod
from mbaphases.run.design import Design, from_record, pairs_of_round
from mbaphases.run.executors import blocks, fleets, local_node, shipping
from mbaphases.run.executors.local import LocalExecutor, slots_for
from mbaphases.run.progress import Progress
from mbaphases.stats import rules

RESUME_HINT = "the same command with --resume goes on with this batch"


@dataclass
class Batch:
    """One batch while it runs: its sides, design, executor and record."""
    pins: dict
    sides: list[dict]
    design: Design
    machine_dir: Path
    executor: LocalExecutor
    record: dict
    runs: int
    started: float
    now: float
    until_decisive: dict | None
    profile_functions: bool
    out: object
    prior: dict | None = None
    kept: list[dict] = field(default_factory=list)
    runs_under: str = ""  # the machine folders its runs are stored under (a fleet: one per hardware class)

    def pairs_of(self, k: int, among: list[dict] | None = None) -> list[tuple[dict, dict]]:
        return pairs_of_round(among or self.sides, self.pins.get("reference"), self.design.pairing, k)

    def runs_in(self, k: int, among: list[dict] | None = None) -> dict[str, int]:
        """Each side's runs in round ``k`` (of the sides ``among``)."""
        among = among or self.sides
        if self.design.paired:
            return {x["label"]: sum(x in pair for pair in self.pairs_of(k, among)) for x in self.sides}
        return {x["label"]: int(x in among) for x in self.sides}


def run_sides(conf_path: Path, pins: dict, runs: int, machine: str | None, python: str | None = None,
              only: list[str] | None = None, until_decisive: dict | None = None, out=sys.stdout,
              allow_other_hardware: bool = False, profile_functions: bool = False, design: Design | None = None,
              resume: bool = False, resume_hint: str = RESUME_HINT, deadline: float | None = None,
              fleet: blocks.Fleet | None = None) -> int:
    """Run every side ``runs`` times with asv in ``design`` (default: solo); returns the exit status
    (0: every run of every case succeeded; runs the deadline kept from starting are no failure).

    ``until_decisive`` ({max_runs, budget_s, confidence, threshold}): afterwards add
    rounds of every side while a candidate has an INCONCLUSIVE case.
    ``resume``: if the newest batch of these pins on the machine did not finish, go on with it
    (its plan: sides, runs, profiles, until-decisive, design), running only what its kept runs miss;
    otherwise a new batch.
    ``deadline`` (time.time()): no unit starts that would not end by then, estimated from the units so
    far (mbaphases.run.executors.local); every completed run is kept, the report decides on them.
    ``fleet``: the pair blocks run on a fleet's slots (a Ray cluster's or a Slurm partition's:
    mbaphases.run.executors.blocks), each hardware class's runs under a machine name of its own."""
    design = design or Design("solo")
    conf_path = Path(conf_path).resolve()
    conf = inputs.load_asv_conf(conf_path)
    suite_dir = conf_path.parent
    repo_path = prepare.local_repo(conf, suite_dir)
    if runs < 1:
        raise UsageError(f"--runs {runs} must be >= 1")
    _check_design(design, repo_path)
    machine = machine or prepare.default_machine(pins["active_profile"]["name"], design.paired)
    raw_dir = suite_dir / "raw-runs"  # beside results/, not in it: asv walks every folder under results/
    if not allow_other_hardware and fleet is None:
        prepare.check_same_hardware(raw_dir, machine)
    prior = _prior(raw_dir / machine, pins, resume, out)
    if prior is not None:
        # the batch's own plan, whatever this command line says
        runs, until_decisive = prior["runs"], prior.get("until_decisive")
        profile_functions = bool(prior.get("profile_functions"))
        only = [x["label"] for x in prior["sides"] if x["role"] != "baseline"]
        design = from_record(prior)
    # refused before anything is printed or measured
    slots = slots_for(design, hardware.profile_cpus(pins["active_profile"]))
    shipped = fleet is not None and fleet.files == "shipped"
    backend = None if fleet is None else fleets.join(
        fleet, design, until_decisive, slots.size, suite_dir,
        shipping.runtime_env(suite_dir, repo_path, conf) if shipped else None)
    sides = prepare.resolve_sides(pins, repo_path, only)
    if prior is not None:
        resume_mod.check_sides(prior, sides)
    if until_decisive is not None and prior is None:
        until_decisive = until_mod.settle_looks(until_decisive, design.paired, design.pairing == "round-robin",
                                                _earlier_runs(raw_dir / machine, sides))
    names = {x["sha"]: f"{x['label']} ({x['ref']})" for x in sides}
    for x in sides:
        print(f"{x['role']:<9} {x['sha']}  {x['label']} ({x['ref']})", file=out, flush=True)
    # a shipped fleet's nodes make the sides' environments themselves, from the sides' locks
    paired_here = design.paired and not shipped
    pythons = prepare.side_pythons(conf, conf_path, suite_dir, repo_path, sides, python, out) if paired_here else {}
    now = time.time()
    started = prior["started"] if prior else now
    batch_id = prior["batch"] if prior else f"{time.strftime('%Y%m%dT%H%M%S', time.localtime(started))}-{os.getpid()}"
    progress_file = suite_dir / ".asv" / f"progress-{batch_id}.json"
    progress_file.parent.mkdir(parents=True, exist_ok=True)
    env = _batch_env(pins, machine, raw_dir, batch_id, progress_file, allow_other_hardware, profile_functions, design)
    prepare.ensure_machine(conf_path, machine)
    prepare.set_aside_unreadable_results(suite_dir / conf.get("results_dir", "results") / machine, out)
    print(f"batch {batch_id}", file=out, flush=True)
    base = [sys.executable, "-m", "asv", "run", "--config", str(conf_path), "--machine", machine,
            "--record-samples", "--append-samples", "--show-stderr"]
    executor = LocalExecutor(base, conf, conf_path, suite_dir, repo_path, env, names, batch_id, slots, out, python, pythons,
                             deadline)
    runs_under = machine
    if fleet is not None:
        executor = blocks.FleetExecutor(executor, backend, machine, files=fleet.files)
        runs_under = blocks.class_machines(machine)
    elif design.paired:  # this machine as a fleet of one node: a pair block on every free slot
        executor = blocks.FleetExecutor(
            executor, local_node.LocalBackend(slots.available, len(slots.slots), suite_dir / ".asv" / "blocks", env),
            machine)
    b = Batch(pins, sides, design, raw_dir / machine, executor, {}, runs, started, now, until_decisive,
              profile_functions, out, prior, load.run_meta(raw_dir, runs_under, started) if prior else [], runs_under)
    b.record = _start_record(b, conf_path, machine, _plan(b))
    return _run(b, progress_file, names, resume_hint)


def _earlier_runs(machine_dir: Path, sides: list[dict]) -> int:
    """Runs a side the machine already holds that a look of this batch may pool: the baseline's
    count or the best-covered candidate's, whichever is smaller (an upper bound on the pairs)."""
    counts = [len(list((machine_dir / x["sha"]).glob("run*.meta.json"))) for x in sides]
    return min(counts[0], max(counts[1:], default=0))


def _check_design(design: Design, repo_path: Path | None) -> None:
    if design.paired and repo_path is None:
        raise UsageError(f"--design {design.kind} runs both sides of a pair from one existing environment, each from "
                         "its own checkout; it needs the target repository on this machine (--design solo runs "
                         "from a URL)")


def _prior(machine_dir: Path, pins: dict, resume: bool, out) -> dict | None:
    """The batch to go on with (--resume), or None: a new batch."""
    if not resume:
        return None
    prior = resume_mod.newest_record(machine_dir, pins["path"])
    if prior is None or not resume_mod.unfinished(prior):
        print("nothing to resume: " + (f"no batch of {pins['path']} on {machine_dir.name}" if prior is None else
                                       f"batch {prior['batch']} finished") + "; a new batch", file=out, flush=True)
        return None
    return prior


def _batch_env(pins: dict, machine: str, raw_dir: Path, batch: str, progress_file: Path,
               allow_other_hardware: bool, profile_functions: bool, design: Design) -> dict:
    """What every entry run of the batch is told: profile, machine, pins, cases, where raw runs go,
    the batch, the live progress file; whether to append to other hardware; in turns, the turn's length.
    Profiles: each run's entry profiles after its measured run, except in pairs, where the executor
    profiles the sides after the rounds (the measured runs' processes get no profiling: a block's
    staging store would profile its sides again in every block)."""
    profile_in_runs = profile_functions and not design.paired
    return {**os.environ, "MBAPHASES_PROFILE": pins["active_profile"]["name"], "MBAPHASES_MACHINE": machine,
            "MBAPHASES_PINS": pins["path"], "MBAPHASES_CASES": ",".join(pins["cases"]),
            "MBAPHASES_RAW_DIR": str(raw_dir), "MBAPHASES_BATCH": batch,
            "MBAPHASES_PROGRESS": str(progress_file),
            **({"MBAPHASES_TURN_MS": f"{design.turn_ms:g}"} if design.share_cpu and design.turn_ms else {}),
            **({"MBAPHASES_ALLOW_OTHER_HARDWARE": "1"} if allow_other_hardware else {}),
            **({"MBAPHASES_PYSPY": prepare.pyspy_path()} if profile_functions else {}),
            **({"MBAPHASES_PROFILE_FUNCTIONS": "1"} if profile_in_runs else {})}


def _plan(b: Batch) -> dict | None:
    """The plan said before the runs: the design and why, the slots, the estimate from this machine's
    earlier batches, and the allocation of steps and rounds (kept in the batch record)."""
    say = lambda text: print(text, file=b.out, flush=True)
    pins, cases, design = b.pins, b.pins["cases"], b.design
    say(f"design: {design.text()}; {design.why}")
    for line in b.executor.slots.lines(design) + getattr(b.executor, "plan_lines", list)():
        say(line)
    pairs = b.pairs_of(0)
    plan = (f"plan: {len(pairs)} pair{'s' if len(pairs) != 1 else ''} a round ({design.pairing}"
            + (", each pair's two sides in turns on one slot" if design.share_cpu else "")
            + f") x {len(cases)} cases x {b.runs} rounds" if design.paired
            else f"plan: {len(b.sides)} sides x {len(cases)} cases x {b.runs} runs")
    max_runs = b.until_decisive["max_runs"] if b.until_decisive else None
    if b.until_decisive:
        say(until_mod.plan_line(b.until_decisive))
    say(estimate.text(b.machine_dir / "batches", plan, 2 * len(pairs) if design.paired else len(b.sides), len(cases),
                      b.runs, max_runs, b.profile_functions, design.share_cpu))
    # where this machine's earlier runs of the design put the variance, and the steps and rounds
    # that reach the target at the least machine time
    allocated = allocation.plan(b.machine_dir, pins["active_profile"],
                                allocation.design_of(design.paired, design.share_cpu, design.pairing, len(b.sides)),
                                b.runs, max_runs, float(pins.get("target_half_width", allocation.TARGET_HALF_WIDTH)),
                                b.until_decisive["confidence"] if b.until_decisive else
                                float(pins.get("gate", {}).get("confidence", rules.DEFAULT_CONFIDENCE)))
    for line in allocation.text(allocated):
        say(line)
    return allocated


def _start_record(b: Batch, conf_path: Path, machine: str, allocated: dict | None) -> dict:
    """The batch record at its start (its plan, ``running``): the pins and the asv config it used (the
    report and find locate the config from here), the design and the slots it ran on."""
    pairs = b.pairs_of(0)
    record = {"batch": b.executor.batch, "machine": machine, "profile": b.pins["active_profile"]["name"],
              "started": b.started, "pins": str(Path(b.pins["path"]).resolve()), "config": str(conf_path),
              "cases": list(b.pins["cases"]), "profile_functions": b.profile_functions,
              "sides": [{k: x[k] for k in ("role", "label", "ref", "sha")} for x in b.sides], "runs": b.runs,
              "design": b.design.as_record(), "slots": b.executor.slots.as_record()}
    if b.design.paired:
        record["duet"] = {"pairing": b.design.pairing, "pairs": [[x["label"], y["label"]] for x, y in pairs],
                          "cpus": b.executor.slots.available, "share_cpu": b.design.share_cpu,
                          **({"turn_ms": b.design.turn_ms} if b.design.share_cpu and b.design.turn_ms else {})}
    if b.until_decisive is not None:
        record["until_decisive"] = b.until_decisive
    if b.executor.deadline is not None:
        record["deadline"] = {"at": b.executor.deadline, "not_started": 0}
    record.update(_executor_record(b))
    if allocated is not None:
        record["allocation"] = allocated
    attempts = []
    if b.prior is not None:
        attempts = b.prior.get("attempts") or [{"started": b.started}]
        if "ended" not in attempts[-1]:  # its command's own end was not recorded (killed): its last run's
            attempts[-1]["ended"] = max([m.get("ended", 0) for m in b.kept if m.get("batch") == b.executor.batch]
                                        + [attempts[-1]["started"]])
        done = resume_mod.runs_done(b.kept, b.executor.batch)
        print(f"resuming batch {b.executor.batch} ({record_mod.how_it_ended(b.prior)}): {sum(done.values())} of its "
              "runs kept", file=b.out, flush=True)
    record["attempts"] = attempts + [{"started": b.now, "pid": os.getpid()}]
    record_mod.write(b.machine_dir, {**record, "state": "running"})
    return record


def _executor_record(b: Batch) -> dict:
    """The blocks of a paired batch as they ended, and how busy they kept the slots: a fleet's under
    ``fleet`` (with its nodes), this machine's under ``node``."""
    if not isinstance(b.executor, blocks.FleetExecutor):
        return {}
    return {"node" if b.executor.one_machine else "fleet": b.executor.as_record()}


def _rounds(b: Batch, order: list[str], count: int, first: int, tag: str, skip: set[str] = frozenset()) -> int:
    """``count`` rounds of the sides ``order`` from round ``first``."""
    if not b.design.paired:
        return b.executor.run_solo(order, count, tag)
    among = [x for x in b.sides if x["sha"] in order]
    return b.executor.run_pairs(b.design, lambda k: b.pairs_of(k, among), count, first, skip,
                                len(b.record["attempts"]) - 1)


def _profile_decided(b: Batch) -> None:
    """In turns the function profiles run after the verdicts (a pair's two profiles would share its
    slot, so they run a side a slot, apart from the rounds), and only where they explain a decided
    change: the cases a candidate FAILs, for it and for the baseline it is compared with. A PASS or an
    open case has no slowdown to explain; the profiles of every side and case cost about as much
    as three rounds of the demo's pairs."""
    if isinstance(b.executor, blocks.FleetExecutor) and not b.executor.one_machine:  # it says why it profiles nothing
        b.executor.profile_sides([], b.machine_dir, {})
        return
    gate = b.pins.get("gate", {})
    confidence = float(gate.get("confidence", rules.DEFAULT_CONFIDENCE))
    if b.until_decisive:  # the level the report decides this batch at
        confidence = until_mod.stopping_level(b.until_decisive, max(int(b.record.get("looks") or 1), 1), confidence)
    failed = until_mod.failed_cases(b.executor.conf_path, b.pins, b.sides, b.machine_dir.name,
                                    float(gate.get("threshold", rules.DEFAULT_THRESHOLD)), confidence)
    cases_of = {x["sha"]: failed[x["label"]] for x in b.sides[1:] if failed.get(x["label"])}
    if cases_of:
        every = set().union(*cases_of.values())
        cases_of[b.sides[0]["sha"]] = [c for c in b.pins["cases"] if c in every]
    b.record["profiled_cases"] = {x["label"]: cases_of.get(x["sha"], []) for x in b.sides}
    if not cases_of:
        print("[profile] no candidate FAILs a case: no function profiles (they explain a decided slowdown)",
              file=b.out, flush=True)
        return
    failures = b.executor.profile_sides([x for x in b.sides if x["sha"] in cases_of], b.machine_dir, cases_of)
    b.record.setdefault("profile_failures", []).extend(failures)


def _run(b: Batch, progress_file: Path, names: dict, resume_hint: str) -> int:
    """The batch's rounds (resumed: what its kept runs miss), then until-decisive rounds; an
    interrupt keeps every completed run and says how to go on."""
    shas = [x["sha"] for x in b.sides]
    done = resume_mod.runs_done(b.kept, b.executor.batch)
    runs_by_side = {x["label"]: sum(b.runs_in(k)[x["label"]] for k in range(b.runs)) for x in b.sides}
    rounds_total = b.until_decisive["max_runs"] if b.until_decisive else b.runs
    planned = sum(sum(b.runs_in(k).values()) for k in range(rounds_total))
    progress = {"done_runs": b.runs}
    rc = 0
    try:
        with processes.terminate_as_interrupt(), Progress(progress_file, names, planned, b.machine_dir, b.started, b.out):
            rc = _pinned_rounds(b, shas, done)
            if b.until_decisive is not None:
                rc = _until_decisive_rounds(b, done, runs_by_side, progress, rc)
            if b.design.paired and b.profile_functions:
                _profile_decided(b)
    except KeyboardInterrupt as e:
        # every process the batch started has been ended (mbaphases.processes) before this line
        why = f" by {e}" if isinstance(e, processes.Interrupted) else ""
        # on a line of its own: asv's last line may have had no end
        print(f"\ninterrupted{why}: every completed run is kept under {b.machine_dir}; no process of the batch "
              "is left", file=b.out)
        b.record["interrupted"] = str(e) if isinstance(e, processes.Interrupted) else "SIGINT"
        print(resume_hint, file=b.out)
        rc = 130
    finally:
        progress_file.unlink(missing_ok=True)
    if b.executor.deadline is not None:
        b.record["deadline"]["not_started"] = b.executor.not_started
    b.record.update(_executor_record(b))
    return record_mod.finish(b.record, b.machine_dir, b.started, names, progress["done_runs"], runs_by_side, rc, b.out,
                             resume_hint, b.runs_under)


def _pinned_rounds(b: Batch, shas: list[str], done) -> int:
    if b.prior is None:
        return _rounds(b, shas, b.runs, 0, f"{int(b.started)}")
    if b.design.paired:
        return _rounds(b, shas, b.runs, 0, "", resume_mod.pairs_done(b.kept, b.executor.batch))
    rc = 0
    for j, order in enumerate(resume_mod.missing_rounds(done, shas, b.runs)):
        rc = _rounds(b, order, 1, 0, f"{int(b.now)}-resumed-{j + 1}") or rc
    return rc


def _until_decisive_rounds(b: Batch, done, runs_by_side: dict, progress: dict, rc: int) -> int:
    """Rounds added while a case is open, within the budget (which counts the batch's attempts, not
    the pause between them)."""
    # a resumed batch's extra rounds go on after the furthest one its kept runs reached
    progress["done_runs"] = max([b.runs, *done.values()]) if b.prior and not b.design.paired else b.runs
    budget_from = b.now - sum(x["ended"] - x["started"] for x in b.record["attempts"][:-1])
    until = dict(b.until_decisive)
    if b.executor.deadline is not None:  # no round begins after the deadline
        until["budget_s"] = min(until["budget_s"], b.executor.deadline - budget_from)

    def run_round(order: list[str], number: int) -> int:
        progress["done_runs"] = number  # kept current: an interrupted batch records what it ran
        for label, n in b.runs_in(number - 1, [x for x in b.sides if x["sha"] in order]).items():
            runs_by_side[label] += n
        return _rounds(b, order, 1, number - 1, f"{int(b.started)}-{number}")

    names = b.executor.names
    progress["done_runs"], rc = until_mod.add_rounds(
        until, b.executor.conf_path, b.pins, b.sides, b.machine_dir.name, names, b.record, budget_from,
        progress["done_runs"], rc, run_round, lambda: load.run_meta(b.machine_dir.parent, b.machine_dir.name, b.started),
        b.out)
    return rc
