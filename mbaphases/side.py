"""The one shape every input becomes and every table reads: a side of an A/B.

A side is a long table of per-run values (``run, case, metric, value``), the failed
runs, per-case alignment keys, the environment and pins, and per run its batch,
hardware and disturbance flags. It is made by :mod:`mbaphases.load` and only read
(or narrowed to some of its runs) elsewhere.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd


@dataclass
class Side:
    label: str
    revision: str
    values: pd.DataFrame  # run, case, metric, value (NaN: not reported by the target)
    failed: pd.DataFrame  # run, case, message
    alignment: dict[str, dict] = field(default_factory=dict)  # case -> key -> value
    environment: dict = field(default_factory=dict)
    pins: dict = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. runs taken on a busy machine
    hardware: dict = field(default_factory=dict)  # machine, cpu, logical_cpus, gpu (where recorded)
    run_digests: dict[str, str] = field(default_factory=dict)  # run file path -> sha256 of its content
    batches: dict[str, str] = field(default_factory=dict)  # run -> batch (one `mbaphases run` invocation)
    pairs: dict[str, str] = field(default_factory=dict)  # run -> its pair (the partner ran at the same time)
    cpus: dict[str, int] = field(default_factory=dict)  # run -> the CPU its paired run had to itself
    turns: set[str] = field(default_factory=set)  # runs that shared their CPU with the partner, in turns
    roles: dict[str, int] = field(default_factory=dict)  # run -> its role in its pair (0 took the first turn)
    # of those, runs whose side went on (summary, next case, exit) inside the partner's timed steps
    # once its own loop ended: their turns record no waited_partner_end_s (docs/log/noise.md)
    turns_without_end_wait: set[str] = field(default_factory=set)
    run_hardware: dict[str, dict] = field(default_factory=dict)  # run -> its hardware (mbaphases.comparable)
    run_flags: dict[str, list[str]] = field(default_factory=dict)  # run -> what disturbed it (busy, steal)
    profiles: dict[str, Path] = field(default_factory=dict)  # case -> folded stacks of its profiled run

    def runs(self) -> list[str]:
        """The side's runs (measured or failed), in order."""
        return list(dict.fromkeys(list(self.values.run) + list(self.failed.run)))

    def restrict(self, runs) -> Side:
        """The same side with only ``runs``: values, failures, batches, hardware and the notes
        about runs left out follow."""
        keep = set(runs)
        dropped = set(self.runs()) - keep
        notes = [n for n in self.notes if not any(n.startswith(f"{r}: ") for r in dropped)]
        hw = next((self.run_hardware[r] for r in self.runs() if r in keep and r in self.run_hardware), self.hardware)
        return dataclasses.replace(
            self, values=self.values[self.values.run.isin(keep)].reset_index(drop=True),
            failed=self.failed[self.failed.run.isin(keep)].reset_index(drop=True),
            batches={r: b for r, b in self.batches.items() if r in keep},
            pairs={r: b for r, b in self.pairs.items() if r in keep},
            cpus={r: b for r, b in self.cpus.items() if r in keep}, turns=self.turns & keep,
            roles={r: b for r, b in self.roles.items() if r in keep},
            turns_without_end_wait=self.turns_without_end_wait & keep,
            run_hardware={r: h for r, h in self.run_hardware.items() if r in keep},
            run_flags={r: f for r, f in self.run_flags.items() if r in keep},
            run_digests={r: d for r, d in self.run_digests.items() if r in keep},
            hardware=hw, notes=notes)
