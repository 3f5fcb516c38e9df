"""Load the two sides of an A/B into one shape, from either input kind.

* asv results: ``results/<machine>/<sha>-<env>.json`` (the samples asv stored,
  one per independent run) plus the raw runs ``raw-runs/<machine>/<sha>/``
  (run meta: environment, failures; raw JSON: case configs for alignment).
* raw entry JSON of the field's schema, one file per run, per side.

Either way a side becomes a :class:`Side`: a long table of per-run values
(``run, case, metric, value``), failed runs, per-case alignment keys, the
environment and the pinned parameters.
"""
from __future__ import annotations

import glob
import json
import math
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from mbaphases.errors import UsageError

# asv track_ name -> (metric, factor from the stored unit)
ASV_TRACKS = {
    "track_throughput": ("throughput", 1.0), "track_active_time": ("active_ms", 1000.0),
    "track_env_step": ("env_step_ms", 1000.0), "track_physics": ("physics_ms", 1000.0),
    "track_step_core": ("step_core_ms", 1000.0), "track_update_state": ("update_state_ms", 1000.0),
    "track_reset_done": ("reset_done_ms", 1000.0), "track_replay": ("replay_ms", 1000.0),
    "track_bookkeeping": ("bookkeeping_ms", 1000.0), "track_resets_per_step": ("resets_per_step", 1.0),
}
ASV_CLASS = "collector.CollectorActive"
ALIGN_KEYS = ("num_envs", "replay_capacity_rows", "replay_capacity_steps", "obs_dim", "critic_dim", "action_dim",
              "env_steps_per_sync")
# differences a runtime switch is allowed to make in the resolved config
RUNTIME_KEYS = ("runtime",)


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


def case_name(case: dict) -> str:
    return f"{case['algo']}/{case['task']}/{case['sim']}"


def _read_json(path: Path) -> dict:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    try:
        return json.loads(text)
    except ValueError as e:
        raise UsageError(f"{path} is not valid JSON ({e})") from None


def _step_mean(stats, path: str, where: str) -> float:
    """A run's value for a phase: the mean over its recorded steps."""
    if stats is None:
        return math.nan
    samples = stats.get("samples_ms")
    values = samples if samples else [stats.get("mean_ms")]
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in values):
        raise UsageError(f"{path}: NaN or null in {where}")
    return sum(values) / len(values)


def entry_run_values(doc: dict, path: str) -> tuple[dict, dict, dict]:
    """{case: {metric: value}}, {case: message} and {case: alignment} of one entry JSON."""
    values, failed, align = {}, {}, {}
    for r in doc.get("results", []):
        try:
            case = case_name(r["case"])
            ph, es = r["phase_ms_per_vector_step"], r["env_step_timing_ms_per_vector_step"]
            thr = r["collector_active_steps_per_sec"]
            if thr is None or (isinstance(thr, float) and math.isnan(thr)):
                raise UsageError(f"{path}: NaN or null collector_active_steps_per_sec for {case}")
            v = {
                "throughput": float(thr),
                "active_ms": float(r["total_active_ms"]) / int(r["measure_steps"]),
                "env_step_ms": _step_mean(ph["env_step_ms"], path, f"{case} env_step_ms"),
                "replay_ms": _step_mean(ph["replay_ms"], path, f"{case} replay_ms"),
                "bookkeeping_ms": _step_mean(ph["bookkeeping_ms"], path, f"{case} bookkeeping_ms"),
                "physics_ms": _step_mean(r.get("physics_ms_per_vector_step"), path, f"{case} physics_ms"),
            }
            for key in ("step_core_ms", "update_state_ms", "reset_done_ms"):
                v[key] = _step_mean(es.get(key), path, f"{case} {key}")
            v["resets_per_step"] = _step_mean(es.get("reset_done_count"), path, f"{case} reset_done_count")
        except (KeyError, TypeError, ZeroDivisionError) as e:
            raise UsageError(f"{path}: not the collector entry schema ({type(e).__name__}: {e})") from None
        values[case] = v
        a = {k: r["case"].get(k) for k in ALIGN_KEYS}
        a.update(warmup_steps=r.get("warmup_steps"), measure_steps=r.get("measure_steps"))
        resolved = r["case"].get("resolved_config")
        if isinstance(resolved, dict):
            rest = {k: val for k, val in resolved.items() if k not in RUNTIME_KEYS and k != "seed"}
            a["config"] = json.dumps(rest, sort_keys=True)
        align[case] = a
    for e in doc.get("errors", []):
        failed[e.get("case", "?")] = f"{e.get('type', 'Error')}: {e.get('message', '')}"
    return values, failed, align


def _merge_alignment(align: dict, new: dict, path: str) -> None:
    for case, a in new.items():
        if case in align and align[case] != a:
            diff = sorted(k for k in set(a) | set(align[case]) if a.get(k) != align[case].get(k))
            raise UsageError(f"{path}: pinned parameters of {case} differ from the side's other runs ({', '.join(diff)})")
        align[case] = a


def _side_from_entry_docs(label, revision, docs: list[tuple[str, str, dict]]) -> Side:
    rows, fails, align, env = [], [], {}, {}
    for run, path, doc in docs:
        values, failed, a = entry_run_values(doc, path)
        _merge_alignment(align, a, path)
        for case, v in values.items():
            rows += [{"run": run, "case": case, "metric": m, "value": x} for m, x in v.items()]
        fails += [{"run": run, "case": c, "message": m} for c, m in failed.items()]
        env = env or doc.get("provenance", {})
    return Side(label, revision, pd.DataFrame(rows, columns=["run", "case", "metric", "value"]),
                pd.DataFrame(fails, columns=["run", "case", "message"]), align, env,
                sources=[p for _, p, _ in docs])


def load_raw_side(label: str, patterns: list[str]) -> Side:
    """A side from raw entry JSON files (paths or globs), one file per run."""
    paths = []
    for pat in patterns:
        # a glob over a raw run folder also meets the suite's run<k>.meta.json: not entry output
        hits = sorted(h for h in glob.glob(pat) if not h.endswith(".meta.json")) if any(ch in pat for ch in "*?[") else [pat]
        if not hits:
            raise UsageError(f"no file matches {pat!r} for side {label!r}")
        paths += hits
    if not paths:
        raise UsageError(f"side {label!r} has no result files")
    docs = []
    for p in paths:
        doc = _read_json(Path(p))
        if doc.get("benchmark") != "offpolicy_collector_active" or "results" not in doc:
            raise UsageError(f"{p} is not an offpolicy_collector_active result file")
        docs.append((Path(p).stem, p, doc))
    args = {json.dumps({k: d["args"].get(k) for k in ("num_envs", "warmup_steps", "measure_steps", "replay_capacity_steps")})
            for _, _, d in docs}
    if len(args) > 1:
        raise UsageError(f"side {label!r} mixes pinned parameters across runs: {sorted(args)}")
    side = _side_from_entry_docs(label, label, docs)
    side.pins = json.loads(next(iter(args)))
    return side


# --- asv results -------------------------------------------------------------------------------

def machines(results_dir: Path) -> list[str]:
    return sorted(p.parent.name for p in results_dir.glob("*/machine.json"))


def pick_machine(results_dir: Path, machine: str | None) -> str:
    found = machines(results_dir)
    if machine:
        if machine not in found:
            raise UsageError(f"machine {machine!r} has no results in {results_dir}; valid: {', '.join(found) or 'none'}")
        return machine
    if not found:
        raise UsageError(f"no asv results in {results_dir}")
    if len(found) > 1:
        raise UsageError(f"several machines in {results_dir}: {', '.join(found)}; pass --machine")
    return found[0]


def resolve_revision(rev: str, results_dir: Path, machine: str, repo: Path | None) -> str:
    """SHA, SHA prefix or branch name -> the full commit hash asv stored."""
    from asv import results as asv_results
    from asv import util

    full = None
    if repo is not None and Path(repo).exists():
        p = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                           capture_output=True, text=True, check=False)
        if p.returncode == 0:
            full = p.stdout.strip()
    try:
        short = asv_results.get_result_hash_from_prefix(str(results_dir), machine, full or rev)
    except util.UserError as e:
        raise UsageError(f"revision {rev!r}: {e}") from None
    if short is None:
        raise UsageError(f"unknown revision {rev!r}: no results for it on machine {machine!r} in {results_dir}")
    for r in asv_results.iter_results_for_machine_and_hash(str(results_dir), machine, short):
        return r.commit_hash
    raise UsageError(f"unknown revision {rev!r}")


def load_asv_side(label: str, rev: str, results_dir: Path, machine: str, repo: Path | None,
                  raw_dir: Path | None = None) -> Side:
    from asv import results as asv_results
    from asv import util

    results_dir = Path(results_dir)
    sha = resolve_revision(rev, results_dir, machine, repo)
    try:
        found = list(asv_results.iter_results_for_machine_and_hash(str(results_dir), machine, sha[:8]))
    except util.UserError as e:
        raise UsageError(f"revision {rev!r}: {e}") from None
    if not found:
        raise UsageError(f"side {label!r}: no asv results for {sha[:8]} on {machine}")
    if len(found) > 1:
        raise UsageError(f"side {label!r}: {len(found)} environments have results for {sha[:8]}; keep one")
    res = found[0]
    bench_path = results_dir / "benchmarks.json"
    benchmarks = _read_json(bench_path) if bench_path.exists() else {}
    rows, versions = [], set()
    for track, (metric, factor) in ASV_TRACKS.items():
        key = f"{ASV_CLASS}.{track}"
        if key not in res.get_all_result_keys():
            continue
        versions.add(res.benchmark_version.get(key))
        if key in benchmarks and benchmarks[key].get("version") != res.benchmark_version.get(key):
            raise UsageError(f"{sha[:8]}: {key} was measured with benchmark version {res.benchmark_version.get(key)}, "
                             f"benchmarks.json has {benchmarks[key].get('version')} (other pinned parameters)")
        params = res.get_result_params(key)
        for (case_repr,), samples in zip([(p,) for p in params[0]], res.get_result_samples(key, params)):
            case = case_repr.strip("'\"")
            for k, value in enumerate(samples or []):
                if value is None or (isinstance(value, float) and math.isnan(value) and metric == "throughput"):
                    continue
                rows.append({"run": f"r{k + 1}", "case": case, "metric": metric, "value": float(value) * factor})
    if not rows:
        raise UsageError(f"side {label!r}: no collector samples for {sha[:8]} on {machine}")
    if len(versions) > 1:
        raise UsageError(f"{sha[:8]}: mixed benchmark versions {sorted(map(str, versions))}")
    side = Side(label, sha, pd.DataFrame(rows), pd.DataFrame(columns=["run", "case", "message"]))
    side.sources = [str(results_dir / machine)]
    side.pins = {"benchmark_version": next(iter(versions))}
    raw = Path(raw_dir or results_dir.parent / "raw-runs") / machine / sha
    metas = sorted(raw.glob("run*.meta.json"))
    fails, align = [], {}
    for meta_path in metas:
        meta = _read_json(meta_path)
        if meta.get("version") != side.pins["benchmark_version"]:
            continue  # a run under other pinned parameters: kept on disk, not mixed in
        run = f"run{meta['run']}"
        fails += [{"run": run, "case": c, "message": m} for c, m in meta.get("failed_cases", {}).items()]
        side.environment = meta.get("environment", side.environment)
        side.pins = {"benchmark_version": meta["version"], **meta.get("profile", {})}
        for when in ("load_start", "load_end"):
            load = meta.get(when) or {}
            if load.get("busy"):
                side.notes.append(f"{run}: machine busy at {when.split('_')[1]} "
                                  f"({load.get('cpu_busy_fraction', 0):.0%} of CPUs used by other processes)")
        raw_json = meta_path.with_name(f"run{meta['run']}.json")
        if raw_json.exists():
            _, _, a = entry_run_values(_read_json(raw_json), str(raw_json))
            _merge_alignment(align, a, str(raw_json))
        side.sources.append(str(meta_path))
    side.failed = pd.DataFrame(fails, columns=["run", "case", "message"])
    side.alignment = align
    return side
