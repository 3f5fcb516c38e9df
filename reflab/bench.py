"""The off-policy collector benchmark entry, with the field's CLI and JSON/CSV.

    python -m reflab.bench --cases default --all --num-envs 256 \
        --out-json results.json --out-csv results.csv

Differences from the field's entry, all additive: strict JSON (null, not NaN),
and per case the resolved config with its hash; per file the seed, the torch
thread count, package versions, host and git state (``provenance``).
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import runpy
import sys
from datetime import datetime, timezone
from pathlib import Path

from reflab import CONF_DIR
from reflab.sim import BACKENDS, canonical_backend

BENCHMARK = "offpolicy_collector_active"
TURNS_MODULE_ENV = "MBAPHASES_TURNS_MODULE"  # set by the suite's harness for a duet on one CPU
DEFINITION = (
    "Collector active window: per recorded vector step, env_step (physics, observations, rewards, "
    "terminations, auto-reset with terminal observations) + replay (observation casting, terminal "
    "observations, replay add) + bookkeeping (episode returns/lengths, reward-term logs); setup, "
    "replay allocation and one priming step excluded; actions pre-generated. "
    "collector_active_steps_per_sec = num_envs * measure_steps / (total_active_ms / 1000)."
)
DEFINITION_WITH_ACTION_SELECT = DEFINITION.replace(
    "+ bookkeeping (episode returns/lengths, reward-term logs)",
    "+ bookkeeping (episode returns/lengths, reward-term logs) + action_select (the step's actions taken "
    "from the policy output into the env's buffer)")


def active_phases() -> tuple[str, ...]:
    from reflab import ACTIVE_WINDOW

    base = ("env_step_ms", "replay_ms", "bookkeeping_ms")
    return base + ("action_select_ms",) if ACTIVE_WINDOW == "with-action-select" else base


def definition() -> str:
    from reflab import ACTIVE_WINDOW

    return DEFINITION_WITH_ACTION_SELECT if ACTIVE_WINDOW == "with-action-select" else DEFINITION
SEED_CASES = (
    "flashsac/go2_joystick_flat/mujoco",
    "flashsac/g1_walk_flat/mujoco",
    "flashsac/g1_walk_flat/motrix",
    "sac/g1_walk_flat/mujoco",
    "sac/g1_walk_flat/motrix",
    "sac/g1_motion_tracking/mujoco",
    "sac/g1_motion_tracking/motrix",
)
DEFAULT_OUT_JSON = "scripts/benchmark/outputs/offpolicy_collector_active/results.json"
ENV_PHASES = ("env_step_total_ms", "apply_action_ms", "step_core_ms", "update_state_ms",
              "reset_done_ms", "env_step_internal_gap_ms", "reset_done_count")
CSV_SUBTIMINGS = {"np_env_apply_action_ms": "apply_action_ms", "np_env_step_core_ms": "step_core_ms",
                  "np_env_update_state_ms": "update_state_ms", "np_env_reset_done_ms": "reset_done_ms",
                  "np_env_internal_gap_ms": "env_step_internal_gap_ms"}


class UsageError(Exception):
    """Bad input: reported on one line with exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="benchmark_offpolicy_collector_active", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", default="default",
                   help="default (the seven seed cases on the chosen backends), auto (every "
                        "conf/<algo>/task/*/<sim>.yaml), or a comma list of <algo>/<task>/<sim>")
    p.add_argument("--algos", default="sac,flashsac", help="algos for --cases auto")
    p.add_argument("--backend", default="motrix", help="mujoco or motrix (alias motrixsim)")
    p.add_argument("--all", action="store_true", help="both backends")
    p.add_argument("--num-envs", type=int, default=8192)
    p.add_argument("--warmup-steps", type=int, default=10)
    p.add_argument("--measure-steps", type=int, default=100)
    p.add_argument("--replay-capacity-steps", type=int, default=64)
    p.add_argument("--override", action="append", default=[], help="extra Hydra override, repeatable")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-json", default=DEFAULT_OUT_JSON)
    p.add_argument("--out-csv", default=None)
    p.add_argument("--continue-on-error", action="store_true")
    return p


def available_cases() -> list[str]:
    return sorted(f"{p.parts[-4]}/{p.parts[-2]}/{p.stem}"
                  for p in CONF_DIR.glob("*/task/*/*.yaml") if not p.parts[-4].startswith("_"))


def resolve_cases(args) -> list[str]:
    backend = canonical_backend(args.backend)
    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {args.backend!r}; valid: mujoco, motrix (alias motrixsim)")
    sims = BACKENDS if args.all else (backend,)
    known = available_cases()
    if args.cases == "default":
        return [c for c in SEED_CASES if c.split("/")[2] in sims]
    if args.cases == "auto":
        algos = [a.strip() for a in args.algos.split(",") if a.strip()]
        known_algos = sorted({c.split("/")[0] for c in known})
        bad = [a for a in algos if a not in known_algos]
        if bad:
            raise UsageError(f"unknown algo {bad[0]!r}; valid: {', '.join(known_algos)}")
        return [c for c in known if c.split("/")[0] in algos and c.split("/")[2] in sims]
    cases = []
    for raw in args.cases.split(","):
        case = raw.strip()
        parts = case.split("/")
        if len(parts) == 3:
            parts[2] = canonical_backend(parts[2])
            case = "/".join(parts)
        if case not in known:
            raise UsageError(f"unknown case {raw.strip()!r}; valid: default, auto, or a comma list of: {', '.join(known)}")
        cases.append(case)
    return cases


# lower bounds of overridable sizes: below them the run is meaningless, not a failed case
MINIMUM = {"algo.num_envs": 1, "task.decimation": 1, "sim.nthread": 1, "seed": 0}


def _compose(case: str, overrides: list[str]):
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    algo, task, sim = case.split("/")
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            return compose(config_name=f"{algo}/task/{task}/{sim}", overrides=overrides)
    except (HydraException, OmegaConfBaseException) as e:
        first = str(e).splitlines()[0]
        raise UsageError(f"case {case}: bad override ({first}); given: {' '.join(overrides) or 'none'}") from None


def _check_override(case: str, override: str, cfg, defaults) -> None:
    """An override may only set an existing key to a value of its type, finite and in range."""
    from omegaconf import OmegaConf

    key, _, _ = override.partition("=")
    if key.startswith(("+", "~")):
        raise UsageError(f"case {case}: --override {override}: adding or deleting keys is not supported; "
                         "override existing keys only")
    default = OmegaConf.select(defaults, key, throw_on_missing=False)
    value = OmegaConf.select(cfg, key, throw_on_missing=False)
    if OmegaConf.is_config(value):
        return
    kinds = {bool: (bool,), int: (int,), float: (int, float)}
    want = kinds.get(type(default))
    if want and (isinstance(value, bool) is not (type(default) is bool) or not isinstance(value, want)):
        raise UsageError(f"case {case}: --override {override}: {key} must be {type(default).__name__} "
                         f"(default {default!r}), got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise UsageError(f"case {case}: --override {override}: {key} must be finite, got {value!r}")
    if key in MINIMUM and isinstance(value, int) and value < MINIMUM[key]:
        raise UsageError(f"case {case}: --override {override}: {key} must be >= {MINIMUM[key]}")


def compose_case(case: str, num_envs: int, overrides: list[str], seed: int, strict: bool = True):
    """The case's resolved config. ``strict``: overrides come from the command line and may
    only set existing keys to values of their type (tests that stand for hand-edited YAML
    pass False, to reach the managers' own construction-time checks)."""
    from omegaconf import OmegaConf

    from reflab.envs import RUNTIMES, runtime_of

    base = [f"algo.num_envs={num_envs}", f"seed={seed}"]
    cfg = _compose(case, [*base, *overrides])
    if overrides and strict:
        defaults = _compose(case, base)
        for o in overrides:
            _check_override(case, o, cfg, defaults)
    if cfg.sim.nthread is None:
        cfg.sim.nthread = os.cpu_count() or 1
    if runtime_of(cfg) not in RUNTIMES:
        raise UsageError(f"case {case}: unknown runtime {runtime_of(cfg)!r}; valid: {', '.join(RUNTIMES)}")
    if int(cfg.algo.num_envs) <= 0:
        raise UsageError(f"case {case}: algo.num_envs={cfg.algo.num_envs} must be > 0")
    OmegaConf.resolve(cfg)
    return cfg


def _finite(x):
    """Strict JSON: NaN and inf become null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def case_result(case, cfg, env, samples, cpu_pct, collector, warmup, measure, replay_steps, command):
    from omegaconf import OmegaConf

    from reflab.envs import runtime_of

    from reflab.collector import timing_stats
    from reflab.provenance import config_hash

    algo, task, sim = case.split("/")
    ms = samples.ms
    phases = active_phases()
    runtime = runtime_of(cfg)
    total_active_ms = float(sum(ms[k].sum() for k in phases))
    n = env.num_envs
    resolved = OmegaConf.to_container(cfg, resolve=True)
    overhead = ms["env_step_ms"] - ms["physics_ms"]
    return {
        "case": {
            "algo": algo, "task": task, "sim": sim, "variant": runtime,
            "runtime_sim_backend": env.backend.name, "command": command,
            "training_task_name": task, "num_envs": n,
            "replay_capacity_rows": n * replay_steps, "replay_capacity_steps": replay_steps,
            "obs_dim": env.obs_dim, "critic_dim": env.critic_dim, "action_dim": env.action_dim,
            "env_steps_per_sync": 1, "runtime": runtime,
            "config_hash": config_hash(resolved), "resolved_config": resolved,
        },
        "warmup_steps": warmup,
        "measure_steps": measure,
        "total_active_ms": total_active_ms,
        "collector_active_steps_per_sec": n * measure / (total_active_ms / 1000.0),
        "phase_ms_per_vector_step": {k: timing_stats(ms[k]) for k in phases},
        "phase_pct": {k: 100.0 * float(ms[k].sum()) / total_active_ms for k in phases},
        "env_step_timing_ms_per_vector_step": {k: timing_stats(ms[k]) for k in ENV_PHASES},
        "physics_ms_per_vector_step": timing_stats(ms["physics_ms"]),
        "env_step_overhead_ms_per_vector_step": timing_stats(overhead),
        "cpu_util_pct": cpu_pct,
        # sharing the CPU with a duet partner: the turns taken (None: the loop ran alone)
        "turns": collector.turns_record,
        "diverged_env_resets": env.backend.diverged_count,
        "completed_episodes": collector.completed_episodes,
        "notes": [f"runtime={runtime}", f"physics threads={cfg.sim.nthread}",
                  "physics_ms is the engine's own step call; step_core_ms adds reading the state"],
    }


def csv_row(r: dict) -> dict:
    c, ph, es = r["case"], r["phase_ms_per_vector_step"], r["env_step_timing_ms_per_vector_step"]
    row = {k: c[k] for k in ("algo", "task", "sim", "variant", "runtime_sim_backend", "training_task_name", "num_envs")}
    row.update(warmup_steps=r["warmup_steps"], measure_steps=r["measure_steps"],
               collector_active_steps_per_sec=r["collector_active_steps_per_sec"],
               total_active_ms=r["total_active_ms"])
    row.update({k: ph[k]["mean_ms"] for k in ph})
    row["env_step_total_ms"] = es["env_step_total_ms"]["mean_ms"]
    row["physics_ms"] = r["physics_ms_per_vector_step"]["mean_ms"]
    row["env_step_overhead_ms"] = r["env_step_overhead_ms_per_vector_step"]["mean_ms"]
    row["reset_done_count"] = es["reset_done_count"]["mean_ms"]
    row.update({col: es[key]["mean_ms"] for col, key in CSV_SUBTIMINGS.items()})
    row.update({f"{k.removesuffix('_ms')}_pct": v for k, v in r["phase_pct"].items()})
    return row


def print_table(results: list[dict], errors: list[dict]) -> None:
    cols = ("steps/s", "env_step", "physics", "step_core", "update_state", "reset_done", "replay", "bookkeep")
    print(f"{'case':<36}{'runtime':>8}" + "".join(f"{c:>13}" for c in cols))
    for r in results:
        es = r["env_step_timing_ms_per_vector_step"]
        ph = r["phase_ms_per_vector_step"]
        vals = (f"{r['collector_active_steps_per_sec']:,.0f}", *(f"{v:.2f}" for v in (
            ph["env_step_ms"]["mean_ms"], r["physics_ms_per_vector_step"]["mean_ms"],
            es["step_core_ms"]["mean_ms"], es["update_state_ms"]["mean_ms"], es["reset_done_ms"]["mean_ms"],
            ph["replay_ms"]["mean_ms"], ph["bookkeeping_ms"]["mean_ms"])))
        c = r["case"]
        print(f"{c['algo'] + '/' + c['task'] + '/' + c['sim']:<36}{c['runtime']:>8}" + "".join(f"{v:>13}" for v in vals))
    for e in errors:
        print(f"FAILED {e['case']}: {e['type']}: {e['message']}")


def _check_output(path: str, flag: str) -> None:
    """Make the output's folder and prove a file can be written there (removed again)."""
    import tempfile

    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{flag} {path} is a directory; give a file path")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=p.parent, prefix=".write-check-"):
            pass
        if p.exists() and not os.access(p, os.W_OK):
            raise PermissionError(path)
    except OSError:
        raise UsageError(f"{flag} {path} is not writable") from None


def _write_or_keep(path: str, text: str) -> None:
    """Write an output; if that fails after measuring, keep the text in a file it names."""
    import tempfile

    try:
        Path(path).write_text(text)
    except OSError as e:
        keep = Path(tempfile.mkstemp(prefix="reflab-bench-", suffix=Path(path).suffix)[1])
        keep.write_text(text)
        raise UsageError(f"cannot write {path} ({e.strerror}); the results are kept in {keep}") from None


def turns_from_env():
    """The suite's turn protocol where a duet partner shares this CPU: the harness names the file
    (standard library only) so that this environment needs nothing of the suite."""
    path = os.environ.get(TURNS_MODULE_ENV)
    return runpy.run_path(path)["from_env"]() if path else None


def run(argv=None) -> int:
    args = build_parser().parse_args(argv)
    for name in ("num_envs", "measure_steps", "replay_capacity_steps"):
        if getattr(args, name) <= 0:
            raise UsageError(f"--{name.replace('_', '-')}={getattr(args, name)} must be > 0")
    if args.warmup_steps < 0:
        raise UsageError(f"--warmup-steps={args.warmup_steps} must be >= 0")
    if args.seed < 0:
        raise UsageError(f"--seed={args.seed} must be >= 0")
    # where the results go is checked before anything is measured
    _check_output(args.out_json, "--out-json")
    if args.out_csv:
        _check_output(args.out_csv, "--out-csv")
    from reflab.collector import collector_torch_threads

    try:
        threads = collector_torch_threads()
    except ValueError as e:
        raise UsageError(str(e)) from None
    cases = resolve_cases(args)
    if not cases:
        raise UsageError(f"no case matches --cases {args.cases} --algos {args.algos} --backend {args.backend}")
    configs = {c: compose_case(c, args.num_envs, args.override, args.seed) for c in cases}

    import torch

    from reflab import provenance
    from reflab.envs import runtime_of
    from reflab.collector import run_collector

    torch.set_num_threads(threads)
    turns = turns_from_env()
    results, errors = [], []
    for case, cfg in configs.items():
        command = (f"python -m reflab.bench --cases {case} --num-envs {args.num_envs} --warmup-steps "
                   f"{args.warmup_steps} --measure-steps {args.measure_steps} --replay-capacity-steps "
                   f"{args.replay_capacity_steps} --seed {args.seed}"
                   + "".join(f" --override {o}" for o in args.override))
        print(f"[{len(results) + len(errors) + 1}/{len(cases)}] {case} ({runtime_of(cfg)}, {args.num_envs} envs)",
              file=sys.stderr, flush=True)
        try:
            env, samples, cpu_pct, collector = run_collector(cfg, args.warmup_steps, args.measure_steps,
                                                             args.replay_capacity_steps, turns,
                                                             len(results) + len(errors))
        except Exception as e:  # a failing case is reported, never dropped
            if not args.continue_on_error:
                print(f"error: case {case} failed: {type(e).__name__}: {e}", file=sys.stderr)
                return 1
            errors.append({"case": case, "type": type(e).__name__, "message": str(e)})
            continue
        results.append(case_result(case, cfg, env, samples, cpu_pct, collector, args.warmup_steps,
                                   args.measure_steps, args.replay_capacity_steps, command))

    doc = {
        "created_at": datetime.now(timezone.utc).isoformat(),
        "benchmark": BENCHMARK,
        "definition": definition(),
        "device": {"type": "cpu", "torch_threads": str(threads)},
        "args": {"cases": args.cases, "algos": args.algos, "backend": args.backend,
                 "all_backends": args.all, "num_envs": args.num_envs, "warmup_steps": args.warmup_steps,
                 "measure_steps": args.measure_steps, "replay_capacity_steps": args.replay_capacity_steps,
                 "override": args.override, "seed": args.seed, "out_json": args.out_json,
                 "out_csv": args.out_csv, "continue_on_error": args.continue_on_error,
                 "resolved_cases": cases},
        "results": results,
        "errors": errors,
        "provenance": {"seed": args.seed, "torch_threads": threads, "versions": provenance.package_versions(),
                       "host": provenance.host(), "thread_env": provenance.thread_env(),
                       "git": provenance.git_state(Path.cwd()),
                       # sharing the CPU with a duet partner in turns (None: the CPUs it had were its own)
                       "turns": None if turns is None else {"role": turns.role, "turn_ms": turns.turn_s * 1000.0}},
    }
    _write_or_keep(args.out_json, json.dumps(_finite(doc), indent=2, allow_nan=False) + "\n")
    if args.out_csv:
        rows = [csv_row(r) for r in results]
        buf = io.StringIO(newline="")
        if rows:
            w = csv.DictWriter(buf, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        _write_or_keep(args.out_csv, buf.getvalue())
    print_table(results, errors)
    return 1 if errors else 0


def main(argv=None) -> int:
    try:
        return run(argv)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted; no JSON written", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - 0/1 are the run's outcome; an internal error is 3
        import tempfile
        import traceback

        log = Path(tempfile.gettempdir()) / f"reflab-bench-error-{os.getpid()}.log"
        log.write_text(traceback.format_exc())
        print(f"error: internal error {type(e).__name__}: {e} (traceback in {log})", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
