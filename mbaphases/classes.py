"""One verdict per hardware class of a fleet batch, and whether the classes agree.

A fleet stores each hardware class's runs under a machine name of its own
(mbaphases.run.executors.blocks); classes are never pooled. Each class gets its own report; this
module reads their summaries and says, per candidate, whether every class reached the same verdict
("MBA next: PASS on AMD EPYC (2 nodes), PASS on Intel Xeon (1 node)") or the verdict is
hardware-dependent (each class's ratio interval named)."""
from __future__ import annotations

import json
from pathlib import Path

from mbaphases import load


def fleet_classes(raw_dir: Path, prefix: str) -> dict[str, dict]:
    """The hardware classes of the fleet batches recorded under ``prefix``: class machine ->
    {hardware, nodes}; empty where ``prefix`` holds no fleet batch."""
    classes: dict[str, dict] = {}
    for record in load.batch_records(raw_dir, prefix):
        for block in (record.get("fleet") or {}).get("blocks", []):
            entry = classes.setdefault(block["machine"], {"hardware": block.get("cpu") or block["hardware"],
                                                          "nodes": set()})
            entry["nodes"].add(block["node"])
    return {m: {"hardware": c["hardware"], "nodes": len(c["nodes"])} for m, c in sorted(classes.items())}


def _interval(case: dict) -> str:
    d = case.get("gate_detail") or {}
    if d.get("lower") is None:
        return "no interval"
    return f"[{d['lower']:.3f}, {d['upper']:.3f}]"


def agreement(classes: dict[str, dict], summaries: dict[str, dict]) -> list[dict]:
    """Per candidate: each class's verdict and whether they agree."""
    out = []
    labels = [c["label"] for c in next(iter(summaries.values()))["candidates"]] if summaries else []
    for label in labels:
        per_class = []
        for machine, summary in summaries.items():
            verdict = next(c["verdict"] for c in summary["candidates"] if c["label"] == label)
            # the case table is the first candidate's (summary.json); the others are named by verdict
            cases = summary["cases"] if (summary.get("candidate") or {}).get("label") == label else []
            per_class.append({"machine": machine, "hardware": classes[machine]["hardware"],
                              "nodes": classes[machine]["nodes"], "verdict": verdict,
                              "intervals": {c["case"]: _interval(c) for c in cases}})
        agree = len({c["verdict"] for c in per_class}) == 1
        out.append({"candidate": label, "agree": agree, "classes": per_class})
    return out


def lines(agreed: list[dict]) -> list[str]:
    def where(c: dict) -> str:
        return f"{c['hardware']} ({c['nodes']} node{'s' if c['nodes'] != 1 else ''})"

    said = []
    for a in agreed:
        if a["agree"]:
            said.append(f"{a['candidate']}: " + ", ".join(f"{c['verdict']} on {where(c)}" for c in a["classes"]))
        else:
            said.append(f"{a['candidate']}: hardware-dependent: " + "; ".join(
                f"{c['verdict']} on {where(c)} (" + ", ".join(f"{k} {v}" for k, v in c["intervals"].items()) + ")"
                for c in a["classes"]))
    return said


def write(out: Path, agreed: list[dict]) -> None:
    (out / "classes.json").write_text(json.dumps({"schema": "mbaphases.classes/1", "candidates": agreed}, indent=2) + "\n")
    text = ["# One verdict per hardware class", "",
            "Each hardware class of the fleet has its own report (its folder here); classes are never pooled.", ""]
    text += [f"- {line}" for line in lines(agreed)]
    (out / "classes.md").write_text("\n".join(text) + "\n")
