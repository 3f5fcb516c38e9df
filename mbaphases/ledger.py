"""What each optimization bought: every candidate against one reference candidate.

Per case: the throughput ratio candidate / reference (medians), the change in
active ms per vector step split by phase (the attribution of tables.py, so the
parts add up), and for a candidate that combines others (pins ``combines``)
the additivity check: the sum of the single optimizations' changes beside the
measured change of the combined commit. They "add up" when the two differ by
no more than the run-to-run range of active ms of the sides involved.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from mbaphases import tables
from mbaphases.load import Side

PHASES = ("physics", "step_core_minus_physics", "update_state", "reset_done", "env_step_rest", "replay", "bookkeeping")


def ledger_table(reference: Side, candidates: list[Side], cases: list[str]) -> pd.DataFrame:
    rows = []
    for cand in candidates:
        thr = tables.throughput_table(reference, cand, cases).set_index("case")
        att = tables.attribution_table(reference, cand, cases).set_index("case")
        for case in cases:
            row = {"candidate": cand.label, "case": case, "ratio": thr.loc[case, "ratio"]}
            for k in ("delta_sum_ms", *(f"{p}_ms" for p in PHASES)):
                row[k] = att.loc[case].get(k) if case in att.index else None
            total = row["delta_sum_ms"]
            # what the three phases the demo story is about leave of the change (a phase not reported: 0)
            row["other_ms"] = (None if total is None or total != total else
                               total - sum(row[f"{p}_ms"] or 0 for p in ("physics", "update_state", "reset_done")))
            rows.append(row)
    return pd.DataFrame(rows)


def _active_range(side: Side, case: str) -> float:
    parts = tables.attribution_parts(side, case)
    if parts is None or parts["active"].isna().all():
        return float("nan")
    return float(parts["active"].max() - parts["active"].min())


def additivity_table(reference: Side, by_label: dict[str, Side], combines: dict[str, list[str]],
                     ledger: pd.DataFrame, cases: list[str]) -> pd.DataFrame:
    rows = []
    delta = ledger.set_index(["candidate", "case"])["delta_sum_ms"]
    for combined, parts in combines.items():
        if combined not in by_label or any(p not in by_label for p in parts):
            continue
        for case in cases:
            singles = [delta.get((p, case)) for p in parts]
            measured = delta.get((combined, case))
            if measured is None or any(x is None or x != x for x in singles) or measured != measured:
                rows.append({"combined": combined, "case": case, "parts": ", ".join(parts)})
                continue
            total = float(sum(singles))
            tolerance = float(np.nanmax([_active_range(s, case) for s in
                                         [reference, by_label[combined], *(by_label[p] for p in parts)]]))
            rows.append({"combined": combined, "case": case, "parts": ", ".join(parts), "sum_of_parts_ms": total,
                         "measured_ms": float(measured), "difference_ms": float(measured) - total,
                         "tolerance_ms": tolerance, "adds_up": bool(abs(float(measured) - total) <= tolerance)})
    return pd.DataFrame(rows)
