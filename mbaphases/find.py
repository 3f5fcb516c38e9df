"""Which commit moved a phase: a bisection over a first-parent line whose every step is decided
by the phase's change interval, runs added until decisive.

The line is the target repository's first-parent history between GOOD and BAD; for a
``[published]`` pins file that is the pin repository, one commit per side in pins order, so the
same bisection walks releases or a dependency's versions. Every step measures three sides in
one batch with the suite's runner (the bracket's ends and its middle); what it measures is
stored like any run, and a later step or search reuses it (batches are strata, so runs from
other batches only add blocks).
"""
from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from mbaphases import classes as classes_mod
from mbaphases import comparable, inputs, load, staging, tables
from mbaphases.errors import UsageError
from mbaphases.run import batch, prepare
from mbaphases.run.design import Design
from mbaphases.run.executors import blocks
from mbaphases.side import Side
from mbaphases.stats import intervals, rules

PARTS = (*tables.ATTRIBUTION, "active")
METRICS = ("throughput",)


@dataclass
class Point:
    sha: str
    label: str


@dataclass
class Change:
    """A change from ``old`` to ``new`` on the searched scale (ms; log throughput), at the
    decision confidence; ``runs`` per side in the batches both ran in."""
    estimate: float
    lower: float | None
    upper: float | None
    runs: tuple[int, int]

    def text(self, ratio: bool) -> str:
        if ratio:
            fmt = lambda x: f"{math.exp(x):.3f}x"  # noqa: E731
        else:
            fmt = lambda x: f"{x:+.3f} ms"  # noqa: E731
        span = f"[{fmt(self.lower)}, {fmt(self.upper)}]" if self.lower is not None else "[no interval yet]"
        return f"{fmt(self.estimate)} {span}"

    def beyond_zero(self, sign: float) -> bool:
        """The interval excludes 0 on the side of ``sign``."""
        return self.lower is not None and min(sign * self.lower, sign * self.upper) > 0


@dataclass
class Step:
    lo: int
    mid: int
    hi: int
    first: Change  # lo -> mid
    rest: Change  # mid -> hi
    moved: bool | None
    batches: int  # batches this step ran


@dataclass
class Search:
    what: str
    case: str
    line: list[Point]
    confidence: float
    decision_confidence: float
    steps: list[Step] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)  # indexes into line: could not be measured
    total: Change | None = None
    own: Change | None = None
    found: int | None = None
    verdict: str = ""
    runs_needed: int | None = None
    batches: list[str] = field(default_factory=list)
    interrupted: bool = False  # its verdict is not a decision; the same find again starts from its runs


def first_parent_line(repo: Path, good: str, bad: str) -> list[str]:
    """GOOD, then every commit on BAD's first-parent line after it, up to BAD."""
    g, b = prepare.resolve_ref(repo, good), prepare.resolve_ref(repo, bad)
    if g == b:
        raise UsageError(f"GOOD {good!r} and BAD {bad!r} are the same commit {g[:12]}; give two different commits")
    line = prepare.git(repo, "rev-list", "--first-parent", b).split()
    if g not in line:
        raise UsageError(f"GOOD {good!r} ({g[:12]}) is not on the first-parent line of BAD {bad!r}; "
                         "give a GOOD that BAD descends from along first parents")
    return line[: line.index(g) + 1][::-1]


def point_labels(repo: Path, shas: list[str], pins: dict) -> list[Point]:
    """A pins side's label where the commit is one, else a branch pointing at it, else the short SHA."""
    by_sha = {}
    for side in [pins.get("baseline", {}), *pins.get("candidates", [])]:
        if side.get("ref"):
            try:
                by_sha.setdefault(prepare.resolve_ref(repo, side["ref"]), side["label"])
            except UsageError:
                pass  # a pins side this repository lacks names nothing here
    out = []
    for sha in shas:
        names = prepare.git(repo, "for-each-ref", "--points-at", sha, "--format=%(refname:short)",
                           "refs/heads", "refs/tags").split()
        out.append(Point(sha, by_sha.get(sha) or (names[0] if names else sha[:10])))
    return out


def resolve_end(repo: Path, ref: str, pins: dict) -> str:
    """A ref, or the label of a pins side."""
    for side in [pins.get("baseline", {}), *pins.get("candidates", [])]:
        if side.get("label") == ref and side.get("ref"):
            return side["ref"]
    return ref


def change(b: Side, c: Side, case: str, what: str, confidence: float) -> Change | None:
    """The change b -> c with its interval (Hodges-Lehmann, batches as strata); None where
    either side has no value for the case."""
    if what in METRICS:
        vb, vc = tables.per_run_map(b, what, case), tables.per_run_map(c, what, case)
        # throughput on a log scale: a ratio's halves add up like a phase's
        blocks = [(np.log(x), np.log(y)) for x, y in comparable.blocks(b, c, vb, vc)]
    else:
        pb, pc = tables.attribution_pair(b, c, case)
        if pb is None or pc is None or pb[what].isna().all() or pc[what].isna().all():
            return None
        blocks = tables.part_blocks(b, c, pb, pc, what)
    blocks = [(x, y) for x, y in blocks if len(x) and len(y)]
    if not blocks:
        return None
    iv = intervals.difference_interval(np.array([]), np.array([]), confidence, blocks=blocks)
    return Change(iv.estimate, iv.lower, iv.upper, (sum(len(x) for x, _ in blocks), sum(len(y) for _, y in blocks)))


class Measurer:
    """Runs batches of sides with the suite's runner and loads what the store holds for them."""

    def __init__(self, conf_path: Path, pins: dict, case: str, runs: int, machine: str, python: str | None, out,
                 design: Design | None = None, fleet: blocks.Fleet | None = None):
        self.conf_path, self.pins, self.case, self.runs = conf_path, pins, case, runs
        self.machine, self.python, self.out, self.design, self.fleet = machine, python, out, design, fleet
        # where the runs it decides on are stored: the machine, or a fleet's one hardware class
        self.runs_under = machine
        conf = inputs.load_asv_conf(conf_path)
        self.results_dir = conf_path.resolve().parent / conf.get("results_dir", "results")
        self.repo = conf_path.resolve().parent / conf["repo"]
        self.batches: list[str] = []
        self._sides: dict[str, Side | None] = {}
        self.measured: set[str] = set()

    def measure(self, points: list[Point]) -> None:
        step_pins = {**self.pins, "cases": [self.case],
                     "baseline": {"ref": points[0].sha, "label": points[0].label},
                     "candidates": [{"ref": p.sha, "label": p.label} for p in points[1:]]}
        # in paired runs every two of the step's points pair up: the first candidate as the reference
        # makes the runner pair the others with it as well as with the baseline
        step_pins["reference"] = points[1].label
        before = set(self._batch_records())
        rc = batch.run_sides(self.conf_path, step_pins, self.runs, self.machine, self.python, out=self.out,
                              design=self.design, resume_hint=FIND_RESUME_HINT, fleet=self.fleet)
        self.batches += sorted(set(self._batch_records()) - before)
        if rc == 130:
            # interrupted: its runs are kept; the search stops rather than deciding on what is missing
            raise KeyboardInterrupt
        if self.fleet is not None:
            self.runs_under = self._one_class()
        self._sides.clear()
        self.measured.update(p.sha for p in points)

    def _one_class(self) -> str:
        """The fleet's one hardware class the search decides in: runs of different hardware are never
        pooled, so a fleet of several classes is refused (its runs are kept, each under its class)."""
        classes = classes_mod.fleet_classes(self.results_dir.parent / "raw-runs", self.machine)
        if len(classes) != 1:
            named = ", ".join(f"{machine} ({c['hardware']})" for machine, c in classes.items())
            raise UsageError(f"find --fleet: the fleet's nodes are of {len(classes)} hardware classes ({named}); a "
                             "search decides within one (runs of different hardware are never pooled): give it nodes "
                             "of one class; the runs so far are kept, each under its class")
        return next(iter(classes))

    def _batch_records(self) -> list[str]:
        return [p.stem for p in (self.results_dir.parent / "raw-runs" / self.machine / "batches").glob("*.json")]

    def side(self, point: Point) -> Side | None:
        if point.sha not in self._sides:
            try:
                self._sides[point.sha] = load.load_asv_side(point.label, point.sha, self.results_dir,
                                                            self.runs_under, self.repo)
            except UsageError:
                self._sides[point.sha] = None  # nothing stored for it yet
        return self._sides[point.sha]

    def error(self, point: Point) -> str | None:
        """Why the case has no value on this side (its failed runs' message), if it failed."""
        s = self.side(point)
        if s is None:
            return "no run of it was recorded (its environment did not build?)" if point.sha in self.measured else None
        failed = s.failed[s.failed.case == self.case]
        if len(failed) and not len(s.values[(s.values.case == self.case)].dropna(subset=["value"])):
            return str(failed.message.iloc[-1])
        return None


def decision_confidence(confidence: float, commits: int, max_batches: int) -> float:
    """The error split evenly over every decision the search plans: the total change, the
    bisection steps, the last commit's own change, each looked at up to ``max_batches`` times."""
    steps = math.ceil(math.log2(commits)) if commits > 1 else 0
    return rules.split_confidence(confidence, (steps + 2) * max_batches)


def bisect(conf_path: Path, pins: dict, what: str, case: str, good: str, bad: str, *, runs: int, max_batches: int,
           budget_s: float, confidence: float, machine: str, python: str | None = None, out=sys.stdout,
           design: Design | None = None, fleet: blocks.Fleet | None = None) -> Search:
    m = Measurer(conf_path, pins, case, runs, machine, python, out, design, fleet)
    shas = first_parent_line(m.repo, resolve_end(m.repo, good, pins), resolve_end(m.repo, bad, pins))
    line = point_labels(m.repo, shas, pins)
    n = len(line) - 1
    each = decision_confidence(confidence, n, max_batches)
    # the measurer's list itself: every batch it runs is on the search's record as it happens
    search = Search(what, case, line, confidence, each, batches=m.batches)
    try:
        return _search(m, search, line, what, case, confidence, each, max_batches, budget_s, out)
    except KeyboardInterrupt:
        # every process of the step's batch has been ended and its runs kept (mbaphases.run.batch)
        search.interrupted = True
        search.verdict = (f"interrupted after {len(search.steps)} step(s) and {len(m.batches)} batch(es): their runs are "
                          f"kept; {FIND_RESUME_HINT}")
        return search


FIND_RESUME_HINT = "the same find again starts from the runs kept (stored runs first)"


def _search(m: Measurer, search: Search, line: list[Point], what: str, case: str, confidence: float, each: float,
            max_batches: int, budget_s: float, out) -> Search:
    n = len(line) - 1
    ratio = what in METRICS
    started = time.time()
    print(f"find {what} on {case}: {n} commit(s) after {line[0].label} ({line[0].sha[:10]}) up to {line[-1].label} "
          f"({line[-1].sha[:10]}); each decision at {each:.2%} ({confidence:.0%} split over the planned decisions "
          f"and up to {max_batches} batch(es) each)", file=out, flush=True)

    def changes(i: int, j: int) -> Change | None:
        si, sj = m.side(line[i]), m.side(line[j])
        return None if si is None or sj is None else change(si, sj, case, what, each)

    def looks(points: list[int], decide) -> tuple[object, int]:
        """Stored runs first; then batches of ``points`` until ``decide`` answers (not None)."""
        answer, ran = decide(), 0
        while answer is None and ran < max_batches and time.time() - started < budget_s:
            m.measure([line[i] for i in points])
            ran += 1
            answer = decide()
        return answer, ran

    # the total change: its direction is what "moved" means at every step
    def total_decided():
        if m.error(line[0]) or m.error(line[n]):
            return "failed"
        t = changes(0, n)
        if t is not None and t.lower is not None and (t.beyond_zero(1) or t.beyond_zero(-1)):
            return t
        return None

    search.total, _ = looks([0, n] if n == 1 else [0, _middle(0, n, []), n], total_decided)
    failed = [(i, m.error(line[i])) for i in (0, n) if m.error(line[i])]
    if failed:
        search.total = None
        search.verdict = "; ".join(f"{line[i].label} could not be measured: {e}" for i, e in failed)
        return search
    if search.total is None:
        t = changes(0, n)
        search.total = t
        search.verdict = (f"{what} did not move decisively from {line[0].label} to {line[-1].label}: "
                          + (t.text(ratio) if t else "no values") + f" at {each:.2%}")
        search.runs_needed = _runs_needed(t)
        return search
    sign = 1.0 if search.total.estimate > 0 else -1.0
    print(f"total: {line[0].label} -> {line[-1].label} {search.total.text(ratio)}", file=out, flush=True)

    lo, hi = 0, n
    while hi - lo > 1:
        mid = _middle(lo, hi, search.skipped)
        if mid is None:
            names = ", ".join(line[i].label for i in range(lo + 1, hi + 1))
            search.verdict = (f"cannot tell: the change is in one of {names}, and the commits between could not be "
                              "measured (skipped)")
            return search

        def step_decided(lo=lo, mid=mid, hi=hi):
            if m.error(line[mid]):
                return "skip"
            a, b = changes(lo, mid), changes(mid, hi)
            if a is None or b is None:
                return None
            # moved by mid: most of the bracket's change happened by then, and that part is clear of 0
            if sign * a.estimate >= sign * b.estimate and a.beyond_zero(sign):
                return True, a, b
            if sign * b.estimate > sign * a.estimate and b.beyond_zero(sign):
                return False, a, b
            return None

        answer, ran = looks([lo, mid, hi], step_decided)
        if answer == "skip":
            print(f"skip {line[mid].label} ({line[mid].sha[:10]}): {m.error(line[mid])}", file=out, flush=True)
            search.skipped.append(mid)
            continue
        if answer is None:
            a, b = changes(lo, mid), changes(mid, hi)
            search.steps.append(Step(lo, mid, hi, a, b, None, ran))
            search.verdict = (f"cannot tell at {line[mid].label}: {line[lo].label} -> it "
                              f"{a.text(ratio) if a else 'no values'}, it -> {line[hi].label} "
                              f"{b.text(ratio) if b else 'no values'}; "
                              + (f"{ran} batch(es), the --max-batches limit" if ran >= max_batches
                                 else f"the --budget-min of {budget_s / 60:.0f} min spent"))
            search.runs_needed = max(filter(None, [_runs_needed(a), _runs_needed(b)]), default=None)
            return search
        moved, a, b = answer
        search.steps.append(Step(lo, mid, hi, a, b, moved, ran))
        print(f"step {len(search.steps)}: {line[mid].label} ({line[mid].sha[:10]}): {line[lo].label} -> it "
              f"{a.text(ratio)}, it -> {line[hi].label} {b.text(ratio)}: {'moved' if moved else 'not moved'}",
              file=out, flush=True)
        lo, hi = (lo, mid) if moved else (mid, hi)

    # the last commit's own change must exclude 0 and carry most of the total
    def own_decided():
        own = changes(hi - 1, hi)
        if own is not None and own.beyond_zero(sign) and sign * own.estimate > sign * search.total.estimate / 2:
            return own
        return None

    search.own, _ = looks([hi - 1, hi], own_decided)
    if search.own is None:
        own = changes(hi - 1, hi)
        search.own = own
        search.verdict = (f"cannot tell: {line[hi].label}'s own change {own.text(ratio) if own else 'has no values'} "
                          f"does not clearly carry most of the total {search.total.text(ratio)}")
        search.runs_needed = _runs_needed(own)
    else:
        search.found = hi
        share = search.own.estimate / search.total.estimate
        search.verdict = (f"{line[hi].label} ({line[hi].sha}) moved {what}: its own change {search.own.text(ratio)} "
                          f"is {share:.0%} of the total {search.total.text(ratio)}")
    return search


def _middle(lo: int, hi: int, skipped: list[int]) -> int | None:
    """The commit nearest the bracket's middle that was not skipped (as git bisect skip does)."""
    inside = [i for i in range(lo + 1, hi) if i not in skipped]
    centre = (lo + hi) / 2
    return min(inside, key=lambda i: (abs(i - centre), i)) if inside else None


def _runs_needed(c: Change | None) -> int | None:
    if c is None or c.lower is None:
        return None
    half = (c.upper - c.lower) / 2
    return intervals.runs_to_decide(half, abs(c.estimate), min(c.runs))


def record(search: Search, path: Path, started: float) -> None:
    """The search as data beside the machine's batch records: the path, every interval, the verdict."""
    doc = {"schema": "mbaphases.find/1", "started": started, "ended": time.time(),
           **asdict(search)}
    path.parent.mkdir(parents=True, exist_ok=True)
    staging.write_text_atomic(path, json.dumps(doc, indent=2) + "\n")
