"""Which runs may be compared with which: one hardware per side, batches as blocks.

* Hardware: absolute throughputs are comparable only on one hardware (machine,
  CPU model, logical cores, RAM class, GPU). Runs of one side on two hardwares
  are never pooled into one figure: the report is made per hardware that the
  baseline and a candidate share with enough runs, each a complete A/B; where
  none has, it compares what it has and the gate says MISALIGNED, naming them.
* Batches: within one hardware, a batch (one `mbaphases run`; plain asv runs:
  one day) is a block. Sides are compared inside the batches where both ran
  (the gate combines them as strata, mbaphases.stats), so drift between
  batches neither widens nor biases the comparison; a batch in which only one
  side ran is left out, and the report says so.
* Pairs: two sides that ran at least MIN_PAIRS pairs together are compared
  pair by pair; sides that met in fewer (a round-robin) are compared through
  every pair of every side, each pair a block (block_fits).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from mbaphases import hardware
from mbaphases.side import Side
from mbaphases.stats import blocks as blocks_mod


def _hw(side: Side, run: str) -> dict:
    return side.run_hardware.get(run) or side.hardware or {}


def group_id(hw: dict) -> str:
    """Six hex digits naming one hardware (with the machine it was recorded under, and the CPUs each
    run had where recorded: one program on 1 and on 2 CPUs is two programs)."""
    key = {"machine": hw.get("machine"), **hardware.key(hw), **({"run_cpus": hw["run_cpus"]} if hw.get("run_cpus") else {})}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:6]


def describe(hw: dict) -> str:
    machine = hw.get("machine")
    cpus = f", {hw['run_cpus']} CPU{'s' if hw['run_cpus'] != 1 else ''} a run" if hw.get("run_cpus") else ""
    return (f"{machine}: " if machine else "") + hardware.text(hw) + cpus


def cpus_caveat(b: Side, c: Side) -> str:
    """On every verdict whose runs had fewer CPUs than the profile asks: what program was measured."""
    short = [(hw["run_cpus"], hw["profile_cpus"]) for side in (b, c) for run in side.runs()
             if (hw := _hw(side, run)).get("run_cpus") and hw.get("profile_cpus") and hw["run_cpus"] < hw["profile_cpus"]]
    if not short:
        return ""
    had, asked = min(x for x, _ in short), max(y for _, y in short)
    return (f"; measured on {had} CPU{'s' if had != 1 else ''} a run, every pool at {had} thread{'s' if had != 1 else ''}"
            f": the profile asks for {asked}, so this is a verdict on a smaller program than the one pinned")


def groups(side: Side) -> dict[str, list[str]]:
    """Hardware group -> the side's runs on it."""
    out: dict[str, list[str]] = {}
    for run in side.runs():
        out.setdefault(group_id(_hw(side, run)), []).append(run)
    return out


@dataclass
class Unit:
    """One comparison on one hardware: the baseline and the candidates restricted to it."""
    baseline: Side
    candidates: list[Side]
    hardware: dict | None  # None: every run shares one hardware, nothing was split
    notes: list[str]

    @property
    def folder(self) -> str:
        return f"hw-{group_id(self.hardware)}" if self.hardware else ""

    @property
    def label(self) -> str:
        return describe(self.hardware) if self.hardware else ""


def _runs_text(runs: list[str]) -> str:
    return ", ".join(runs) if len(runs) <= 4 else f"{', '.join(runs[:3])}, ... ({len(runs)} runs)"


def by_hardware(baseline: Side, candidates: list[Side], min_runs: int) -> list[Unit]:
    """The comparisons to report: one per hardware on which the baseline and at least one
    candidate have ``min_runs`` runs; none pooled across hardware."""
    sides = [baseline, *candidates]
    per_side = [groups(s) for s in sides]
    found = list(dict.fromkeys(g for gs in per_side for g in gs))
    if len(found) <= 1:
        return [Unit(baseline, candidates, None, [])]
    hw_of = {}
    for s in sides:
        for run in s.runs():
            hw_of.setdefault(group_id(_hw(s, run)), _hw(s, run))
    usable = [g for g in found if len(per_side[0].get(g, [])) >= min_runs
              and any(len(gs.get(g, [])) >= min_runs for gs in per_side[1:])]
    listing = "; ".join(f"{describe(hw_of[g])} ({', '.join(f'{s.label} {len(gs.get(g, []))}' for s, gs in zip(sides, per_side))} runs)"
                        for g in found)
    if not usable:
        # nothing complete on one hardware: each side's largest group, and the gate says MISALIGNED
        def largest(gs):
            return max(gs, key=lambda g: len(gs[g]))
        chosen = [largest(gs) for gs in per_side]
        notes = [f"no hardware has >= {min_runs} runs of the baseline and of a candidate; the runs by hardware: "
                 f"{listing}. Each side below uses its largest group; runs are never pooled across hardware."]
        notes += _left_out(sides, per_side, chosen, hw_of)
        restricted = [s.restrict(gs[g]) for s, gs, g in zip(sides, per_side, chosen)]
        return [Unit(restricted[0], restricted[1:], hw_of[chosen[0]], notes)]
    units = []
    for g in usable:
        notes = [f"runs on {len(found)} hardwares ({listing}); this comparison uses only {describe(hw_of[g])}"
                 + (f", one of {len(usable)} reported apart" if len(usable) > 1 else "")]
        notes += _left_out(sides, per_side, [g] * len(sides), hw_of)
        restricted = [s.restrict(gs.get(g, [])) for s, gs in zip(sides, per_side)]
        units.append(Unit(restricted[0], restricted[1:], hw_of[g], notes))
    return units


def _left_out(sides, per_side, chosen, hw_of) -> list[str]:
    notes = []
    for s, gs, keep in zip(sides, per_side, chosen):
        for g, runs in gs.items():
            if g != keep:
                notes.append(f"left out: {s.label} {_runs_text(runs)}, measured on {describe(hw_of[g])}")
    return notes


def pair(b: Side, c: Side) -> tuple[Side, Side, list[str]]:
    """Both sides restricted to the batches in which both ran, with notes on what was left
    out. Runs without a recorded batch (raw runs taken by hand) are one block."""
    rb, rc = b.runs(), c.runs()
    if any(b.batches.get(r) is None for r in rb) or any(c.batches.get(r) is None for r in rc):
        return b, c, []
    common = set(b.batches.values()) & set(c.batches.values())
    notes = []
    for side, runs in ((b, rb), (c, rc)):
        alone = sorted({side.batches[r] for r in runs} - common)
        for batch in alone:
            left = [r for r in runs if side.batches[r] == batch]
            notes.append(f"batch {batch}: only {side.label} ran in it ({_runs_text(left)}); left out of the "
                         f"comparison with {(c if side is b else b).label}")
    if not common:
        notes.append(f"no batch in which both {b.label} and {c.label} ran: sides measured in different batches are "
                     "not compared (drift between batches would read as a difference); run them in one batch")
    if not notes:
        return b, c, []
    return (b.restrict([r for r in rb if b.batches[r] in common]),
            c.restrict([r for r in rc if c.batches[r] in common]), notes)


def strata_text(b: Side, c: Side, blocks: list) -> str:
    """What the strata are: "5 pairs", "3 batches", "5 pairs + 1 batch"."""
    paired = [(xb[0], xc[0]) for xb, xc in blocks if len(xb) == 1 and xb[0] in b.pairs] if b.pairs and c.pairs else []
    pairs = len(paired)
    rest = len(blocks) - pairs
    # a pair whose two runs had one slot between them took turns on it (run --design turns)
    shared = bool(paired) and all(b.cpus.get(rb) is not None and b.cpus.get(rb) == c.cpus.get(rc) for rb, rc in paired)
    parts = ([f"{pairs} pair{'s' if pairs != 1 else ''}" + (" (each pair's two sides in turns on one slot)" if shared else "")]
             if pairs else []) + \
        ([f"{rest} batch{'es' if rest != 1 else ''}"] if rest else [])
    return " + ".join(parts)


def current_protocol(side: Side) -> tuple[Side, str | None]:
    """The side without its runs that took turns under the first protocol, where the side that ended
    its loop first went on (its summary, its next case) inside its partner's timed steps, so the
    slower side of each pair read slow (measured on the demo: docs/log/noise.md): a bias no bound covers,
    so those runs decide nothing. Returns the side and a note naming what was left out (or None)."""
    if not side.turns_without_end_wait:
        return side, None
    left = sorted(side.turns_without_end_wait)
    return (side.restrict([r for r in side.runs() if r not in side.turns_without_end_wait]),
            f"{side.label}: {len(left)} run(s) left out of every verdict: they took turns before a side waited for "
            "its partner's loop to end (the slower side of each such pair read slow; docs/log/noise.md)")


def turns_class(b: Side, c: Side, runs_b, runs_c) -> tuple[str | None, str | None, int | None] | None:
    """Where every run given of both sides took turns with its partner: (the profile's name, the CPU
    model, the CPUs a run had) that choose the turn-bias bound (mbaphases.turn_bias); None otherwise."""
    runs_b, runs_c = list(runs_b), list(runs_c)
    if not runs_b or not runs_c or not all(r in b.turns for r in runs_b) or not all(r in c.turns for r in runs_c):
        return None
    hw = _hw(b, runs_b[0])
    return b.pins.get("name"), hw.get("cpu"), hw.get("run_cpus")


# the fewest pairs worth their own strata: with 4, no 90% signed-rank interval is narrower
# than the pairs' range, while each 1-v-1 stratum takes its two runs out of the batch's
MIN_PAIRS = 5


def block_runs(b: Side, c: Side, runs_b, runs_c, paired: bool = True) -> list[tuple[list[str], list[str]]]:
    """The strata the sides are compared in, among the runs given: each pair of the two
    (their runs at the same time: one run each), when they ran at least MIN_PAIRS such pairs;
    then per batch both ran in, the runs outside such pairs (paired with other sides: still runs
    of the same batch, so every run counts). One block when the batches are not recorded."""
    runs_b, runs_c = list(runs_b), list(runs_c)
    paired_b = {b.pairs[r]: r for r in runs_b if r in b.pairs}
    paired_c = {c.pairs[r]: r for r in runs_c if r in c.pairs}
    together = sorted(set(paired_b) & set(paired_c)) if paired else []
    if len(together) >= MIN_PAIRS:
        rest_b = [r for r in runs_b if b.pairs.get(r) not in together]
        rest_c = [r for r in runs_c if c.pairs.get(r) not in together]
        pairs = [([paired_b[p]], [paired_c[p]]) for p in together]
        return pairs + (block_runs(b.restrict(rest_b), c.restrict(rest_c), rest_b, rest_c)
                        if rest_b and rest_c else [])
    if any(b.batches.get(r) is None for r in runs_b) or any(c.batches.get(r) is None for r in runs_c):
        return [(runs_b, runs_c)]
    out = []
    for batch in sorted(set(b.batches.values()) & set(c.batches.values())):
        xb = [r for r in runs_b if b.batches[r] == batch]
        xc = [r for r in runs_c if c.batches[r] == batch]
        if xb and xc:
            out.append((xb, xc))
    return out


def block_values(run_blocks: list[tuple[list[str], list[str]]], values_b: dict[str, float],
                 values_c: dict[str, float]) -> list[tuple[list, list]]:
    """The runs' values of each stratum, from run -> value maps."""
    return [([values_b[r] for r in rb], [values_c[r] for r in rc]) for rb, rc in run_blocks]


def blocks(b: Side, c: Side, values_b: dict[str, float], values_c: dict[str, float],
           paired: bool = True) -> list[tuple[list, list]]:
    """Per stratum (pair, else batch both ran in): (baseline values, candidate values), from
    run -> value maps; ``paired=False``: per batch only, the unpaired view of the same runs."""
    return block_values(block_runs(b, c, values_b, values_c, paired), values_b, values_c)


def direct_pairs(b: Side, c: Side) -> list[str]:
    """The pairs in which these two sides ran against each other."""
    return sorted(set(b.pairs.values()) & set(c.pairs.values()))


def all_paired(side: Side) -> bool:
    """Every run of the side ran in a pair."""
    runs = side.runs()
    return bool(runs) and all(r in side.pairs for r in runs)


def through_pairs(b: Side, c: Side) -> bool:
    """Whether two sides are compared through every side's pairs (block_fits): every run of both
    ran in a pair, and they met in fewer than MIN_PAIRS of them (with as many, their own pairs
    decide, distribution-free)."""
    return all_paired(b) and all_paired(c) and len(direct_pairs(b, c)) < MIN_PAIRS


def pair_contrast(fit: blocks_mod.Fit | None, b: Side, c: Side, confidence: float) -> blocks_mod.Contrast | None:
    """The intra-block contrast c / b of ``fit`` where the two sides are compared through every
    side's pairs (through_pairs), else None."""
    if fit is None or not through_pairs(b, c):
        return None
    return blocks_mod.contrast(fit, b.revision, c.revision, confidence)


@dataclass
class PairedBatch:
    """Every side of a comparison's batches with, per case, the intra-block fit of their paired runs
    (made once for all the candidates compared in it)."""
    sides: list[Side]

    def __post_init__(self):
        self.fits = block_fits([current_protocol(s)[0] for s in self.sides])

    def without_runs(self, kept: list[Side]) -> PairedBatch:
        """The same batch with the sides in ``kept`` (by revision) narrowed to their runs there."""
        by_revision = {s.revision: s for s in kept}
        return PairedBatch([by_revision.get(s.revision, s) for s in self.sides])


def block_fits(sides: list[Side], metric: str = "throughput") -> dict[str, blocks_mod.Fit]:
    """Per case, the intra-block fit (mbaphases.stats.blocks) of every paired run of these sides,
    each side known by its revision, with the CPU each run had and its role in its pair (which took
    the first turn); cases without enough pairs have none."""
    rows: dict[str, list[tuple]] = {}
    for side in sides:
        v = side.values[(side.values.metric == metric) & side.values.run.isin(list(side.pairs))]
        for run, case, value in zip(v.run, v.case, v.value):
            rows.setdefault(case, []).append((side.revision, side.pairs[run], float(value), side.cpus.get(run),
                                              side.roles.get(run)))
    fits = {case: blocks_mod.fit(r) for case, r in rows.items()}
    fits = {case: f for case, f in fits.items() if f is not None}
    blocks_mod.share_noisiness(fits)
    return fits
