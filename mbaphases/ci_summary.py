"""The pull-request gate's short Markdown (``mbaphases ab --summary FILE``): fit for a CI job's step
summary (``$GITHUB_STEP_SUMMARY``) and a pull-request comment. Derived from the report's own
``summary.json`` (a stored result's view, never a second computation): the gate per case with its
interval, the phases that moved (marked in the report) with their top function, where the page is."""
from __future__ import annotations

import json
from pathlib import Path

import jinja2

from mbaphases import staging

TEMPLATE = "summary.md.j2"


def comparisons(summary_path: Path) -> list[tuple[str | None, dict]]:
    """(hardware label or None, one candidate's summary) for every comparison the report made."""
    top = json.loads(summary_path.read_text())
    folder = summary_path.parent
    if "hardware" in top:
        out = []
        for hw in top["hardware"]:
            out += [(hw["label"], s) for _, s in comparisons(folder / hw["summary"])]
        return out
    if top.get("ledger") is not None or len(top.get("candidates", [])) > 1:
        return [(None, json.loads((folder / c["summary"]).read_text())) for c in top["candidates"]]
    return [(None, top)]


def moved(case: dict, functions: list[dict]) -> list[dict]:
    """The phases the report marked in ``case``, largest change first, each with its top function."""
    rows = []
    for part, a in case["attribution"].items():
        if part == "active" or not a.get("distinguishable"):
            continue
        top = next((f for f in functions if f["case"] == case["case"] and f["phase"] == part and f["rank"] == 1), None)
        rows.append({"phase": part, **a, "function": top["function"] if top else None,
                     "function_ms": top["delta_total_ms"] if top else None})
    return sorted(rows, key=lambda r: -abs(r["delta_ms"] or 0))


def markdown(summary_path: Path, page: str | None = None) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"), autoescape=False,
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["num"] = lambda x, spec="{:.3f}": "n/a" if x is None else spec.format(x)
    env.filters["cell"] = lambda text: str(text).replace("|", "\\|").replace("\n", " ")
    items = [{"hardware": hw, "s": s, "moved": {c["case"]: moved(c, s.get("functions") or []) for c in s["cases"]}}
             for hw, s in comparisons(summary_path)]
    return env.get_template(TEMPLATE).render(items=items, report=str(summary_path.parent / "report.md"), page=page)


def write(summary_path: Path, out: Path, page: str | None = None) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    staging.write_text_atomic(out, markdown(summary_path, page))
    return out
