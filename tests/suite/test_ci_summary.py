"""The pull-request gate's Markdown summary (mbaphases ab --summary): derived from the report's
summary.json, parsed as Markdown (GitHub's tables), the gate per case with its interval and the
phases that moved."""
import json

import entry_docs as E
from markdown_it import MarkdownIt

from mbaphases import analysis, ci_summary, load
from mbaphases import page as page_mod

CASES = ["sac/g1_walk_flat/mujoco", "sac/g1_walk_flat/motrix"]


def tables_of(text: str) -> list[list[list[str]]]:
    """Every table of a Markdown text, as rows of cell texts (the header row first)."""
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    tables, row, table = [], None, None
    for t in tokens:
        if t.type == "table_open":
            table = []
        elif t.type == "tr_open":
            row = []
        elif t.type == "inline" and row is not None:
            row.append(t.content)
        elif t.type == "tr_close":
            table.append(row)
            row = None
        elif t.type == "table_close":
            tables.append(table)
    return tables


def report(tmp_path, update_state_factor: float):
    sides = []
    for name, scale in (("b", 1.0), ("c", update_state_factor)):
        paths = [E.write(tmp_path / f"{name}_run{k + 1}.json",
                         E.doc([E.case_result(c, env_step=9.0 + 1.5 * (scale - 1) + 0.05 * k,
                                              update_state=1.5 * scale + 0.01 * k)
                                for c in CASES])) for k in range(5)]
        sides.append(load.load_raw_side({"b": "main direct", "c": "MBA dev"}[name], paths))
    out = tmp_path / "rep"
    page_mod.write_page(analysis.build(sides[0], sides[1], input_kind="raw entry JSON"), out)
    return out / "summary.json"


def test_the_summary_is_markdown_with_the_gate_per_case_and_the_phases_that_moved(tmp_path):
    summary = report(tmp_path, 4.0)  # update_state 4x: 4.5 ms more a step, a FAIL
    text = ci_summary.markdown(summary, "html/pr/index.html")
    doc = json.loads(summary.read_text())
    gate, phases = tables_of(text)
    assert gate[0] == ["case", "gate", "ratio [interval]", "smallest detectable change", "note"]
    assert [row[0].strip("`") for row in gate[1:]] == CASES
    for row, case in zip(gate[1:], doc["cases"]):
        d = case["gate_detail"]
        assert row[1] == case["gate"] == "FAIL"
        assert row[2] == f"{d['estimate']:.3f} [{d['lower']:.3f}, {d['upper']:.3f}]"
    assert {row[1] for row in phases[1:]} == {"update_state"} and len(phases) == 1 + len(CASES)
    assert f"**{doc['verdict']}**" in text and "html/pr/index.html" in text


def test_a_pass_with_nothing_moved_says_so(tmp_path):
    text = ci_summary.markdown(report(tmp_path, 1.0))
    (gate,) = tables_of(text)
    assert all(row[1] == "PASS" for row in gate[1:]) and "No phase moved" in text


def test_the_summary_file_is_written_whole(tmp_path):
    out = ci_summary.write(report(tmp_path, 4.0), tmp_path / "ci" / "summary.md")
    assert tables_of(out.read_text()) and not list((tmp_path / "ci").glob(".*"))
