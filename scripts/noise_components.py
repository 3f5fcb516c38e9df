"""Where the variance of a machine's stored runs sits, per side and case: between windows of k
measured steps inside a run, between runs of a batch, between batches (mbaphases.stats.components),
and the windows per run and runs per side that reach a target precision at the least time.

    python scripts/noise_components.py --machine vm-aa-solo [--window 10] [--half-width 0.03]
    python scripts/noise_components.py --machine vm-75e01b-demo-duet --by-run
    python scripts/noise_components.py --machine vm-depsshare-history --by-pair
    python scripts/noise_components.py --machine vm-demo-getters --allocation

--by-run: each run in the order it started (its duet pair and CPU, where it ran in one) and how
much slower or faster than its side's median it ran (the median over its cases, log scale): where
a slowdown of the host fell, and whether the two runs of a pair shared it.

--allocation: what `mbaphases run` plans from the machine's runs (mbaphases.allocation), for the
newest batch's design, measured steps and runs a side, with every run of that set-up and design
(the batch's own included): per case the levels, their costs and the half-width predicted at the
batch's steps and runs (to set beside its report's), then the least-time steps and rounds.

--by-pair: per case and two sides that ran duet pairs together, the spread of the pairs' log
ratio (what a paired gate's interval is made of; against two sides' runs' own spread, what the
pairing cancelled) and the pairs that reach --half-width at 90%.

Reads raw-runs/<machine>/<commit>/run<k>.json and its meta (the batch, the run's wall time); writes
a Markdown table to stdout (and JSON with --json FILE). Bad input: one error line, exit 2."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from mbaphases import allocation, load
from mbaphases.errors import ScriptParser
from mbaphases.stats import components, rules


def run_slowdowns(machine_dir: Path) -> list[dict]:
    """Per run, in the order the runs started: its start (s from the first), side, pair, CPU and
    the median over its cases of log(throughput / its side's median throughput of the case)."""
    runs, by_cell = [], {}
    for meta, results in allocation.stored_runs(machine_dir):
        thr = {}
        for r in results:
            case = load.case_name(r["case"])
            thr[case] = float(r["collector_active_steps_per_sec"])
            by_cell.setdefault((meta["commit"], case), []).append(thr[case])
        runs.append((meta, thr))
    if not runs:
        return []
    first = min(m.get("started", 0) for m, _ in runs)
    out = []
    for meta, thr in sorted(runs, key=lambda x: x[0].get("started", 0)):
        duet = meta.get("duet") or {}
        logs = [np.log(v / np.median(by_cell[(meta["commit"], case)])) for case, v in thr.items()]
        out.append({"start_s": meta.get("started", 0) - first, "commit": meta["commit"][:10], "run": meta["run"],
                    "pair": duet.get("pair"), "cpu": duet.get("cpu"),
                    "slowdown": float(np.median(logs)) if logs else None})
    return out


def pair_spreads(machine_dir: Path, half_width: float) -> list[dict]:
    """Per case and pair of sides: the duet pairs both sides of which measured the case, the
    ratio of their geometric means, the sd of the pairs' log ratio (second side over first, in
    commit order), and the pairs a 90% interval of +-``half_width`` needs at that spread."""
    by_pair: dict[str, dict] = {}
    for meta, results in allocation.stored_runs(machine_dir):
        pair = (meta.get("duet") or {}).get("pair")
        if not pair:
            continue
        for r in results:
            by_pair.setdefault(pair, {}).setdefault(load.case_name(r["case"]), {})[meta["commit"]] = \
                float(r["collector_active_steps_per_sec"])
    logs: dict[tuple[str, str, str], list[float]] = {}
    for cases in by_pair.values():
        for case, values in cases.items():
            if len(values) == 2:
                (a, va), (b, vb) = sorted(values.items())
                logs.setdefault((case, a[:10], b[:10]), []).append(float(np.log(vb / va)))
    out = []
    for (case, a, b), x in sorted(logs.items()):
        sd = float(np.std(x, ddof=1)) if len(x) > 1 else None
        out.append({"case": case, "first": a, "second": b, "pairs": len(x), "ratio": float(np.exp(np.mean(x))),
                    "log_ratio_sd": sd,
                    "pairs_needed": None if sd is None else max(2, int(np.ceil((1.645 * sd / half_width) ** 2)))})
    return out


def read_runs(machine_dir: Path) -> dict[tuple[str, str], dict]:
    """(commit, case) -> {"runs": [(batch, steps)], "overhead_s": [...], "step_ms": [...]}."""
    out: dict[tuple[str, str], dict] = {}
    for meta, cases in allocation.stored_runs(machine_dir):
        wall_per_case = (meta.get("ended", 0) - meta.get("started", 0)) / len(cases)
        for r in cases:
            name = load.case_name(r["case"])
            active = load.active_steps(r)
            if active is None:
                continue  # an entry that keeps only means has no within-run level to tell
            steps = np.asarray(active)
            cell = out.setdefault((meta["commit"], name), {"runs": [], "overhead_s": [], "step_ms": []})
            cell["runs"].append((meta.get("batch", "?"), steps))
            # a run's cost beyond its measured window: process start, setup, warmup
            cell["overhead_s"].append(max(0.0, wall_per_case - steps.sum() / 1000))
            cell["step_ms"].append(float(steps.mean()))
    return out


def components_rows(machine_dir: Path, window: int, half_width: float) -> list[dict]:
    """Per side and case: the levels' spreads, a run's own cost and the repetition counts."""
    rows = []
    for (commit, case), cell in sorted(read_runs(machine_dir).items()):
        c = components.estimate(cell["runs"], window)
        if c is None:
            continue
        window_cost = window * float(np.median(cell["step_ms"])) / 1000
        run_cost = float(np.median(cell["overhead_s"]))
        best = components.best_windows(c, run_cost, window_cost)
        rows.append({"commit": commit[:10], "case": case, "runs": c.runs, "batches": c.batches,
                     "windows_per_run": c.windows_per_run, "window_sd": c.window, "run_sd": c.run,
                     "batch_sd": c.batch, "run_cost_s": run_cost, "window_cost_s": window_cost,
                     "best_windows_per_run": best,
                     "runs_a_side_now": components.runs_for(c, c.windows_per_run, half_width),
                     "runs_a_side_at_best": components.runs_for(c, best, half_width)})
    return rows


def allocation_plan(machine_dir: Path, half_width: float) -> dict | None:
    """The allocation for the newest batch's design, steps and runs a side, at its confidence
    (a batch that added runs until decisive: its confidence per look)."""
    records = load.batch_records(machine_dir.parent, machine_dir.name)
    if not records:
        return None
    newest = records[-1]
    metas = [m for m, _ in allocation.stored_runs(machine_dir) if m.get("batch") == newest.get("batch")]
    if not metas:
        return None
    duet = newest.get("duet") or {}
    design = allocation.design_of(bool(duet), bool(duet.get("share_cpu")), duet.get("pairing", "star"),
                                  len(newest.get("sides") or []))
    until = newest.get("until_decisive")
    confidence = float(until["confidence"]) if until else rules.DEFAULT_CONFIDENCE
    return allocation.plan(machine_dir, metas[0]["profile"], design, newest.get("runs_per_side") or newest["runs"],
                           None, half_width, confidence)




def main(argv=None) -> int:
    p = ScriptParser(description=__doc__.splitlines()[0])
    p.add_argument("--machine", required=True)
    p.add_argument("--raw-dir", default="raw-runs")
    p.add_argument("--window", type=int, default=10, help="steps per window (default 10)")
    p.add_argument("--half-width", type=float, default=0.03, help="target half-width of the ratio (default 0.03)")
    p.add_argument("--json", default=None)
    p.add_argument("--by-run", action="store_true", help="each run's slowdown against its side's median")
    p.add_argument("--by-pair", action="store_true", help="the spread of the duet pairs' log ratio, per case")
    p.add_argument("--allocation", action="store_true", help="the steps and rounds planned from the runs")
    args = p.parse_args(argv)
    machine_dir = Path(args.raw_dir) / args.machine
    if not machine_dir.is_dir():
        print(f"error: --machine {args.machine}: no stored runs under {machine_dir}", file=sys.stderr)
        return 2
    if args.window < 1 or not 0 < args.half_width < 1:
        print(f"error: --window {args.window} must be >= 1 and --half-width {args.half_width} in (0, 1)",
              file=sys.stderr)
        return 2
    if args.by_run + args.by_pair + args.allocation > 1:
        print("error: --by-run, --by-pair and --allocation are three tables; give one", file=sys.stderr)
        return 2
    if args.allocation:
        plan = allocation_plan(machine_dir, args.half_width)
        if plan is None:
            print(f"error: --machine {args.machine}: no batch with runs of 10-step windows to plan from",
                  file=sys.stderr)
            return 2
        rows = plan["cases"]
        header = ["case", "pairs or runs", "windows' spread", "beyond the windows", "share that is the windows'",
                  "a run's own cost s", "a window's cost s",
                  f"half-width at {plan['now']['measure_steps']} steps x {plan['now']['runs']} runs"]
        lines = [[r["case"], r["runs"], f"{r['window_sd']:.1%}", f"{r['run_sd']:.1%}", f"{r['window_share_now']:.0%}",
                  f"{r['run_cost_s']:.1f}", f"{r['window_cost_s']:.2f}", allocation.width_text(r["half_width_now"])] for r in rows]
        lines.append(["median", "", "", "", "", "", "", allocation.width_text(plan["now"]["median_half_width"])])
    elif args.by_pair:
        rows = pair_spreads(machine_dir, args.half_width)
        header = ["case", "first side", "second side", "pairs", "ratio (second / first)", "sd of the pairs' log ratio",
                  f"pairs for +-{args.half_width:.0%} (90%)"]
        lines = [[r["case"], r["first"], r["second"], r["pairs"], f"{r['ratio']:.3f}",
                  "n/a" if r["log_ratio_sd"] is None else f"{r['log_ratio_sd']:.3f}",
                  "n/a" if r["pairs_needed"] is None else r["pairs_needed"]] for r in rows]
    elif args.by_run:
        rows = run_slowdowns(machine_dir)
        header = ["start s", "commit", "run", "duet pair", "CPU", "against its side's median (log)"]
        lines = [[f"{r['start_s']:.0f}", r["commit"], r["run"], r["pair"] or "", "" if r["cpu"] is None else r["cpu"],
                  "" if r["slowdown"] is None else format(r["slowdown"], "+.3f")] for r in rows]
    else:
        rows = components_rows(machine_dir, args.window, args.half_width)
        header = ["commit", "case", "runs", "window sd", "run sd", "batch sd", "run's own cost s",
                  "windows/run now -> best", f"runs a side for +-{args.half_width:.0%}: now, at best"]
        lines = [[r["commit"], r["case"], r["runs"], f"{r['window_sd']:.1%}", f"{r['run_sd']:.1%}",
                  "n/a (1 batch)" if r["batch_sd"] is None else f"{r['batch_sd']:.1%}", f"{r['run_cost_s']:.1f}",
                  f"{r['windows_per_run']} -> {r['best_windows_per_run']}",
                  f"{r['runs_a_side_now']}, {r['runs_a_side_at_best']}"] for r in rows]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for line in lines:
        print("| " + " | ".join(str(x) for x in line) + " |")
    if args.allocation:
        print()
        print("\n".join(allocation.text(plan)))
    if args.json:
        Path(args.json).write_text(json.dumps(plan if args.allocation else rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
