"""How busy a paired batch kept its slots, from its stored runs: each pair's span (its first side's
start to its last side's end, from the runs' meta files) over the slots' time (slots x the wall from
the batch's first run's start to its last run's end). It reads any batch, from before the batch
record kept its blocks (``node.occupancy``, ``fleet.occupancy``) too, so two executors compare on
one measure. For a batch whose record keeps its blocks, a second table says where a block's wall
went: before its first entry started (the block's process, asv's start, discovery, set-up), the
entries (imports, warm-up, the timed steps of both sides), after the last one ended (asv's results)
(docs/run-cost.md).

    python scripts/slot_occupancy.py raw-runs/MACHINE [BATCH]
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def occupancy(machine_dir: Path, batch: str) -> dict:
    record = json.loads((machine_dir / "batches" / f"{batch}.json").read_text())
    metas = [m for m in (json.loads(p.read_text()) for p in machine_dir.glob("*/run*.meta.json"))
             if m.get("batch") == batch and m.get("duet")]
    spans: dict[str, list[float]] = {}
    for m in metas:
        lo, hi = spans.get(m["duet"]["pair"], (m["started"], m["ended"]))
        spans[m["duet"]["pair"]] = [min(lo, m["started"]), max(hi, m["ended"])]
    recorded = ((record.get("node") or record.get("fleet") or {}).get("occupancy") or {}).get("occupancy")
    slots = len(record["slots"]["slots"])
    if not spans:  # a solo batch, or one with no completed pair
        return {"batch": batch, "pairs": 0, "slots": slots, "wall_s": None, "pair_s": None, "occupancy": None,
                "recorded": recorded}
    per_block = 1 if record["design"]["kind"] == "turns" else 2  # at once a pair takes a slot a side
    wall = max(hi for _, hi in spans.values()) - min(lo for lo, _ in spans.values())
    busy = sum(hi - lo for lo, hi in spans.values()) * per_block
    return {"batch": batch, "pairs": len(spans), "slots": slots, "wall_s": round(wall, 1), "pair_s": round(busy, 1),
            "occupancy": round(busy / (slots * wall), 3) if wall > 0 else None, "recorded": recorded}


def block_costs(machine_dir: Path, batch: str) -> dict | None:
    """The medians over a batch's blocks of where each block's wall went (seconds), None where its
    record keeps no block times."""
    record = json.loads((machine_dir / "batches" / f"{batch}.json").read_text())
    blocks = [b for b in (record.get("node") or record.get("fleet") or {}).get("blocks", []) if "began" in b]
    if not blocks:
        return None
    metas: dict[str, list[tuple[dict, Path]]] = {}
    for p in machine_dir.glob("*/run*.meta.json"):
        m = json.loads(p.read_text())
        if m.get("batch") == batch and m.get("duet"):
            metas.setdefault(m["duet"]["pair"].split("/", 1)[1].split(".")[0], []).append((m, p))
    rows = []
    for b in blocks:
        runs = metas.get(b["block"], [])
        if len(runs) != 2:
            continue
        first, last = min(m["started"] for m, _ in runs), max(m["ended"] for m, _ in runs)
        timed = 0.0
        for _, p in runs:
            doc = json.loads(p.with_name(p.name.replace(".meta.json", ".json")).read_text())
            timed += sum(r.get("total_active_ms") or 0 for r in doc["results"]) / 1000
        rows.append({"block": b["ended"] - b["began"], "before": first - b["began"], "entries": last - first,
                     "timed": timed, "after": b["ended"] - last})
    if not rows:
        return None
    return {"blocks": len(rows), **{k: round(statistics.median(r[k] for r in rows), 2) for k in rows[0]}}


def main(argv: list[str]) -> int:
    if not argv or not Path(argv[0], "batches").is_dir():
        print(f"error: {argv[0] if argv else '(none)'}: not a machine's folder of stored runs; valid: "
              "raw-runs/MACHINE (it holds batches/)", file=sys.stderr)
        return 2
    machine_dir = Path(argv[0])
    batches = argv[1:] or sorted(p.stem for p in (machine_dir / "batches").glob("*.json"))
    known = {p.stem for p in (machine_dir / "batches").glob("*.json")}
    if set(batches) - known:
        print(f"error: batch {sorted(set(batches) - known)[0]} is not stored under {machine_dir}; valid: "
              + (", ".join(sorted(known)) or "(none)"), file=sys.stderr)
        return 2
    print("| batch | pairs | slots | wall (s) | Σ pair time (s) | occupancy | in the record |")
    print("|---|---|---|---|---|---|---|")
    for batch in batches:
        o = occupancy(machine_dir, batch)
        print("| " + " | ".join("-" if v is None else str(v) for v in o.values()) + " |")
    costs = {batch: block_costs(machine_dir, batch) for batch in batches}
    if any(costs.values()):
        print()
        print("| batch | blocks | block (s) | before the entries (s) | the entries (s) | their timed steps (s) | "
              "after the entries (s) |")
        print("|---|---|---|---|---|---|---|")
        for batch, c in costs.items():
            if c:
                print(f"| {batch} | " + " | ".join(str(v) for v in c.values()) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
