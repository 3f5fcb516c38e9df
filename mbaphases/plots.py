"""The report's pictures (matplotlib, PNG and SVG), drawn from a Report."""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
# the same figure, the same bytes: SVG element ids from the figure alone, no creation date
matplotlib.rcParams["svg.hashsalt"] = "mbaphases"
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from mbaphases import tables  # noqa: E402

SIDE_COLORS = {"baseline": "#4C72B0", "candidate": "#DD8452"}
GATE_COLORS = {"PASS": "#2ca02c", "FAIL": "#d62728", "INCONCLUSIVE": "#ff9f1c", "MISSING": "#7f7f7f",
               "MISALIGNED": "#9467bd", "EXCEPTED": "#17becf"}
STACK = (("physics", "physics_ms", "#4C72B0"), ("update_state", "update_state_ms", "#55A868"),
         ("reset_done", "reset_done_ms", "#C44E52"), ("other env_step", None, "#8172B2"),
         ("replay", "replay_ms", "#CCB974"), ("bookkeeping", "bookkeeping_ms", "#64B5CD"))


def _short(case: str) -> str:
    algo, task, sim = case.split("/")
    return f"{algo}/{task.replace('_flat', '').replace('_joystick', '').replace('_tracking', '')}/{sim}"


def _save(fig, out: Path, name: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.svg"]
    fig.savefig(paths[0], dpi=110, bbox_inches="tight", metadata={"Software": None})
    fig.savefig(paths[1], bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    return paths


def runs_figure(rep):
    """Each side's runs as dots coloured by batch, the median as a bar, one panel per case."""
    cases = rep.cases
    batches = sorted({b for side in (rep.baseline, rep.candidate) for b in side.batches.values()})
    palette = plt.get_cmap("tab10")
    cols = min(4, max(1, len(cases)))
    rows = math.ceil(len(cases) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.8 * rows), squeeze=False)
    for ax, case in zip(axes.flat, cases):
        for i, (name, side) in enumerate((("baseline", rep.baseline), ("candidate", rep.candidate))):
            v = side.values
            runs = v[(v.case == case) & (v.metric == "throughput")]
            x = runs.value.to_numpy(dtype=float)
            offsets = np.full(len(x), i) + (np.linspace(-0.08, 0.08, len(x)) if len(x) else [])
            colors = [palette(batches.index(side.batches[r]) % 10) if r in side.batches else SIDE_COLORS[name]
                      for r in runs.run]
            ax.scatter(offsets, x, color=colors, zorder=3, s=22)
            if len(x):
                ax.hlines(np.median(x), i - 0.25, i + 0.25, color="black", lw=2, zorder=4)
        ax.set_xticks([0, 1], [rep.baseline.label, rep.candidate.label], fontsize=8)
        ax.set_xlim(-0.6, 1.6)
        ax.set_title(_short(case), fontsize=9)
        ax.tick_params(axis="y", labelsize=8)
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(cases):]:
        ax.axis("off")
    axes.flat[0].set_ylabel("env steps/s")
    title = "Throughput per run (dots) and median (bar)"
    if len(batches) > 1:
        title += "; colour = batch: " + ", ".join(f"{k + 1}={b}" for k, b in enumerate(batches))
    fig.suptitle(title, fontsize=11 if len(batches) <= 1 else 8)
    fig.tight_layout()
    return fig


def ratio_figure(rep):
    """Each case's confidence interval of the ratio (bar from lower to upper end, coloured
    by gate), its estimate, and the threshold line."""
    g = rep.gate.set_index("case")
    fig, ax = plt.subplots(figsize=(1.1 * len(rep.cases) + 2, 3.6))
    for i, c in enumerate(rep.cases):
        lo, hi, est = g.loc[c, "lower"], g.loc[c, "upper"], g.loc[c, "estimate"]
        color = GATE_COLORS.get(g.loc[c, "gate"], "#333333")
        if not tables.missing(lo):
            ax.bar(i, hi - lo, bottom=lo, width=0.5, color=color, alpha=0.8)
        if not tables.missing(est):
            ax.plot([i - 0.3, i + 0.3], [est, est], color="black", lw=2)
        top = rep.threshold if tables.missing(hi) else hi
        ax.annotate(g.loc[c, "gate"], (i, top), ha="center", va="bottom", fontsize=7)
    ax.axhline(rep.threshold, color="black", ls="--", lw=1, label=f"gate {rep.threshold:.2f}")
    ax.set_xticks(range(len(rep.cases)), [_short(c) for c in rep.cases], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(f"candidate / baseline: {rep.confidence:.0%} interval, estimate")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def phase_figure(rep):
    """Baseline and candidate stacked phase bars (ms per vector step)."""
    p = rep.phases.set_index("case")
    fig, ax = plt.subplots(figsize=(1.4 * len(rep.cases) + 2, 4.0))
    width = 0.38
    for i, case in enumerate(rep.cases):
        for j, side in enumerate(("baseline", "candidate")):
            get = lambda k, case=case, side=side: p.loc[case, f"{k}_{side}"]
            env_step = get("env_step_ms")
            if tables.missing(env_step):
                continue
            known = {k: (0.0 if tables.missing(get(k)) else get(k))
                     for _, k, _ in STACK if k is not None}
            known_env = known["physics_ms"] + known["update_state_ms"] + known["reset_done_ms"]
            bottom = 0.0
            for label, key, color in STACK:
                h = known[key] if key else max(env_step - known_env, 0.0)
                ax.bar(i + (j - 0.5) * width, h, width * 0.95, bottom=bottom, color=color,
                       label=label if i == 0 and j == 0 else None, edgecolor="white", lw=0.3)
                bottom += h
            ax.annotate("B" if side == "baseline" else "C", (i + (j - 0.5) * width, bottom), ha="center",
                        va="bottom", fontsize=7)
    ax.set_xticks(range(len(rep.cases)), [_short(c) for c in rep.cases], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("ms per vector step")
    ax.set_title("Phases: B = baseline, C = candidate", fontsize=10)
    ax.legend(fontsize=7, ncol=3)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def attribution_figure(rep):
    """Where the change in active ms per vector step went, per case."""
    a = rep.attribution.set_index("case")
    colors = dict(zip(tables.ATTRIBUTION, ("#4C72B0", "#8172B2", "#55A868", "#C44E52", "#937860", "#CCB974", "#64B5CD")))
    fig, ax = plt.subplots(figsize=(7.5, 0.55 * len(rep.cases) + 1.8))
    for i, case in enumerate(rep.cases):
        pos = neg = 0.0
        for k in tables.ATTRIBUTION:
            v = a.loc[case].get(f"{k}_ms") if case in a.index else None
            if tables.missing(v):
                continue
            left = pos if v >= 0 else neg + v
            ax.barh(i, abs(v), left=left, color=colors[k], label=k if i == 0 else None, edgecolor="white", lw=0.3)
            if v >= 0:
                pos += v
            else:
                neg += v
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(range(len(rep.cases)), [_short(c) for c in rep.cases], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("change in ms per vector step (candidate - baseline)")
    ax.set_title("Branch-level attribution of the gap", fontsize=10)
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


FIGURES = {"ratio": ratio_figure, "runs": runs_figure, "phases": phase_figure, "attribution": attribution_figure}


def ledger_figure(ov):
    """Per case, each candidate's gain against the reference, stacked by phase (ms per vector step)."""
    led = ov.ledger
    cases = list(dict.fromkeys(led.case))
    cands = list(dict.fromkeys(led.candidate))
    cols = min(4, max(1, len(cases)))
    rows = math.ceil(len(cases) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 3.0 * rows), squeeze=False)
    parts = (("physics", "#4C72B0"), ("update_state", "#55A868"), ("reset_done", "#C44E52"), ("other", "#8172B2"))
    for ax, case in zip(axes.flat, cases):
        sub = led[led.case == case].set_index("candidate")
        pos_bottom, neg_bottom = np.zeros(len(cands)), np.zeros(len(cands))
        for name, color in parts:
            vals = np.array([-_f(sub.loc[c, f"{name}_ms"]) for c in cands])
            clear = np.array([sub.loc[c].get(f"{name}_clear") is True for c in cands])
            bottom = np.where(vals >= 0, pos_bottom, neg_bottom)
            # a part that is not a mark of the ledger's family (noise, too small, or no interval at
            # the family's level) is hatched and faint
            for idx in range(len(cands)):
                ax.bar(idx, vals[idx], bottom=bottom[idx], color=color, alpha=1.0 if clear[idx] else 0.35,
                       hatch=None if clear[idx] else "///", edgecolor="white" if clear[idx] else color,
                       label=name if idx == 0 else None)
            pos_bottom += np.where(vals >= 0, vals, 0)
            neg_bottom += np.where(vals < 0, vals, 0)
        # the whole change with its interval
        total = np.array([-_f(sub.loc[c, "delta_sum_ms"]) for c in cands])
        lo = np.array([-_f(sub.loc[c].get("delta_sum_upper_ms")) for c in cands])
        hi = np.array([-_f(sub.loc[c].get("delta_sum_lower_ms")) for c in cands])
        ok = ~(np.isnan(lo) | np.isnan(hi) | np.isnan(total))
        if ok.any():
            ax.errorbar(np.arange(len(cands))[ok], total[ok], yerr=[np.maximum(total[ok] - lo[ok], 0),
                                                                   np.maximum(hi[ok] - total[ok], 0)],
                        fmt="_", color="black", ms=10, capsize=3, lw=1, label="Δ active, interval")
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xticks(range(len(cands)), cands, rotation=30, ha="right", fontsize=7)
        ax.set_title(_short(case), fontsize=9)
        ax.tick_params(axis="y", labelsize=8)
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(cases):]:
        ax.axis("off")
    axes.flat[0].set_ylabel(f"gain vs {ov.reference} (ms/step)")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle(f"What each candidate bought against {ov.reference}, by phase (up: faster; hatched: "
                 "interval contains 0)", fontsize=11)
    fig.tight_layout()
    return fig


HISTORY_PHASES = ("physics", "update_state", "reset_done")


def history_figure(ov):
    """The candidates in first-parent order (commits, releases, a dependency's versions) against
    the baseline: the gate's ratio per case, then each phase's change, every point with its
    interval (the report's confidence)."""
    by_label = {r.candidate.label: r for r in ov.reports}
    order = [c for c in ov.history if c in by_label]
    cases = ov.reports[0].cases
    fig, axes = plt.subplots(1 + len(HISTORY_PHASES), 1, figsize=(1.3 * len(order) + 4, 2.6 * (1 + len(HISTORY_PHASES))),
                             sharex=True)
    spread = 0.5 / max(len(cases), 1)  # the cases side by side at each candidate, so the bars do not hide each other
    for k, case in enumerate(cases):
        colour = plt.get_cmap("tab10")(k % 10)
        xs = [i + (k - (len(cases) - 1) / 2) * spread for i in range(len(order))]
        panels = [(axes[0], lambda r: r.gate.set_index("case"), "estimate", "lower", "upper")]
        panels += [(ax, lambda r: r.attribution.set_index("case"), f"{p}_ms", f"{p}_lower_ms", f"{p}_upper_ms")
                   for ax, p in zip(axes[1:], HISTORY_PHASES)]
        for ax, table_of, est, lo, hi in panels:
            ys, low, high = [], [], []
            for c in order:
                t = table_of(by_label[c])
                row = t.loc[case] if case in t.index else {}
                y, a, b = (_f(row.get(x)) if hasattr(row, "get") else float("nan") for x in (est, lo, hi))
                ys.append(y)
                low.append(0.0 if tables.missing(a) else y - a)
                high.append(0.0 if tables.missing(b) else b - y)
            ax.errorbar(xs, ys, yerr=[low, high], marker="o", ms=4, capsize=2, lw=1, color=colour,
                        label=_short(case))
    axes[0].axhline(ov.reports[0].threshold, color="black", ls="--", lw=1, label=f"gate {ov.reports[0].threshold:.2f}")
    axes[0].set_ylabel("throughput\ncandidate / baseline")
    axes[0].legend(fontsize=7, ncol=2)
    for ax, p in zip(axes[1:], HISTORY_PHASES):
        ax.axhline(0.0, color="black", lw=0.8)
        ax.set_ylabel(f"{p}\nchange, ms / step")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[-1].set_xticks(range(len(order)), order, rotation=20, ha="right", fontsize=8)
    fig.suptitle(f"History against {ov.reports[0].baseline.label} ({ov.reports[0].confidence:.0%} intervals)",
                 fontsize=11)
    fig.tight_layout()
    return fig


def _f(x) -> float:
    return float("nan") if x is None else float(x)


def draw_overview(ov, out: Path) -> dict[str, list[Path]]:
    return {"ledger": _save(ledger_figure(ov), out, "ledger"), "history": _save(history_figure(ov), out, "history")}


def draw_all(rep, out: Path) -> dict[str, list[Path]]:
    """Every picture as PNG and SVG under ``out``."""
    return {name: _save(make(rep), out, name) for name, make in FIGURES.items()}
