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
import hashlib
import json
import math
import numbers
import statistics
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from asv import results as asv_results
from asv import util

from mbaphases.errors import UsageError
from mbaphases.hardware import memory_class
from mbaphases.inputs import read_text
from mbaphases.profiles import side_profiles
from mbaphases.side import Side

# asv benchmark name -> (metric, value from the stored sample): every stored metric is
# lower-is-better for asv; throughput is stored as seconds per million env steps
ASV_TRACKS = {
    "entry_time_per_million_steps": ("throughput", lambda x: 1e6 / x),
    "entry_active_time": ("active_ms", lambda x: 1000.0 * x),
    "entry_env_step": ("env_step_ms", lambda x: 1000.0 * x), "entry_physics": ("physics_ms", lambda x: 1000.0 * x),
    "entry_step_core": ("step_core_ms", lambda x: 1000.0 * x),
    "entry_update_state": ("update_state_ms", lambda x: 1000.0 * x),
    "entry_reset_done": ("reset_done_ms", lambda x: 1000.0 * x), "entry_replay": ("replay_ms", lambda x: 1000.0 * x),
    "entry_bookkeeping": ("bookkeeping_ms", lambda x: 1000.0 * x),
    "entry_resets_per_step": ("resets_per_step", lambda x: x),
}
ASV_CLASS = "collector.CollectorActive"
ALIGN_KEYS = ("num_envs", "replay_capacity_rows", "replay_capacity_steps", "obs_dim", "critic_dim", "action_dim",
              "env_steps_per_sync")
# differences a runtime switch is allowed to make in the resolved config
RUNTIME_KEYS = ("runtime",)


HARDWARE_KEYS = ("machine", "cpu", "logical_cpus", "memory", "gpu", "run_cpus")
HARDWARE_FIELDS = ("cpu", "logical_cpus", "memory", "gpu")  # of a run meta's environment


def run_cpus(env: dict) -> dict:
    """The CPUs a run had and the profile's wish ({} where the run recorded none): runs with other
    CPU counts measured another program, and are compared as other hardware is (never)."""
    cpus = env.get("cpus") or {}
    return {"run_cpus": cpus["count"], "profile_cpus": cpus.get("profile_asks")} if cpus.get("count") else {}


def hardware_differences(b: Side, c: Side) -> list[str]:
    """Hardware both sides recorded and that differs, as 'key (baseline vs candidate)'."""
    def value(hw, k):
        return memory_class(hw[k]) if k == "memory" else str(hw[k])

    return [f"{k} ({b.hardware[k]} vs {c.hardware[k]})" for k in HARDWARE_KEYS
            if k in b.hardware and k in c.hardware and value(b.hardware, k) != value(c.hardware, k)]


def check_distinct_runs(b: Side, c: Side) -> None:
    """The same run file (by path or content) on both sides is one run, not two sides."""
    by_digest = {d: p for p, d in b.run_digests.items()}
    for path, digest in c.run_digests.items():
        if digest in by_digest:
            raise UsageError(f"{path} (candidate) is the same run as {by_digest[digest]} (baseline); "
                             "the sides must be different runs")


def case_name(case: dict) -> str:
    return f"{case['algo']}/{case['task']}/{case['sim']}"


def read_json_file(path: Path) -> dict:
    text = read_text(Path(path), "file")
    try:
        return json.loads(text)
    except ValueError as e:
        raise UsageError(f"{path} is not valid JSON ({e})") from None


def _number(x, path: str, where: str, positive: bool) -> float:
    """A measured value: a finite number, > 0 (throughput) or >= 0 (times)."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise UsageError(f"{path}: {where} is {x!r}, not a number")
    x = float(x)
    if not math.isfinite(x) or (x <= 0 if positive else x < 0):
        raise UsageError(f"{path}: {where} is {x!r}; it must be finite and {'> 0' if positive else '>= 0'}")
    return x


def _step_mean(stats, path: str, where: str) -> float:
    """A run's value for a phase: the mean over its recorded steps."""
    if stats is None:
        return math.nan
    if not isinstance(stats, dict):
        raise UsageError(f"{path}: {where} is {type(stats).__name__}, not timing stats")
    samples = stats.get("samples_ms")
    values = samples if samples else [stats.get("mean_ms")]
    if not isinstance(values, list):
        raise UsageError(f"{path}: {where}.samples_ms is {type(values).__name__}, not a list")
    values = [_number(v, path, where, positive=False) for v in values]
    return sum(values) / len(values)


ACTIVE_STEP_PHASES = ("env_step_ms", "replay_ms", "bookkeeping_ms")


WINDOW_STEPS = 10  # steps per window of the within-run spread


def active_steps(result: dict) -> list[float] | None:
    """One case's per-step active time (env_step + replay + bookkeeping), ms; None without
    per-step samples (the field's entry may keep only means)."""
    try:
        series = [result["phase_ms_per_vector_step"][k]["samples_ms"] for k in ACTIVE_STEP_PHASES]
    except (KeyError, TypeError):
        return None
    if any(not isinstance(x, list) for x in series) or len({len(x) for x in series}) != 1:
        return None
    try:
        return [sum(float(v) for v in vals) for vals in zip(*series)]
    except (TypeError, ValueError):
        return None


def window_spread(result: dict, k: int = WINDOW_STEPS) -> float | None:
    """The spread inside one run: the standard deviation of the log mean active time of its
    windows of ``k`` steps (0.05: about 5% from window to window). The run-level spread (CV
    over runs) beside it says at which level repetitions pay (mbaphases.stats.components).
    None with fewer than two windows."""
    steps = active_steps(result)
    if steps is None or len(steps) < 2 * k:
        return None
    means = [sum(steps[i:i + k]) / k for i in range(0, len(steps) - k + 1, k)]
    if min(means) <= 0 or not all(math.isfinite(m) for m in means):
        return None
    return statistics.stdev(math.log(m) for m in means)


def step_trend(result: dict) -> float | None:
    """Steady state of one case's measured window: the median per-step active time (env_step +
    replay + bookkeeping) of its first third over that of its last third. Near 1 in a steady
    state; above 1 when the first measured steps were still slower, below 1 when the later ones
    were (e.g. the envs' first resets). None without per-step samples."""
    steps = active_steps(result)
    if steps is None or len(steps) < 6:
        return None
    third = len(steps) // 3
    med_first, med_last = statistics.median(steps[:third]), statistics.median(steps[-third:])
    if not (med_last > 0 and math.isfinite(med_first)):
        return None
    return med_first / med_last


def _entry_json(text: str, path) -> tuple[dict, bool]:
    """A raw entry JSON and whether it had bare NaN: the field's entry writes them in some
    non-gated fields, read here as null."""
    found = []

    def constant(name):
        found.append(name)
        return None

    try:
        return json.loads(text, parse_constant=constant), bool(found)
    except ValueError as e:
        raise UsageError(f"{path} is not valid JSON ({e})") from None


def run_flags(meta: dict) -> list[str]:
    """What disturbed a run, from its meta: other processes (busy) and the hypervisor (steal)."""
    notes = busy_notes(meta)
    during = meta.get("load_during") or {}
    if during.get("steal"):
        notes.append(f"STEAL: the hypervisor took {during.get('steal_fraction', 0):.1%} of the CPUs during the run")
    return notes


def busy_notes(meta: dict) -> list[str]:
    """Where other processes used the machine around a run: during it (how runs are
    recorded now) or in half-second samples just before and after it (older runs)."""
    notes = []
    for key, where in (("load_during", "during the run"), ("load_start", "at start"), ("load_end", "at end")):
        load = meta.get(key) or {}
        if load.get("busy"):
            cpus = load.get("cpus")  # the run's own CPUs, where recorded (older runs: the machine's)
            of = f"CPU {','.join(map(str, cpus))}" if cpus else "CPUs"
            notes.append(f"machine busy {where} ({load.get('cpu_busy_fraction', 0):.0%} of {of} used by other processes)")
    return notes


def entry_run_values(doc: dict, path: str) -> tuple[dict, dict, dict]:
    """{case: {metric: value}}, {case: message} and {case: alignment} of one entry JSON."""
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: top level is {type(doc).__name__}, not the entry's JSON object")
    results, errors = doc.get("results", []), doc.get("errors", [])
    if not isinstance(results, list) or not isinstance(errors, list):
        raise UsageError(f"{path}: 'results' and 'errors' must be lists")
    values, failed, align = {}, {}, {}
    for r in results:
        try:
            case = case_name(r["case"])
            ph, es = r["phase_ms_per_vector_step"], r["env_step_timing_ms_per_vector_step"]
            measure = r["measure_steps"]
            if isinstance(measure, bool) or not isinstance(measure, int) or measure <= 0:
                raise UsageError(f"{path}: measure_steps of {case} is {measure!r}, not a positive integer")
            v = {
                "throughput": _number(r["collector_active_steps_per_sec"], path,
                                      f"collector_active_steps_per_sec of {case}", positive=True),
                "active_ms": _number(r["total_active_ms"], path, f"total_active_ms of {case}", positive=True) / measure,
                "env_step_ms": _step_mean(ph["env_step_ms"], path, f"{case} env_step_ms"),
                "replay_ms": _step_mean(ph["replay_ms"], path, f"{case} replay_ms"),
                "bookkeeping_ms": _step_mean(ph["bookkeeping_ms"], path, f"{case} bookkeeping_ms"),
                "physics_ms": _step_mean(r.get("physics_ms_per_vector_step"), path, f"{case} physics_ms"),
            }
            for key in ("step_core_ms", "update_state_ms", "reset_done_ms"):
                v[key] = _step_mean(es.get(key), path, f"{case} {key}")
            v["resets_per_step"] = _step_mean(es.get("reset_done_count"), path, f"{case} reset_done_count")
            trend, spread = step_trend(r), window_spread(r)
            v["step_trend"] = math.nan if trend is None else trend
            v["window_spread"] = math.nan if spread is None else spread
        except (KeyError, TypeError, AttributeError) as e:
            raise UsageError(f"{path}: not the collector entry schema ({type(e).__name__}: {e})") from None
        if case in values:
            raise UsageError(f"{path}: case {case} appears twice in results")
        values[case] = v
        a = {k: r["case"].get(k) for k in ALIGN_KEYS}
        a.update(warmup_steps=r.get("warmup_steps"), measure_steps=r.get("measure_steps"))
        # two entries that define the active window differently measure different things
        a["definition"] = doc.get("definition")
        a["active_phases"] = ",".join(sorted(ph))
        resolved = r["case"].get("resolved_config")
        if isinstance(resolved, dict):
            rest = {k: val for k, val in resolved.items() if k not in RUNTIME_KEYS and k != "seed"}
            a["config"] = json.dumps(rest, sort_keys=True)
        align[case] = a
    for e in errors:
        if not isinstance(e, dict):
            raise UsageError(f"{path}: an entry of 'errors' is {type(e).__name__}, not an object with case/type/message")
        failed[str(e.get("case", "?"))] = f"{e.get('type', 'Error')}: {e.get('message', '')}"
    if not values and not failed:
        raise UsageError(f"{path}: no results and no errors: the run measured nothing")
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


def _entry_hardware(doc: dict) -> dict:
    host = (doc.get("provenance") or {}).get("host") or {}
    hw = {k: host[k] for k in HARDWARE_FIELDS if host.get(k) is not None}
    if host.get("node"):
        hw["machine"] = host["node"]
    return hw


def load_raw_side(label: str, patterns: list[str]) -> Side:
    """A side from raw entry JSON files (paths or globs), one file per run.

    A run is its file (by path), never its name: three run1.json from three
    folders are three runs; the same file, or the same content, given twice is
    an error."""
    paths = []
    for pat in patterns:
        # a glob over a raw run folder also meets the suite's run<k>.meta.json: not entry output
        hits = sorted(h for h in glob.glob(pat) if not h.endswith(".meta.json")) if any(ch in pat for ch in "*?[") else [pat]
        if not hits:
            raise UsageError(f"no file matches {pat!r} for side {label!r}")
        paths += hits
    if not paths:
        raise UsageError(f"side {label!r} has no result files")
    docs, seen, digests, notes = [], {}, {}, []
    for p in paths:
        real = str(Path(p).resolve())
        text = read_text(Path(p), "file")
        digest = hashlib.sha256(text.encode()).hexdigest()
        if real in seen or digest in seen:
            raise UsageError(f"{p} is given twice for side {label!r} (same {'file' if real in seen else 'content'} "
                             f"as {seen.get(real) or seen.get(digest)}); each run counts once")
        seen[real] = seen[digest] = p
        doc, had_nan = _entry_json(text, p)
        if not isinstance(doc, dict) or doc.get("benchmark") != "offpolicy_collector_active" or "results" not in doc:
            raise UsageError(f"{p} is not an offpolicy_collector_active result file")
        if not isinstance(doc.get("args"), dict):
            raise UsageError(f"{p} has no 'args' object: the run's pinned parameters are unknown")
        if had_nan:
            notes.append(f"{p}: bare NaN in the entry's JSON read as null")
        docs.append((p, p, doc))
        digests[p] = digest
    args = {json.dumps({k: d["args"].get(k) for k in ("num_envs", "warmup_steps", "measure_steps", "replay_capacity_steps")})
            for _, _, d in docs}
    if len(args) > 1:
        raise UsageError(f"side {label!r} mixes pinned parameters across runs: {sorted(args)}")
    side = _side_from_entry_docs(label, label, docs)
    side.pins = json.loads(next(iter(args)))
    side.run_digests = digests
    side.notes += notes
    # runs on other hardware are kept apart per run, never pooled (mbaphases.comparable)
    side.run_hardware = {p: _entry_hardware(d) for p, _, d in docs}
    _read_suite_metas(side, paths, {p: d for p, _, d in docs})
    side.hardware = side.run_hardware[paths[0]]
    return side


def _read_suite_metas(side: Side, paths: list[str], doc_of: dict) -> None:
    """What the suite's meta file beside a raw run adds: its batch, its pair (and slot, and whether
    it took turns), the CPUs it had."""
    for p in paths:
        meta = Path(p).with_name(Path(p).name.removesuffix(".json") + ".meta.json")
        if not meta.is_file():
            continue
        doc = read_json_file(meta)
        side.run_hardware[p].update(run_cpus(doc.get("environment") or {}))
        _batch_and_pair(doc, p, side)
        if p in side.turns and _turns_without_end_wait(doc_of[p]):
            side.turns_without_end_wait.add(p)


def _batch_and_pair(meta: dict, run: str, into) -> None:
    """A run's batch and pair (its slot's first CPU, whether it took turns) from its meta, into ``into``
    (a side, or the raw runs being read: both keep them by run)."""
    if meta.get("batch"):
        into.batches[run] = meta["batch"]
    duet = meta.get("duet") or {}
    if duet.get("pair"):
        into.pairs[run] = duet["pair"]
        if duet.get("cpu") is not None:
            into.cpus[run] = int(duet["cpu"])
        if duet.get("role") is not None:
            into.roles[run] = int(duet["role"])
        if duet.get("share_cpu"):
            into.turns.add(run)


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
    full = None
    if repo is None and not all(ch in "0123456789abcdef" for ch in rev.lower()):
        raise UsageError(f"revision {rev!r} is not a SHA or SHA prefix, and with --results there is no repository "
                         "to resolve names in: pass a SHA, or --config with the target repository")
    if repo is not None and Path(repo).exists():
        p = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                           capture_output=True, text=True, check=False)
        if p.returncode == 0:
            full = p.stdout.strip()
    if repo is not None and full is None and not all(ch in "0123456789abcdef" for ch in rev.lower()):
        raise UsageError(f"revision {rev!r} does not resolve in {repo}")
    try:
        short = asv_results.get_result_hash_from_prefix(str(results_dir), machine, full or rev)
    except util.UserError as e:
        raise UsageError(f"revision {rev!r}: {e}") from None
    if short is None:
        raise UsageError(f"unknown revision {rev!r}: no results for it on machine {machine!r} in {results_dir}")
    for r in _asv_results(results_dir, machine, short):
        return r.commit_hash
    raise UsageError(f"unknown revision {rev!r}")


def _asv_results(results_dir: Path, machine: str, short: str) -> list:
    """asv's result files of one commit; an unreadable one is named on one line."""
    out = []
    for path in sorted((Path(results_dir) / machine).glob(f"{short}-*.json")):
        try:
            out.append(asv_results.Results.load(str(path), machine))
        except (util.UserError, ValueError, KeyError, TypeError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise UsageError(f"asv result file {path} cannot be read ({first})") from None
    return out


def _mirror_notes(raw: pd.DataFrame, stored: pd.DataFrame) -> list[str]:
    """Where asv's store holds fewer runs of a case than the raw runs (asv replaces a case's
    samples when a later run of it fails): said, since ``asv compare`` and ``asv publish`` see
    only the store."""
    if stored.empty:
        return []  # asv ran without --record-samples: it mirrors no runs at all

    def runs_per_case(values):
        return values[values.metric == "throughput"].groupby("case").run.nunique()

    have, kept = runs_per_case(raw), runs_per_case(stored)
    return [f"{case}: asv's store keeps {int(kept.get(case, 0))} of its {int(n)} raw runs (asv replaced its "
            f"samples after a later failed run); the values here are from the raw runs"
            for case, n in have.items() if kept.get(case, 0) < n]


def load_asv_side(label: str, rev: str, results_dir: Path, machine: str, repo: Path | None,
                  raw_dir: Path | None = None) -> Side:
    """A side from asv's store and the raw runs beside it. The raw runs are the record: where
    they exist every per-run value comes from them (with its run, batch and hardware); asv's
    samples, a mirror that asv rewrites when a later run of a case fails, are read only for a
    commit without raw runs (results taken by plain ``asv run``)."""
    results_dir = Path(results_dir)
    sha = resolve_revision(rev, results_dir, machine, repo)
    asv_rows, version = _asv_samples(label, sha, results_dir, machine)
    side = Side(label, sha, pd.DataFrame(columns=["run", "case", "metric", "value"]),
                pd.DataFrame(columns=["run", "case", "message"]))
    side.sources = [str(results_dir / machine)]
    side.pins = {"benchmark_version": version}
    raw = Path(raw_dir or results_dir.parent / "raw-runs") / machine / sha
    runs = _raw_runs(raw, side)
    side.failed = pd.DataFrame(runs.fails, columns=["run", "case", "message"])
    side.alignment = runs.alignment
    if runs.names:
        side.values = pd.DataFrame(runs.rows, columns=["run", "case", "metric", "value"])
        side.batches, side.pairs, side.cpus, side.run_hardware = runs.batches, runs.pairs, runs.cpus, runs.hardware
        side.roles = runs.roles
        side.turns, side.turns_without_end_wait = runs.turns, runs.turns_without_end_wait
        side.run_flags = {run: f for run, f in runs.flags.items() if f}
        side.notes += _mirror_notes(side.values, pd.DataFrame(asv_rows, columns=side.values.columns))
    else:
        # no raw runs (a plain asv run): asv's samples, whose runs' batch and hardware are unknown
        if not asv_rows:
            raise UsageError(f"side {label!r}: no collector samples and no raw runs for {sha[:8]} on {machine}")
        side.values = pd.DataFrame(asv_rows, columns=["run", "case", "metric", "value"])
        side.notes.append("per-run values from asv's samples: no raw runs beside them (batches unknown)")
    side.notes += [f"{run}: {note}" for run, f in runs.flags.items() for note in f]
    if runs.hardware:
        side.hardware = runs.hardware[runs.names[-1]]
    side.profiles = side_profiles(raw / "profile")
    return side


def _asv_samples(label: str, sha: str, results_dir: Path, machine: str) -> tuple[list[dict], str]:
    """asv's samples of one commit as rows (a mirror of the raw runs), and the benchmark version
    its result names (results/benchmarks.json only describes the newest discovery, which another
    profile's run may have written)."""
    found = _asv_results(results_dir, machine, sha[:8])
    if not found:
        raise UsageError(f"side {label!r}: no asv results for {sha[:8]} on {machine}")
    if len(found) > 1:
        raise UsageError(f"side {label!r}: {len(found)} environments have results for {sha[:8]}; keep one")
    res = found[0]
    res_path = results_dir / machine / f"{sha[:8]}-{res.env_name}.json"
    rows, versions = [], set()
    for track, (metric, convert) in ASV_TRACKS.items():
        key = f"{ASV_CLASS}.{track}"
        if key not in res.get_all_result_keys():
            continue
        versions.add(res.benchmark_version.get(key))
        params = res.get_result_params(key)
        for (case_repr,), samples in zip([(p,) for p in params[0]], res.get_result_samples(key, params)):
            case = case_repr.strip("'\"")
            for k, value in enumerate(samples or []):
                if value is None or (isinstance(value, float) and math.isnan(value)):
                    continue  # a failed run (throughput) or a metric the target does not report
                where = f"{track} sample {k + 1} of {case}"
                value = _number(value, str(res_path), where, positive=metric == "throughput")
                rows.append({"run": f"r{k + 1}", "case": case, "metric": metric, "value": convert(value)})
    if not versions:
        raise UsageError(f"side {label!r}: no collector results for {sha[:8]} on {machine}")
    if len(versions) > 1:
        raise UsageError(f"{sha[:8]}: mixed benchmark versions {sorted(map(str, versions))}")
    return rows, next(iter(versions))


@dataclass
class _RawRuns:
    """What a commit's raw runs (of the side's benchmark version) hold, run by run."""
    names: list[str] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)
    fails: list[dict] = field(default_factory=list)
    alignment: dict = field(default_factory=dict)
    hardware: dict = field(default_factory=dict)
    flags: dict = field(default_factory=dict)
    batches: dict = field(default_factory=dict)
    pairs: dict = field(default_factory=dict)
    cpus: dict = field(default_factory=dict)
    roles: dict = field(default_factory=dict)
    turns: set = field(default_factory=set)
    turns_without_end_wait: set = field(default_factory=set)


def _raw_runs(raw: Path, side: Side) -> _RawRuns:
    """The raw runs under ``raw`` of the side's benchmark version; the side's environment, pins,
    sources and notes follow the runs read."""
    out = _RawRuns()
    metas = sorted(raw.glob("run*.meta.json"), key=lambda m: int(m.name.split(".")[0].removeprefix("run")))
    for meta_path in metas:
        meta = read_json_file(meta_path)
        if meta.get("version") != side.pins["benchmark_version"]:
            continue  # a run under other pinned parameters: kept on disk, not mixed in
        run = f"run{meta['run']}"
        out.names.append(run)
        _batch_and_pair(meta, run, out)
        out.fails += [{"run": run, "case": c, "message": m} for c, m in meta.get("failed_cases", {}).items()]
        side.environment = meta.get("environment", side.environment)
        env = side.environment or {}
        out.hardware[run] = {"machine": meta.get("machine"), **{k: env[k] for k in HARDWARE_FIELDS if k in env},
                             **run_cpus(env)}
        side.pins = {"benchmark_version": meta["version"], **meta.get("profile", {})}
        out.flags[run] = run_flags(meta)
        raw_json = meta_path.with_name(f"run{meta['run']}.json")
        if raw_json.exists():
            rows, raw_doc = _raw_json_rows(raw_json, run, side, out.alignment)
            out.rows += rows
            if run in out.turns and _turns_without_end_wait(raw_doc):
                out.turns_without_end_wait.add(run)
        side.sources.append(str(meta_path))
    return out


def _turns_without_end_wait(doc: dict) -> bool:
    """Whether an entry's run took turns under the first protocol: a case that met its partner
    records no wait for the partner's loop to end (mbaphases/turns.py, ``Turns.end``)."""
    return any(isinstance(r, dict) and isinstance(r.get("turns"), dict) and r["turns"].get("partner_met")
               and "waited_partner_end_s" not in r["turns"] for r in doc.get("results") or [])


def _raw_json_rows(raw_json: Path, run: str, side: Side, alignment: dict) -> tuple[list[dict], dict]:
    """One raw entry JSON's values as rows, its alignment keys merged in, and the JSON itself; the
    side's notes say what was read specially (bare NaN as null, config fixes the entry applied)."""
    raw_doc, had_nan = _entry_json(read_text(raw_json, "raw run"), raw_json)
    if had_nan and not any("bare NaN" in n for n in side.notes):
        side.notes.append(f"{raw_json}: bare NaN in the entry's JSON read as null (the field writes them)")
    for fix in (raw_doc.get("provenance") or {}).get("config_fixes") or []:
        note = (f"config fix {fix['name']} applied to {fix['case']} (releases {fix['releases']}): "
                f"{' '.join(fix['overrides'])}; {fix['reason']}")
        if note not in side.notes:
            side.notes.append(note)
    values, _, a = entry_run_values(raw_doc, str(raw_json))
    _merge_alignment(alignment, a, str(raw_json))
    return [{"run": run, "case": c, "metric": m, "value": x} for c, v in values.items() for m, x in v.items()], raw_doc


def batch_records(raw_dir: Path, machine: str = "*") -> list[dict]:
    """The batch records of ``machine`` (or of every machine) under ``raw_dir``, oldest first by
    start; one that cannot be read names no pins, config or speed and is left out."""
    found = []
    for path in Path(raw_dir).glob(f"{machine}/batches/*.json"):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        found.append((record.get("started", 0), path.name, record))
    return [record for *_, record in sorted(found, key=lambda x: x[:2])]


def run_meta(raw_dir: Path, machine: str, since: float, out=None) -> list[dict]:
    """The machine's run metas since ``since`` (``machine`` may be a glob pattern: a fleet's hardware
    classes); one that cannot be read (a crash of an older writer, a full disk) is named on ``out``
    and left out, never the end of the batch."""
    metas = []
    for p in sorted(Path(raw_dir).glob(f"{machine}/*/run*.meta.json")):
        try:
            meta = json.loads(p.read_text())
        except (OSError, ValueError) as e:
            if out is not None:
                print(f"unreadable run record {p} ({type(e).__name__}): left out", file=out)
            continue
        if meta.get("started", 0) >= since:
            meta["path"] = str(p)
            metas.append(meta)
    return metas
