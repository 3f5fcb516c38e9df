"""From phase to function: the differential profile of two sides.

Each side has one profiled entry run per case, outside the measured runs (py-spy's
raw folded stacks, kept under ``raw-runs/<machine>/<sha>/profile/<batch>/``; see
benchmarks/_target.py). Its figures never enter the gate or the tables; its
samples only say how each phase's time splits over functions.

* Phase windows: a sample belongs to the phase of the deepest frame on its stack
  that names a phase function (``ENTRY_FRAMES``: physics inside step_core, so a
  sample in the engine counts as physics), among the samples under the measured
  loop (the entry's window function); what lies in the loop but under no phase function is
  ``rest`` (the rest of env_step, bookkeeping).
* Scale: a function's time in a phase, in ms per vector step, is its share of
  the phase's samples times the phase's measured time of that side (the median
  of its formal runs), so the profiler's own overhead cancels.
* Self time: samples whose leaf is the function; total: samples with the
  function anywhere below the outermost phase frame (counted once per sample),
  so the path into a nested phase counts in it (physics entered through a
  per-substep dispatch names that dispatch).

Frames are named ``function (file)``: line numbers move between commits and
native addresses between runs, so they are dropped.
"""
from __future__ import annotations

import fnmatch
import html
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import rust_demangler

from mbaphases import tables


@dataclass(frozen=True)
class EntryFrames:
    """Where an entry runs its measured loop and which of the code's functions are its timed phases
    ("name@file" pins a name to a file where it is not unique; "*@file-glob": any function of a
    native library; "pattern in outer": only below a frame matching ``outer``)."""
    window: tuple[str, ...]
    phases: dict[str, tuple[str, ...]]


# per entry, the one place that knows a target's function names; a profile is read with the set
# whose window function its stacks contain
ENTRY_FRAMES = {
    # the reference target (reflab/runtime.py times these)
    "reflab": EntryFrames(window=("run@collector.py",), phases={
        "physics": ("_engine_step",),
        "step_core_minus_physics": ("_step_physics",),
        "update_state": ("_update_state",),
        "reset_done": ("_save_terminal_obs", "_reset_envs"),
        "replay": ("add@collector.py",),
    }),
    # the published framework under the suite's entry (mbaphases/unilab_entry.py): TorchEnv.step
    # times the backend's step_tensor, update_state and _reset_done_envs; unisim's backends time
    # the engine call inside step_tensor: MuJoCo's batch pool (_step_native), MotrixSim's model
    # step, a call into its native library from the same Python line as its control write, so
    # every frame in that library counts as physics
    "unilab": EntryFrames(window=("collect@benchmark_offpolicy_collector_active.py",), phases={
        "physics": ("_step_native", "_portable_step_runtimes", "*@motrixsim*.so in _host_step"),
        "step_core_minus_physics": ("step_tensor",),
        "update_state": ("update_state",),
        "reset_done": ("_reset_done_envs",),
        "replay": ("add@replay_buffer.py",),
    }),
}
PHASES = ("physics", "step_core_minus_physics", "update_state", "reset_done", "replay")
PARTS = (*PHASES, "rest")
TOP = 10
_ADDRESS = re.compile(r"^0x[0-9a-f]+ \((.*)\)$")
_FRAME = re.compile(r"^(?P<name>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


# the escapes of Rust's legacy mangling, left in a symbol that a C++ demangler has already split
_RUST_ESCAPES = {"$LT$": "<", "$GT$": ">", "$RF$": "&", "$BP$": "*", "$SP$": "@", "$LP$": "(", "$RP$": ")",
                 "$C$": ",", "$u20$": " ", "$u27$": "'", "$u5b$": "[", "$u5d$": "]", "$u7b$": "{", "$u7d$": "}",
                 "$u7e$": "~", "..": "::"}
_RUST_HASH = re.compile(r"::h[0-9a-f]{16}$")


def demangle(name: str) -> str:
    """A native frame's readable name: Rust symbols (v0 ``_R...`` and legacy ``_ZN...E``) through
    rust-demangler; a legacy Rust symbol that py-spy's C++ demangler has already split keeps only
    Rust's own escapes, which are undone; C++ names arrive demangled."""
    candidate = name.split(" ", 1)[0]
    if candidate.startswith(("_R", "_ZN")):
        try:
            return _RUST_HASH.sub("", rust_demangler.demangle(candidate)) + name[len(candidate):]
        except Exception:  # noqa: BLE001 - not a Rust symbol after all: kept as py-spy wrote it
            return name
    if "$LT$" in name or "$GT$" in name or "$u20$" in name or "$RF$" in name:
        out = name[1:] if name.startswith("_$") else name
        for escape, char in _RUST_ESCAPES.items():
            out = out.replace(escape, char)
        return _RUST_HASH.sub("", out)
    return name


def normalize(frame: str) -> str:
    """'Backend.step (reflab/sim/base.py:115)' -> 'Backend.step (base.py)';
    '0x7f1b28ca3f16 (libc.so.6)' -> '[libc.so.6]'; Rust symbols demangled."""
    frame = frame.strip()
    m = _ADDRESS.match(frame)
    if m:
        return f"[{Path(m.group(1)).name}]"
    m = _FRAME.match(frame)
    if not m:
        return demangle(frame)
    return f"{demangle(m.group('name'))} ({Path(m.group('file')).name})"


def _matches(frame: str, pattern: str) -> bool:
    """``pattern``: 'name', 'name@file' or '*@file-glob' (any function of a native library)."""
    name, _, file = pattern.partition("@")
    m = _FRAME.match(frame)
    if not m:
        return False
    func = m.group("name")
    if name != "*" and func != name and not func.endswith("." + name):
        return False
    return not file or fnmatch.fnmatch(Path(m.group("file")).name, file)


def _matches_at(stack: list[str], i: int, pattern: str) -> bool:
    frame_pattern, _, outer = pattern.partition(" in ")
    return _matches(stack[i], frame_pattern) and (not outer or any(_matches(f, outer) for f in stack[:i]))


def read_folded(path: Path) -> list[tuple[list[str], int]]:
    """py-spy's raw format: 'frame;frame;... count' per line."""
    out = []
    for line in Path(path).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            out.append((stack.split(";"), int(count)))
    return out


@dataclass
class CaseProfile:
    """One side's samples of one case, by phase."""
    samples: dict[str, int] = field(default_factory=dict)  # part -> samples
    self_: dict[tuple[str, str], int] = field(default_factory=dict)  # (part, function) -> leaf samples
    total: dict[tuple[str, str], int] = field(default_factory=dict)  # (part, function) -> samples containing it
    paths: dict[tuple[str, ...], int] = field(default_factory=dict)  # frames below the window -> samples
    window: int = 0


def entry_frames(stacks: list[tuple[list[str], int]]) -> EntryFrames | None:
    """The entry whose measured loop these stacks run (None: no known loop in them)."""
    for frames in ENTRY_FRAMES.values():
        if any(_matches(f, w) for stack, _ in stacks for f in stack for w in frames.window):
            return frames
    return None


def load_case(path: Path, physics: bool = True) -> CaseProfile:
    """``physics=False``: engine samples stay in step_core, as the attribution keeps them where a
    side reports no physics time of its own (tables.attribution_pair)."""
    prof = CaseProfile()
    stacks = read_folded(path)
    known = entry_frames(stacks)
    if known is None:
        return prof  # no measured loop in it: every sample outside the window
    window = known.window
    phase_frames = {k: v for k, v in known.phases.items() if physics or k != "physics"}
    for stack, count in stacks:
        at = next((i for i, f in enumerate(stack) if any(_matches(f, w) for w in window)), None)
        if at is None:
            continue  # setup, imports, other threads: outside the measured loop
        frames = [normalize(f) for f in stack[at + 1:]]
        raw = stack[at + 1:]
        part, outer, is_phase = "rest", None, set()
        for i in range(len(raw)):
            for name, patterns in phase_frames.items():
                if any(_matches_at(raw, i, p) for p in patterns):
                    part, outer = name, i if outer is None else outer
                    is_phase.add(i)
        prof.window += count
        prof.samples[part] = prof.samples.get(part, 0) + count
        path_key = tuple(frames)
        prof.paths[path_key] = prof.paths.get(path_key, 0) + count
        # the functions below the outermost phase frame, so the path into a nested phase counts
        # in it (physics entered through a per-substep dispatch names that dispatch); the phase
        # frames themselves are the phase, not a function of it
        start = 0 if outer is None else outer + 1
        inside = [f for i, f in enumerate(frames) if i >= start and i not in is_phase]
        if inside:
            prof.self_[(part, inside[-1])] = prof.self_.get((part, inside[-1]), 0) + count
        for func in set(inside):
            prof.total[(part, func)] = prof.total.get((part, func), 0) + count
    return prof


def side_profiles(profile_root: Path) -> dict[str, Path]:
    """case -> folded file of the newest profiled batch under ``profile_root`` (raw-runs/<machine>/<sha>/profile)."""
    found = {}
    for record in sorted(Path(profile_root).glob("*/profile.json"), key=lambda p: p.stat().st_mtime):
        try:
            doc = json.loads(record.read_text())
        except (OSError, ValueError):
            continue
        for case, row in (doc.get("cases") or {}).items():
            f = record.parent / str(row.get("folded", ""))
            if row.get("returncode") == 0 and f.is_file():
                found[case] = f
    return found


def part_ms(parts: pd.DataFrame | None) -> dict[str, float]:
    """A side's measured ms per vector step of each profiled part (medians over its runs)."""
    if parts is None:
        return {}
    med = parts.median()
    out = {k: float(med.get(k, math.nan)) for k in PHASES}
    out["rest"] = float(med.get("env_step_rest", 0.0)) + float(med.get("bookkeeping", 0.0))
    return out


def function_rows(case: str, base: CaseProfile, cand: CaseProfile, base_ms: dict, cand_ms: dict,
                  phases: list[str], top: int = TOP) -> list[dict]:
    """For each phase given: the functions whose time changed most (by total, then self), in ms
    per vector step, with the share of the phase's measured change each explains."""
    rows = []
    for part in phases:
        nb, nc = base.samples.get(part, 0), cand.samples.get(part, 0)
        mb, mc = base_ms.get(part, math.nan), cand_ms.get(part, math.nan)
        if not (nb or nc) or math.isnan(mb) or math.isnan(mc):
            continue
        change = mc - mb

        def ms(prof, counts, n, m, key):
            return counts.get(key, 0) / n * m if n else 0.0

        funcs = {f for (p, f) in list(base.total) + list(cand.total) if p == part}
        scored = []
        for func in funcs:
            key = (part, func)
            tb, tc = ms(base, base.total, nb, mb, key), ms(cand, cand.total, nc, mc, key)
            sb, sc = ms(base, base.self_, nb, mb, key), ms(cand, cand.self_, nc, mc, key)
            scored.append({"case": case, "phase": part, "function": func, "total_baseline_ms": tb,
                           "total_candidate_ms": tc, "delta_total_ms": tc - tb, "self_baseline_ms": sb,
                           "self_candidate_ms": sc, "delta_self_ms": sc - sb, "phase_change_ms": change,
                           "phase_baseline_ms": mb, "phase_candidate_ms": mc,
                           "share_of_phase_change": (tc - tb) / change if change else None,
                           "samples_baseline": base.total.get(key, 0), "samples_candidate": cand.total.get(key, 0)})
        scored.sort(key=lambda r: (-abs(r["delta_total_ms"]), -abs(r["delta_self_ms"]), r["function"]))
        rows += [{**r, "rank": i + 1} for i, r in enumerate(scored[:top])]
    return rows


def flagged_phases(attribution_row: dict, most: int = 3) -> list[str]:
    """The phases worth a function table: changes not too small to count whose interval excludes
    0, or that have no interval at all with these runs (then by size alone); largest
    first. Where to look, not a verdict: the family's marks say which changes a reader may act on."""
    found = [(abs(attribution_row.get(f"{p}_ms") or 0.0), p) for p in PHASES
             if attribution_row.get(f"{p}_excludes_0") is not False and attribution_row.get(f"{p}_ms") is not None
             and attribution_row.get(f"{p}_ms") == attribution_row.get(f"{p}_ms")
             and attribution_row.get(f"{p}_small") is not True]
    return [p for _, p in sorted(found, reverse=True)[:most]]


# --- the differential flame graph --------------------------------------------------------------------

def _tree(paths: dict[tuple[str, ...], int]) -> dict:
    root = {"n": 0, "kids": {}}
    for path, count in paths.items():
        root["n"] += count
        node = root
        for f in path:
            node = node["kids"].setdefault(f, {"n": 0, "kids": {}})
            node["n"] += count
    return root


def _frac(tree: dict, path: tuple[str, ...]) -> float:
    node = tree
    for f in path:
        node = node["kids"].get(f)
        if node is None:
            return 0.0
    return node["n"] / tree["n"] if tree["n"] else 0.0


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def flame_svg(title: str, base: CaseProfile, cand: CaseProfile, base_active_ms: float, cand_active_ms: float,
              width: int = 1200, row: int = 16) -> str:
    """The candidate's measured loop as an icicle graph (widths: its time), each frame coloured by
    its change against the baseline in ms per vector step (red: slower on the candidate, blue:
    faster; white: unchanged). Frames only the baseline had are not drawn (the usual limit of a
    differential flame graph); the function table lists them."""
    tb, tc = _tree(base.paths), _tree(cand.paths)
    rects, depth_max = [], 0
    scale = max(cand_active_ms, 1e-12)

    def walk(node, path, x, depth):
        nonlocal depth_max
        for name, kid in sorted(node["kids"].items(), key=lambda kv: -kv[1]["n"]):
            w = kid["n"] / tc["n"] * width if tc["n"] else 0
            p = (*path, name)
            delta = _frac(tc, p) * cand_active_ms - _frac(tb, p) * base_active_ms
            if w >= 0.5:
                rects.append((x, depth, w, name, delta, _frac(tc, p) * cand_active_ms))
                depth_max = max(depth_max, depth)
                walk(kid, p, x, depth + 1)
            x += w

    walk(tc, (), 0.0, 1)
    biggest = max([abs(r[4]) for r in rects] + [1e-9])
    height = (depth_max + 2) * row + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="#fff"/>',
           f'<text x="4" y="13" font-size="12">{_esc(title)} (width: candidate time, {scale:.2f} ms per vector '
           f'step; red: slower on the candidate, blue: faster)</text>']
    for x, depth, w, name, delta, ms in rects:
        t = min(1.0, abs(delta) / biggest)
        shade = int(255 - 200 * t)
        fill = f"rgb(255,{shade},{shade})" if delta > 0 else f"rgb({shade},{shade},255)"
        y = 16 + depth * row
        # cut first, then escaped: a label cut after escaping can end inside an entity
        fits = int(w / 7)
        label = _esc(name if len(name) <= fits else name[: max(fits - 1, 0)] + "…") if w > 40 else ""
        out.append(f'<g><title>{_esc(name)}: {ms:.3f} ms per vector step on the candidate, {delta:+.3f} ms '
                   f'against the baseline</title><rect x="{x:.1f}" y="{y}" width="{max(w - 0.5, 0.5):.1f}" '
                   f'height="{row - 1}" fill="{fill}" stroke="#ccc" stroke-width="0.3"/>'
                   + (f'<text x="{x + 2:.1f}" y="{y + row - 4}" clip-path="none">{label}</text>'
                      if label else "") + "</g>")
    out.append("</svg>")
    return "\n".join(out)


OVERHEAD_LIMIT = 1.3  # pins profile_overhead_limit overrides: a profiled run slower than this is flagged


def profiled_active_ms(folded: Path) -> float | None:
    """The profiled run's own active time per vector step (its entry JSON beside the stacks), or
    None where it wrote none."""
    try:
        doc = json.loads(Path(folded).with_suffix(".json").read_text())
        r = doc["results"][0]
        return float(r["total_active_ms"]) / int(r["measure_steps"])
    except (OSError, ValueError, KeyError, IndexError, TypeError, ZeroDivisionError):
        return None


def overhead(side, case: str) -> float | None:
    """How much slower the side's profiled run of ``case`` ran than its measured runs (their
    median active time per step): 1.12 is "profiled at 1.12x". A large factor means the sampler's
    own stops, not the program, decided which functions were caught."""
    profiled = profiled_active_ms(side.profiles[case]) if case in side.profiles else None
    measured = tables.per_run(side, "active_ms", case)
    if profiled is None or not len(measured):
        return None
    return profiled / float(np.median(measured))


def compare(b, c, attribution: pd.DataFrame, cases: list[str]) -> tuple[pd.DataFrame, dict[str, str]]:
    """Per case both sides profiled: the function table of the flagged phases (with how much each
    side's profiled run was slowed) and the flame graph."""
    rows, flames = [], {}
    att = attribution.set_index("case") if "case" in attribution else pd.DataFrame()
    for case in cases:
        if case not in b.profiles or case not in c.profiles or case not in att.index:
            continue
        parts_b, parts_c = tables.attribution_pair(b, c, case)
        physics = parts_b is not None and not parts_b["physics"].isna().all()
        pb, pc = load_case(b.profiles[case], physics), load_case(c.profiles[case], physics)
        mb, mc = part_ms(parts_b), part_ms(parts_c)
        phases = flagged_phases(att.loc[case].to_dict())
        slow_b, slow_c = overhead(b, case), overhead(c, case)
        limit = float((c.pins or {}).get("profile_overhead_limit", OVERHEAD_LIMIT))
        distorted = any(x is not None and x > limit for x in (slow_b, slow_c))
        rows += [{**r, "profiled_at_baseline": slow_b, "profiled_at_candidate": slow_c, "distorted": distorted}
                 for r in function_rows(case, pb, pc, mb, mc, phases)]
        active_b = float(parts_b["active"].median()) if parts_b is not None else math.nan
        active_c = float(parts_c["active"].median()) if parts_c is not None else math.nan
        flames[case] = flame_svg(f"{case}: {c.label} vs {b.label}", pb, pc, active_b, active_c)
    cols = ["case", "phase", "rank", "function", "delta_total_ms", "delta_self_ms", "share_of_phase_change",
            "total_baseline_ms", "total_candidate_ms", "self_baseline_ms", "self_candidate_ms", "phase_change_ms",
            "phase_baseline_ms", "phase_candidate_ms",
            "samples_baseline", "samples_candidate", "profiled_at_baseline", "profiled_at_candidate", "distorted"]
    return pd.DataFrame(rows, columns=cols), flames
