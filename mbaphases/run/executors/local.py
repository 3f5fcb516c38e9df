"""This machine's CPUs as slots, and the units of a batch run on them.

A slot is a set of CPUs of the profile's size (the CPUs its thread pools use), so each side of a
pair runs the program that was pinned. Solo runs take the whole process's CPUs; a pair in turns
takes one slot for both sides; a pair at once one slot a side. Where the host has fewer CPUs than
the profile asks, the slots are as large as it allows, and the plan and every verdict say so.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from mbaphases import processes
from mbaphases.errors import UsageError
from mbaphases.run import design as design_mod
from mbaphases.run.prepare import worktrees


@dataclass(frozen=True)
class Slots:
    slots: list[list[int]]  # each slot's CPUs
    profile_cpus: int
    available: list[int]

    @property
    def size(self) -> int:
        return len(self.slots[0])

    @property
    def short(self) -> bool:
        return self.size < self.profile_cpus

    def lines(self, design: design_mod.Design) -> list[str]:
        """What the plan says of where the units run, and, on fewer CPUs than the profile asks, why."""
        where = ", ".join("CPU " + ",".join(map(str, s)) for s in self.slots)
        if not design.paired:
            lines = [f"slots: each run on the process's {self.size} CPU{'s' if self.size != 1 else ''} ({where})"]
        else:
            at_once = len(self.slots) if design.share_cpu else len(self.slots) // 2
            lines = [f"slots: {len(self.slots)} slot{'s' if len(self.slots) != 1 else ''} of {self.size} "
                     f"CPU{'s' if self.size != 1 else ''} ({where}); "
                     + ("both sides of a pair on one slot" if design.share_cpu else "one slot a side")
                     + f", {at_once} pair{'s' if at_once != 1 else ''} at a time"]
        if self.short:
            lines.append(f"the profile asks for {self.profile_cpus} CPUs a side and this host gives {self.size} "
                         f"(of {len(self.available)}): every pool at {self.size} thread{'s' if self.size != 1 else ''}, "
                         "a smaller program than the one pinned; every verdict says so")
        return lines

    def as_record(self) -> dict:
        return {"slots": self.slots, "profile_cpus": self.profile_cpus, "available": self.available,
                "short": self.short}


def slots_for(design: design_mod.Design, wanted: int, available: list[int] | None = None) -> Slots:
    """This process's CPUs cut into slots of the profile's size (as large as the host allows)."""
    cpus = sorted(available if available is not None else os.sched_getaffinity(0))
    if not design.paired:
        return Slots([cpus], wanted, cpus)
    sides_at_once = 1 if design.share_cpu else 2
    if len(cpus) < sides_at_once:
        raise UsageError(f"--design pairs runs two sides at once, a CPU each; this process may use {len(cpus)} "
                         f"({cpus}); --design turns runs a pair on one CPU")
    size = max(1, min(wanted, len(cpus) // sides_at_once))
    return Slots([cpus[i * size:(i + 1) * size] for i in range(len(cpus) // size)], wanted, cpus)


@dataclass
class LocalExecutor:
    """Runs a batch's units on this machine: asv for every run, each started in the slot it got."""
    base: list[str]  # asv run, up to the commits
    conf: dict
    conf_path: Path
    suite_dir: Path
    repo_path: Path | None
    env: dict
    names: dict
    batch: str
    slots: Slots
    out: object = sys.stdout
    python: str | None = None  # an existing environment for solo runs
    pythons: dict = field(default_factory=dict)  # each side's python in pairs
    deadline: float | None = None  # no unit starts that would not end by then (time.time())
    unit_seconds: list[float] = field(default_factory=list)  # how long each unit (a block, a round) took
    not_started: int = 0  # units the deadline kept from starting

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def late_by(self) -> float | None:
        """How long after the deadline the next unit would end, estimated from the units so far (None:
        in time, no deadline, or nothing to estimate from: the first unit always starts)."""
        if self.deadline is None or not self.unit_seconds:
            return None
        late = time.time() + statistics.median(self.unit_seconds) - self.deadline
        return late if late > 0 else None

    def fits(self, what: str, units: int = 1) -> bool:
        """Whether the next unit would end before the deadline; said once when it would not, and counted
        (the batch record's units that never started)."""
        late = self.late_by()
        if late is None:
            return True
        if not self.not_started:
            self.say(f"[deadline] not starting {what}: at about {statistics.median(self.unit_seconds):.0f} s a unit "
                     f"it would end {late:.0f} s after the deadline; every completed run is kept")
        self.not_started += units
        return False

    def timed(self, started: float) -> None:
        self.unit_seconds.append(time.time() - started)

    def run_solo(self, shas: list[str], rounds: int, tag: str) -> int:
        """``rounds`` interleaved rounds over ``shas`` (asv reverses the order every other round)."""
        if self.python is None and self.deadline is not None and rounds > 1:
            rc = 0
            for k in range(rounds):
                order = shas if k % 2 == 0 else shas[::-1]
                rc = self.run_solo(order, 1, f"{tag}-{k + 1}") or rc
            return rc
        if self.python is None:
            if not self.fits("a round"):
                return 0
            started = time.time()
            hashfile = self.suite_dir / ".asv" / f"hashes-{tag}.txt"
            hashfile.parent.mkdir(parents=True, exist_ok=True)
            hashfile.write_text("\n".join(shas) + "\n")
            cmd = self.base + [f"HASHFILE:{hashfile}", "-a", f"rounds={rounds}"]
            cmd += ["--interleave-rounds"] if rounds > 1 else []
            self.say("$ " + " ".join(cmd[1:]))
            code = processes.run(cmd, self.suite_dir, self.env)
            self.timed(started)
            return code
        # an existing environment: one asv invocation per run and side, the order reversed every round
        trees = worktrees(self.suite_dir, self.repo_path, shas)
        rc = 0
        for k in range(rounds):
            for sha in (shas if k % 2 == 0 else shas[::-1]):
                if not self.fits(f"round {k + 1}'s run of {self.names[sha]}"):
                    continue
                started = time.time()
                cmd = self.existing_command(sha, self.python)
                self.say(f"[round {k + 1}/{rounds}] {self.names[sha]}: $ " + " ".join(cmd[1:]))
                # existing environments get no ASV_* variables: name the checkout and commit; every run
                # is made whatever the earlier ones returned: the first failure is the status
                code = processes.run(cmd, self.suite_dir,
                                     {**self.env, "MBAPHASES_TARGET_DIR": str(trees / sha), "MBAPHASES_COMMIT": sha})
                self.timed(started)
                rc = rc or code
        return rc

    def existing_command(self, sha: str, python: str) -> list[str]:
        """asv for one run of ``sha`` in an existing environment: asv takes no range there and runs the
        head of every configured branch, so a config copy naming only this commit (one per commit:
        two may run at once in a pair)."""
        one = self.conf_path.parent / f"asv.existing.{sha[:12]}.resolved.conf.json"  # beside its config
        one.write_text(json.dumps({**self.conf, "branches": [sha]}, indent=2))
        cmd = [c if c != str(self.conf_path) else str(one) for c in self.base]
        return cmd + ["-E", f"existing:{python}", "--set-commit-hash", sha, "-a", "rounds=1"]

    def run_pair(self, design, item: tuple, pair_count: dict, attempt, trees: Path) -> list[int]:
        """One pair on this executor's slots (a block on its node: mbaphases.run.executors.blocks), to
        its end; each side's exit status. In turns both sides share the first slot; at once each has
        its own (the slots' roles swapped every round with the sides' order)."""
        started: list[tuple] = []
        procs: list = []
        try:
            self._start_pair(design, item, pair_count, attempt, trees, started, procs)
        except BaseException:
            processes.end_all(procs)  # interrupted while a side waits for the next's start
            raise
        return _wait_pairs(started)

    def _start_pair(self, design, item: tuple, pair_count: dict, attempt, trees: Path,
                    started: list, procs: list) -> None:
        name, i, pair, k = item
        ordered = pair if k % 2 == 0 else pair[::-1]
        name += f".{attempt}" if attempt else ""
        barrier = self.suite_dir / ".asv" / "duet" / self.batch / name
        for role, x in enumerate(ordered):
            if started:
                _until_at_barrier(*started[-1])
            # at once, the sides' slots swap every round with their order (``ordered``)
            slot = self.slots.slots[0 if design.share_cpu else role]
            where = "CPU " + ",".join(map(str, slot))
            self.say(f"[pair round {k + 1}, pair {i + 1}/{pair_count[k]}] {where}"
                     + (f" shared, turn {role + 1}" if design.share_cpu else "") + f": {self.names[x['sha']]}")
            cmd = self.existing_command(x["sha"], self.pythons[x["sha"]])
            proc = processes.start(cmd, self.suite_dir, {
                **self.env, "MBAPHASES_TARGET_DIR": str(trees / x["sha"]), "MBAPHASES_COMMIT": x["sha"],
                "MBAPHASES_DUET_DIR": str(barrier), "MBAPHASES_DUET_PAIR": f"{self.batch}/{name}",
                "MBAPHASES_DUET_ROLE": str(role), "MBAPHASES_DUET_CPU": str(slot[0]),
                "MBAPHASES_DUET_PARTNER": ordered[1 - role]["sha"], "MBAPHASES_DUET_ROUND": str(k + 1),
                **({"MBAPHASES_DUET_SHARE_CPU": "1"} if design.share_cpu else {})}, cpus=slot, into=procs)
            started.append((proc, barrier, role))

    def profile_sides(self, sides: list[dict], machine_dir: Path, cases_of: dict[str, list[str]]) -> list[dict]:
        """The function profiles of the sides not yet profiled in this batch, each alone on one slot, as
        many at once as there are slots; no measured run is running meanwhile; each side's cases those
        ``cases_of`` its SHA names. Returns the profiling processes that failed: a profile's failure is
        no measured run's, so it leaves the runs' status alone (a case the profiler could not run is
        recorded in its profile.json, as in a run)."""
        todo = [x for x in sides if not (machine_dir / x["sha"] / "profile" / self.batch / "profile.json").exists()]
        if not todo:
            return []
        if self.late_by() is not None or (self.deadline is not None and time.time() >= self.deadline):
            self.say("[deadline] no function profiles: they would end after the deadline (the measured runs are kept)")
            return []
        trees = worktrees(self.suite_dir, self.repo_path, [x["sha"] for x in todo])
        slots = self.slots.slots
        failed = []
        for i in range(0, len(todo), len(slots)):
            started: list = []
            wave = todo[i:i + len(slots)]
            try:
                for slot, x in zip(slots, wave):
                    cases = cases_of[x["sha"]]
                    self.say(f"[profile] CPU {','.join(map(str, slot))}: {self.names[x['sha']]} "
                             f"({len(cases)} case{'s' if len(cases) != 1 else ''})")
                    cmd = [self.pythons[x["sha"]], "-c", "from benchmarks._target import profile_side; profile_side()"]
                    processes.start(cmd, self.suite_dir, {
                        **self.env, "MBAPHASES_TARGET_DIR": str(trees / x["sha"]), "MBAPHASES_COMMIT": x["sha"],
                        "MBAPHASES_CASES": ",".join(cases)},
                        cpus=slot, into=started)
            except BaseException:
                processes.end_all(started)
                raise
            for x, code in zip(wave, processes.wait_all(started)):
                if code != 0:
                    self.say(f"[profile] {self.names[x['sha']]}: the profiling process exited {code}; this side has no "
                             "function table from this batch")
                    failed.append({"label": x["label"], "exit": code})
        return failed


def _until_at_barrier(proc, barrier: Path, role: int, timeout_s: float = 900.0) -> None:
    """The next side starts once the one started before it waits at its first case (or has ended):
    asv rewrites its machine file (~/.asv-machine.json) as it starts, and two starting at once can
    read it half-written. The barrier then holds each side until its partner arrives."""
    started = time.time()
    while not (barrier / f"case0.{role}").exists() and time.time() - started < timeout_s:
        if proc.poll() is not None:
            barrier.mkdir(parents=True, exist_ok=True)
            (barrier / f"ended.{role}").write_text(str(time.time()))
            return
        time.sleep(0.1)


def _wait_pairs(started: list[tuple]) -> list[int]:
    """Every side of the block's pair to its end; each side's end is marked in its pair's folder,
    so a partner that failed early is not waited for at every case."""
    pending = dict(enumerate(started))
    try:
        while pending:
            for n, (proc, barrier, role) in list(pending.items()):
                if proc.poll() is not None:
                    barrier.mkdir(parents=True, exist_ok=True)
                    (barrier / f"ended.{role}").write_text(str(time.time()))
                    del pending[n]
            time.sleep(0.2)
    except BaseException:
        processes.end_all([p for p, _, _ in started])  # interrupted: every side ends now, not at its run's end
        raise
    return processes.wait_all([p for p, _, _ in started])
