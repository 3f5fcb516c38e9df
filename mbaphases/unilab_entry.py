"""The suite's off-policy collector entry for the field's framework (UniLab), for sides whose
code has no entry of its own: the published releases and the public repository.

    python scripts/benchmark/rl/benchmark_offpolicy_collector_active.py \
        --cases sac/g1_walk_flat/mujoco --num-envs 16 --out-json r.json --out-csv r.csv

It is copied into every side's commit of the generated pin repository (mbaphases.published),
so a side's commit names the entry that measured it. It imports only what the side's
environment holds (the framework, torch, NumPy, Hydra): nothing of the suite.

CLI, JSON and CSV are the field entry's contract (mbaphases/entry_schema.json), plus strict JSON,
the resolved config with its hash, and provenance (seed, threads, versions, config fixes). What a
run measures is the field entry's active window, built from the framework's own parts: its Hydra
owner configs, its config adapter and registry to make the env, its training seed, pre-generated
actions, its terminal-observation contract and replay buffer for the writes, and the env's own
timing (``state.info["timing"]``) for physics, step_core, update_state and reset_done.

What differs between the framework's eras lives in ``ERAS`` (where each part is imported from,
how actions are passed, where the configs are); published configs that do not run as shipped are
fixed by named overrides in ``CONFIG_FIXES`` (release range, case, reason), applied visibly.
"""
from __future__ import annotations

import argparse
import atexit
import csv
import hashlib
import importlib
import importlib.util
import inspect
import io
import json
import math
import os
import platform
import runpy
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from statistics import mean, median, pstdev

BENCHMARK = "offpolicy_collector_active"
DEFINITION = (
    "Collector active window: per recorded vector step, env_step (physics, observations, rewards, "
    "terminations, auto-reset with terminal observations) + replay (observation casting, terminal "
    "observations, replay add) + bookkeeping (episode returns/lengths, reward-term logs); setup, "
    "replay allocation and one priming step excluded; actions pre-generated. "
    "collector_active_steps_per_sec = num_envs * measure_steps / (total_active_ms / 1000)."
)
ACTIVE_PHASES = ("env_step_ms", "replay_ms", "bookkeeping_ms")
SEED_CASES = (
    "flashsac/go2_joystick_flat/mujoco",
    "flashsac/g1_walk_flat/mujoco",
    "flashsac/g1_walk_flat/motrix",
    "sac/g1_walk_flat/mujoco",
    "sac/g1_walk_flat/motrix",
    "sac/g1_motion_tracking/mujoco",
    "sac/g1_motion_tracking/motrix",
)
ALGOS = ("sac", "flashsac", "td3")
BACKENDS = ("mujoco", "motrix")
BACKEND_ALIASES = {"motrixsim": "motrix"}
# the env's own timing keys (state.info["timing"]), recorded where the env reports them
ENV_TIMING_KEYS = ("env_step_total_ms", "apply_action_ms", "step_core_ms", "update_state_ms", "reset_done_ms")
CSV_SUBTIMINGS = {"np_env_step_core_ms": "step_core_ms", "np_env_update_state_ms": "update_state_ms",
                  "np_env_reset_done_ms": "reset_done_ms", "np_env_apply_action_ms": "apply_action_ms",
                  "np_env_step_total_ms": "env_step_total_ms"}
VERSIONS = ("unilab", "unisim-core", "mjbatch-uni", "mujoco", "mujoco-uni", "motrixsim-core", "torch", "numpy",
            "hydra-core", "omegaconf")
DEFAULT_THREADS = 8
THREADS_ENV = "UNILAB_COLLECTOR_TORCH_THREADS"


class UsageError(Exception):
    pass


@dataclass(frozen=True)
class Era:
    """One era of the framework: where its parts are and how its env takes actions."""
    name: str
    detect: tuple[str, ...]  # modules this era has, all of them (the first: the env's own module)
    actions: str  # "torch" or "numpy"
    parts: dict = field(default_factory=dict)  # part -> "module:attribute", first importable wins


# The framework's own parts (env creation, config adapter, seeding), the same modules in every era
# (attribute names moved inside them)
_FRAMEWORK_PARTS = {
    "ensure_registries": ("unilab.training:ensure_registries", "unilab.base.registry:ensure_registries",
                          "unilab.training.common:ensure_registries"),
    "seed": ("unilab.training.seed:apply_training_seed", "unilab.utils.seed:apply_training_seed"),
    "config_adapter": ("unilab.base.config_adapter:EnvConfigAdapter", "unilab.base.config_adapter:BackendAdapter",
                       "unilab.training.backend_adapter:BackendAdapter"),
    "create_env": ("unilab.base.config_adapter:create_env", "unilab.training.common:create_env"),
}
# The off-policy parts (observation split, replay buffer, timeout mask) moved between packages:
# read off each era's installed packages (docs/releases.md)
_UNILAB_RL_PARTS = {
    "split_obs": ("unilab.rl.contracts.observations:split_obs_dict",),
    "obs_dims": ("unilab.rl.contracts.observations:get_obs_dims",),
    "replay_buffer": ("unilab.rl.runtime.ipc.replay_buffer:ReplayBuffer",),
    "timeout_mask": ("unilab.rl.runtime.offpolicy.worker:timeout_bootstrap_mask",),
}
# the separate distribution unilab-rl (package uni_rl): a hard dependency of 0.1.0-1.3.1, the
# uni-rl extra of 1.3.2-1.3.5; it has no timeout mask of its own (the collector's default is used)
_UNI_RL_PARTS = {
    "split_obs": ("uni_rl.utils.observations:split_obs_dict",),
    "obs_dims": ("uni_rl.utils.observations:get_obs_dims",),
    "replay_buffer": ("uni_rl.ipc.replay_buffer:ReplayBuffer",),
    "timeout_mask": (),
}
# the public repository (read at its last commit, 9aa57115): observations beside the NumPy env, the
# replay buffer in unilab.ipc, no timeout mask of its own
_REPOSITORY_PARTS = {
    "split_obs": ("unilab.base.observations:split_obs_dict",),
    "obs_dims": ("unilab.base.observations:get_obs_dims",),
    "replay_buffer": ("unilab.ipc.replay_buffer:ReplayBuffer",),
    "timeout_mask": (),
}
# where a module an era needs comes from, when it is not the framework's own wheel
MODULE_SOURCES = {"uni_rl": "the distribution unilab-rl: a dependency of 0.1.0-1.3.1, the uni-rl extra of 1.3.2-1.3.5"}
# newest first; the first whose modules all exist is the installed framework's era
ERAS = (
    Era("torch env, off-policy parts in unilab.rl (1.4.0 and later)", ("unilab.base.torch_env", "unilab.rl.contracts"),
        "torch", {**_FRAMEWORK_PARTS, **_UNILAB_RL_PARTS}),
    Era("torch env, off-policy parts in uni_rl (1.3.4 and 1.3.5, their uni-rl extra)", ("unilab.base.torch_env", "uni_rl"),
        "torch", {**_FRAMEWORK_PARTS, **_UNI_RL_PARTS}),
    Era("NumPy env, off-policy parts in uni_rl (releases 0.1.0 to 1.3.3)", ("unilab.base.np_env", "uni_rl"),
        "numpy", {**_FRAMEWORK_PARTS, **_UNI_RL_PARTS}),
    Era("NumPy env (the public repository)", ("unilab.base.np_env", "unilab.base.observations"),
        "numpy", {**_FRAMEWORK_PARTS, **_REPOSITORY_PARTS}),
)


@dataclass(frozen=True)
class ConfigFix:
    """A published config that does not run as shipped, and the override that makes it run."""
    name: str
    first: str  # first and last release it applies to
    last: str
    case: str
    overrides: tuple[str, ...]
    reason: str
    applies: str  # the config key whose shipped value is the bug: the fix applies only where it is present


CONFIG_FIXES = (
    ConfigFix("motion-tracking-motrix-task-name", "1.3.4", "1.5.2", "sac/g1_motion_tracking/motrix",
              ("training.task_name=G1MotionTracking",),
              "the shipped config names task G1MotionTrackingSAC, which is no longer registered",
              "training.task_name=G1MotionTrackingSAC"),
    ConfigFix("go2-flashsac-mujoco-reward-std", "1.3.5", "1.5.2", "flashsac/go2_joystick_flat/mujoco",
              ("~reward.tracking_lin_vel.params.std", "~reward.tracking_ang_vel.params.std"),
              "the shipped config passes std to the track_lin_vel / track_ang_vel reward terms, which reject it "
              "(TypeError); their tracking_sigma stays as configured",
              "reward.tracking_lin_vel.params.std"),
)


def _version_key(v: str) -> tuple:
    out = []
    for part in v.split("+")[0].split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _has(module: str) -> bool:
    """Whether the module is installed; an ImportError of its package is the side's own, raised."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError as e:
        if e.name and (module == e.name or module.startswith(e.name + ".")):
            return False  # a parent package is absent: so is the module
        raise


def installed_era() -> Era:
    broken, partial = [], []
    for era in ERAS:
        try:
            missing = [m for m in era.detect if not _has(m)]
        except ImportError as e:
            # the module is there but its package does not import (e.g. a physics layer too new for
            # the release): that error is the side's, say it
            broken.append(f"{type(e).__name__}: {e}")
            continue
        if not missing:
            return era
        if era.detect[0] not in missing:  # the era's env is there, a package beside it is not
            partial.append(f"{era.name} without " + ", ".join(
                m + (f" ({MODULE_SOURCES[m]})" if m in MODULE_SOURCES else "") for m in missing))
    if broken:
        raise RuntimeError("the installed framework does not import: " + broken[0])
    if partial:
        # e.g. 1.3.5 installed without its uni-rl extra: the release's packaging, named
        raise RuntimeError("the installed framework lacks a package of its era: " + "; ".join(partial))
    detects = sorted({m for e in ERAS for m in e.detect})
    raise RuntimeError(f"the installed framework matches no known era (looked for {', '.join(detects)})")


def part(era: Era, name: str):
    tried = []
    for spec in era.parts[name]:
        module, attr = spec.split(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            tried.append(spec)
    raise RuntimeError(f"the framework ({era.name}) has no {name}: tried {', '.join(tried)}")


def config_root() -> Path:
    """The Hydra owner configs: inside the package (releases), else the repository's conf/offpolicy
    beside the installed sources (the public repository, installed from its checkout)."""
    import unilab

    pkg = Path(unilab.__file__).resolve().parent
    for root in (pkg / "conf", pkg.parents[1] / "conf" / "offpolicy"):
        if root.is_dir():
            return root
    raise RuntimeError(f"no Hydra owner configs found beside {pkg} (tried conf/ in the package and "
                       f"conf/offpolicy/ in its repository)")


def owner_config(root: Path, algo: str, task: str, sim: str) -> tuple[Path, str, str]:
    """(config dir, config name, task override) for one case, in the release layout
    (conf/<algo>/task/<task>/<sim>.yaml) or the repository's (conf/offpolicy/task/<algo>/<task>/<sim>.yaml)."""
    if (root / algo / "task" / task / f"{sim}.yaml").is_file():
        return root / algo, "config", f"task={task}/{sim}"
    if (root / "task" / algo / task / f"{sim}.yaml").is_file():
        return root, "config", f"task={algo}/{task}/{sim}"
    # a case this version of the framework does not have: the side's own failure, reported per case
    raise LookupError(f"this version of the framework has no owner config for {algo}/{task}/{sim} under {root}")


def fixes_for(case: str, version: str | None, cfg) -> list[ConfigFix]:
    from omegaconf import OmegaConf

    if version is None:
        return []
    out = []
    for fix in CONFIG_FIXES:
        if fix.case != case or not (_version_key(fix.first) <= _version_key(version) <= _version_key(fix.last)):
            continue
        key, _, value = fix.applies.partition("=")
        shipped = OmegaConf.select(cfg, key, default=None)
        if shipped is not None and (not value or str(shipped) == value):
            out.append(fix)
    return out


def compose(case: str, num_envs: int, overrides: list[str], version: str | None):
    """The case's composed config and the config fixes applied to it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    algo, task, sim = case.split("/")
    conf_dir, name, task_override = owner_config(config_root(), algo, task, sim)
    base = [task_override, f"algo.num_envs={num_envs}", *overrides]

    def _compose(extra):
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            return hydra_compose(config_name=name, overrides=base + extra)

    cfg = _compose([])
    fixes = fixes_for(case, version, cfg)
    if fixes:
        cfg = _compose([o for f in fixes for o in f.overrides])
    return cfg, fixes


def timing_stats(samples: list[float]) -> dict:
    return {"samples_ms": samples, "mean_ms": mean(samples), "median_ms": median(samples),
            "std_ms": pstdev(samples) if len(samples) > 1 else 0.0, "min_ms": min(samples), "max_ms": max(samples)}


def _cpu_times() -> tuple[float, float] | None:
    try:
        vals = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    return float(sum(vals) - idle), float(sum(vals))


def _timing(info) -> dict:
    t = info.get("timing") if isinstance(info, dict) else None
    return t if isinstance(t, dict) else {}


def _as_tensor(x):
    import numpy as np
    import torch

    if isinstance(x, torch.Tensor):
        return x
    return torch.from_numpy(np.ascontiguousarray(x))


def make_env(era: Era, cfg, algo: str, seed: int):
    """The env as the framework's training entry makes it: registries, seed, adapter, registry factory."""
    part(era, "ensure_registries")()
    part(era, "seed")(seed, torch_runtime=True, cuda=False)
    adapter = part(era, "config_adapter")(cfg, root_dir=Path.cwd(), algo_name=algo)
    env_override = adapter.build_task_env_cfg_override()
    env = part(era, "create_env")(cfg, num_envs=int(cfg.algo.num_envs), env_cfg_override=env_override)
    if getattr(env, "state", None) is None and hasattr(env, "init_state"):
        env.init_state()
    return env


# Sharing one CPU with a partner entry (mbaphases run --duet-share-cpu): the harness names the
# suite's turn protocol (mbaphases/turns.py, standard library only) by its path, so the side's
# environment needs nothing of the suite; without it the loop runs alone.
TURNS_MODULE_ENV = "MBAPHASES_TURNS_MODULE"


def turns_from_env():
    path = os.environ.get(TURNS_MODULE_ENV)
    return runpy.run_path(path)["from_env"]() if path else None


def run_case(era: Era, env, num_envs: int, warmup: int, measure: int, replay_steps: int, seed: int,
             turns=None, case_index: int = 0) -> dict:
    """The active window over ``warmup + measure`` vector steps, with pre-generated actions."""
    import numpy as np
    import torch

    obs_dim, critic_dim = part(era, "obs_dims")(env.obs_groups_spec)
    action_dim = int(env.action_space.shape[0])
    split_obs = part(era, "split_obs")
    try:
        timeout_mask = part(era, "timeout_mask")
    except RuntimeError:
        def timeout_mask(terminated, truncated):
            return (truncated & ~terminated).to(dtype=torch.float32)
    buffer_cls = part(era, "replay_buffer")
    wanted = {"capacity": num_envs * replay_steps, "obs_dim": int(obs_dim), "action_dim": action_dim,
              "critic_dim": int(critic_dim), "device": "cpu", "ingress_slot_rows": num_envs}
    # the ingress slot (a commit per vector step) came with the torch env; older buffers write directly
    accepted = inspect.signature(buffer_cls.__init__).parameters
    replay = buffer_cls(**{k: v for k, v in wanted.items() if k in accepted})
    total = warmup + measure
    # pre-generated: policy inference is the learner's, not the collector's
    rng = np.random.default_rng(seed)
    actions_np = rng.uniform(-1.0, 1.0, size=(total + 1, num_envs, action_dim)).astype(np.float32)
    actions = [a if era.actions == "numpy" else torch.from_numpy(a) for a in actions_np]
    turn_record = None
    if turns is not None:
        turns.begin(case_index)
    try:
        samples, cpu_pct, completed, threads = collect(env, actions, replay, split_obs, timeout_mask, warmup, num_envs,
                                                       turns)
    finally:
        if turns is not None:
            turn_record = turns.end()
    if hasattr(replay, "close"):
        replay.close()
    # the field's two runtimes: a manager-based env class, or a hand-written (direct) one
    manager_based = any("ManagerBased" in k.__name__ for k in type(env).__mro__)
    return {"samples": samples, "cpu_pct": cpu_pct, "runtime": "mba" if manager_based else "direct",
            "obs_dim": int(obs_dim), "critic_dim": int(critic_dim),
            "action_dim": action_dim, "completed_episodes": completed, "process_threads": threads,
            "turns": turn_record}


def collect(env, actions: list, replay, split_obs, timeout_mask, warmup: int, num_envs: int, turns=None):
    """The collector's loop: a priming step, then ``len(actions) - 1`` vector steps, the last
    ``len(actions) - 1 - warmup`` of them recorded. One function of its own, so a profile's
    window is exactly this loop (mbaphases.profiles)."""
    import torch

    total = len(actions) - 1
    state = env.step(actions[0])  # priming step, outside the window
    obs, critic = split_obs(state.obs)
    obs, critic = _as_tensor(obs).float(), _as_tensor(critic).float()
    ep_return = torch.zeros(num_envs)
    ep_length = torch.zeros(num_envs, dtype=torch.int64)
    # the collector's bookkeeping, as the field's: returns, lengths and reward-term logs of finished episodes
    finished_returns: list[float] = []
    finished_lengths: list[int] = []
    reward_logs: dict[str, list] = {}
    samples = {k: [] for k in (*ACTIVE_PHASES, "physics_ms", *ENV_TIMING_KEYS, "reset_done_count")}
    cpu_start = None
    for step in range(total):
        record = step >= warmup
        if record and cpu_start is None:
            cpu_start = _cpu_times()
        act = actions[step + 1]
        t0 = time.perf_counter_ns()
        state = env.step(act)
        t1 = time.perf_counter_ns()
        next_obs, next_critic = split_obs(state.obs)
        next_obs, next_critic = _as_tensor(next_obs).float(), _as_tensor(next_critic).float()
        rewards = _as_tensor(state.reward).float().ravel()
        terminated, truncated = _as_tensor(state.terminated).bool().ravel(), _as_tensor(state.truncated).bool().ravel()
        dones = (terminated | truncated).float()
        final = getattr(state, "final_observation", None)
        terminal_obs = terminal_critic = None
        if isinstance(final, dict):
            terminal_obs = final.get("obs")
            terminal_critic = final.get("critic")
            terminal_obs = None if terminal_obs is None else _as_tensor(terminal_obs).float()
            terminal_critic = None if terminal_critic is None else _as_tensor(terminal_critic).float()
        replay.add(obs, _as_tensor(act).float(), rewards, next_obs, dones, timeout_mask(terminated, truncated).ravel(),
                   terminal_mask=dones > 0.5, terminal_next_obs=terminal_obs, critic=critic, next_critic=next_critic,
                   terminal_next_critic=terminal_critic)
        ingress = replay.take_published_ingress() if hasattr(replay, "take_published_ingress") else None
        if ingress is not None:
            slot, start, count = ingress[:3]
            replay.commit_ingress(slot=slot, start=start, count=count)
        t2 = time.perf_counter_ns()
        ep_return += rewards
        ep_length += 1
        done_idx = torch.nonzero(dones > 0.5).ravel()
        if done_idx.numel():
            finished_returns.extend(ep_return[done_idx].tolist())
            finished_lengths.extend(ep_length[done_idx].tolist())
            ep_return[done_idx] = 0.0
            ep_length[done_idx] = 0
        log = state.info.get("log", {}) if isinstance(state.info, dict) else {}
        for key, value in (log or {}).items():
            if str(key).startswith("reward/"):
                reward_logs.setdefault(key, []).append(value)
        t3 = time.perf_counter_ns()
        obs, critic = next_obs, next_critic
        if turns is not None:
            turns.between_steps()  # outside every timed part of the step
        if not record:
            continue
        samples["env_step_ms"].append((t1 - t0) / 1e6)
        samples["replay_ms"].append((t2 - t1) / 1e6)
        samples["bookkeeping_ms"].append((t3 - t2) / 1e6)
        timing = _timing(state.info)
        for key in ENV_TIMING_KEYS:
            if isinstance(timing.get(key), (int, float)):
                samples[key].append(float(timing[key]))
        if isinstance(timing.get("backend_physics_ms"), (int, float)):
            samples["physics_ms"].append(float(timing["backend_physics_ms"]))
        samples["reset_done_count"].append(float(done_idx.numel()))
    cpu_end = _cpu_times()
    # the OS threads of this process in the window (torch's, the physics pools', the framework's own):
    # what a one-CPU duet side actually ran
    threads_in_window = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else None
    cpu_pct = None
    if cpu_start and cpu_end and cpu_end[1] > cpu_start[1]:
        cpu_pct = 100.0 * (cpu_end[0] - cpu_start[0]) / (cpu_end[1] - cpu_start[1])
    return samples, cpu_pct, len(finished_returns), threads_in_window


def config_hash(resolved: dict) -> str:
    return hashlib.sha256(json.dumps(resolved, sort_keys=True, default=str).encode()).hexdigest()[:16]


def case_result(case: str, cfg, measured: dict, num_envs: int, warmup: int, measure: int, replay_steps: int,
                overrides: list[str], fixes: list[ConfigFix], era: Era, command: str) -> dict:
    from omegaconf import OmegaConf

    algo, task, sim = case.split("/")
    s = measured["samples"]
    total_active_ms = sum(sum(s[k]) for k in ACTIVE_PHASES)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    identity = {"case": case, "num_envs": num_envs, "replay_capacity_steps": replay_steps, "warmup_steps": warmup,
                "measure_steps": measure, "overrides": list(overrides)}
    env_timing = {k: timing_stats(s[k]) for k in (*ENV_TIMING_KEYS, "reset_done_count") if len(s[k]) == measure}
    physics = timing_stats(s["physics_ms"]) if len(s["physics_ms"]) == measure else None
    overhead = (timing_stats([e - p for e, p in zip(s["env_step_ms"], s["physics_ms"])]) if physics else None)
    notes = [f"framework era: {era.name}", "actions: pre-generated uniform in [-1, 1], seeded"]
    notes += [f"config fix {f.name}: {' '.join(f.overrides)} ({f.reason})" for f in fixes]
    if physics is None:
        notes.append("the env reports no backend_physics_ms: physics is not separated")
    return {
        "case": {"algo": algo, "task": task, "sim": sim, "variant": "default",
                 "runtime_sim_backend": str(cfg.training.sim_backend), "command": command,
                 "training_task_name": str(cfg.training.task_name), "num_envs": num_envs,
                 "replay_capacity_rows": num_envs * replay_steps, "replay_capacity_steps": replay_steps,
                 "obs_dim": measured["obs_dim"], "critic_dim": measured["critic_dim"],
                 "action_dim": measured["action_dim"],
                 "env_steps_per_sync": int(cfg.training.get("env_steps_per_sync", 1) or 1),
                 "runtime": measured["runtime"],
                 # what the suite sets of the case: two sides of this target are aligned on it; the
                 # release's own composed config is part of what a side is (compared, not aligned)
                 "config_hash": config_hash(identity), "resolved_config": identity,
                 "framework_config_hash": config_hash(resolved), "framework_config": resolved,
                 "config_fixes": [f.name for f in fixes]},
        "warmup_steps": warmup, "measure_steps": measure, "total_active_ms": total_active_ms,
        "collector_active_steps_per_sec": num_envs * measure / (total_active_ms / 1000.0),
        "phase_ms_per_vector_step": {k: timing_stats(s[k]) for k in ACTIVE_PHASES},
        "phase_pct": {k: 100.0 * sum(s[k]) / total_active_ms for k in ACTIVE_PHASES},
        "env_step_timing_ms_per_vector_step": env_timing,
        "physics_ms_per_vector_step": physics,
        "env_step_overhead_ms_per_vector_step": overhead,
        "cpu_util_pct": measured["cpu_pct"],
        "completed_episodes": measured["completed_episodes"],
        "process_threads": measured["process_threads"],
        "turns": measured["turns"],
        "notes": notes,
    }


def csv_row(r: dict) -> dict:
    c, ph, es = r["case"], r["phase_ms_per_vector_step"], r["env_step_timing_ms_per_vector_step"]
    row = {k: c[k] for k in ("algo", "task", "sim", "variant", "runtime_sim_backend", "training_task_name", "num_envs")}
    row.update(warmup_steps=r["warmup_steps"], measure_steps=r["measure_steps"],
               collector_active_steps_per_sec=r["collector_active_steps_per_sec"], total_active_ms=r["total_active_ms"])
    row.update({k: ph[k]["mean_ms"] for k in ACTIVE_PHASES})
    for key, stats in (("physics_ms", r["physics_ms_per_vector_step"]),
                       ("env_step_overhead_ms", r["env_step_overhead_ms_per_vector_step"])):
        row[key] = stats["mean_ms"] if stats else None
    row["reset_done_count"] = es["reset_done_count"]["mean_ms"] if "reset_done_count" in es else None
    row.update({col: es[key]["mean_ms"] if key in es else None for col, key in CSV_SUBTIMINGS.items()})
    row.update({f"{k.removesuffix('_ms')}_pct": v for k, v in r["phase_pct"].items()})
    row["cpu_util_pct"] = r["cpu_util_pct"]
    return row


def _finite(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def resolve_cases(args) -> list[str]:
    backends = BACKENDS if args.all else (BACKEND_ALIASES.get(args.backend, args.backend),)
    for b in backends:
        if b not in BACKENDS:
            raise UsageError(f"--backend {args.backend!r} is not one of {', '.join(BACKENDS)} (or motrixsim)")
    if args.cases == "default":
        return [c for c in SEED_CASES if c.split("/")[2] in backends]
    if args.cases == "auto":
        algos = [a.strip() for a in args.algos.split(",") if a.strip()]
        root = config_root()
        found = []
        for algo in algos:
            for b in backends:
                found += [f"{algo}/{p.parent.name}/{b}" for p in sorted((root / algo / "task").glob(f"*/{b}.yaml"))]
                found += [f"{algo}/{p.parent.name}/{b}" for p in sorted((root / "task" / algo).glob(f"*/{b}.yaml"))]
        return found
    cases = []
    for raw in args.cases.split(","):
        spec = raw.strip()
        parts = [p for p in spec.split("/") if p]
        if len(parts) != 3:
            raise UsageError(f"--cases {spec!r}: a case is <algo>/<task>/<sim>")
        algo, task, sim = parts
        sim = BACKEND_ALIASES.get(sim, sim)
        if algo not in ALGOS:
            raise UsageError(f"--cases {spec!r}: unknown algo {algo!r}; valid: {', '.join(ALGOS)}")
        if sim not in BACKENDS:
            raise UsageError(f"--cases {spec!r}: unknown sim {sim!r}; valid: {', '.join(BACKENDS)}")
        if f"{algo}/{task}/{sim}" not in cases:
            cases.append(f"{algo}/{task}/{sim}")
    return cases


def collector_threads() -> int:
    raw = os.environ.get(THREADS_ENV, str(DEFAULT_THREADS))
    try:
        n = int(raw)
    except ValueError:
        raise UsageError(f"{THREADS_ENV}={raw!r} is not an integer") from None
    return max(1, min(n, os.cpu_count() or 1))


def build_parser() -> argparse.ArgumentParser:
    class Parser(argparse.ArgumentParser):
        def error(self, message):
            raise UsageError(message)

    p = Parser(description="off-policy collector active-window benchmark for the UniLab framework")
    p.add_argument("--cases", default="default")
    p.add_argument("--algos", default="sac,flashsac,td3")
    p.add_argument("--backend", default="motrix")
    p.add_argument("--all", action="store_true")
    p.add_argument("--num-envs", type=int, default=8192)
    p.add_argument("--warmup-steps", type=int, default=10)
    p.add_argument("--measure-steps", type=int, default=100)
    p.add_argument("--replay-capacity-steps", type=int, default=64)
    p.add_argument("--override", action="append", default=[])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-json", default="scripts/benchmark/outputs/offpolicy_collector_active/results.json")
    p.add_argument("--out-csv", default=None)
    p.add_argument("--continue-on-error", action="store_true")
    return p


def _check_output(path: str, flag: str) -> None:
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{flag} {path} is a directory; give a file path")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=p.parent, prefix=".write-check-"):
            pass
    except OSError:
        raise UsageError(f"{flag} {path} is not writable") from None


def _assets_workdir() -> None:
    """Configs name their models relative to a repository root (src/unilab/assets/...): run where
    that path reaches the installed package's assets, unless the working directory has them."""
    import unilab.assets as assets

    if Path("src/unilab/assets").exists():
        return
    work = Path(tempfile.mkdtemp(prefix="unilab-entry-"))
    # every run makes one: removed as the entry exits (the link inside is removed, never followed)
    atexit.register(shutil.rmtree, work, True)
    (work / "src" / "unilab").mkdir(parents=True)
    (work / "src" / "unilab" / "assets").symlink_to(Path(assets.ASSETS_ROOT_PATH).resolve())
    os.chdir(work)


def run(argv=None) -> int:
    args = build_parser().parse_args(argv)
    for name in ("num_envs", "measure_steps", "replay_capacity_steps"):
        if getattr(args, name) <= 0:
            raise UsageError(f"--{name.replace('_', '-')}={getattr(args, name)} must be > 0")
    if args.warmup_steps < 0:
        raise UsageError(f"--warmup-steps={args.warmup_steps} must be >= 0")
    if args.seed < 0:
        raise UsageError(f"--seed={args.seed} must be >= 0")
    args.out_json = str(Path(args.out_json).resolve())
    args.out_csv = str(Path(args.out_csv).resolve()) if args.out_csv else None
    _check_output(args.out_json, "--out-json")
    if args.out_csv:
        _check_output(args.out_csv, "--out-csv")
    threads = collector_threads()
    cases = resolve_cases(args)
    if not cases:
        raise UsageError(f"no case matches --cases {args.cases} --algos {args.algos} --backend {args.backend}")
    import torch

    torch.set_num_threads(threads)
    era = installed_era()
    version = _version("unilab")
    _assets_workdir()
    turns = turns_from_env()
    results, errors = [], []
    for i, case in enumerate(cases, 1):
        print(f"[{i}/{len(cases)}] {case} ({args.num_envs} envs, unilab {version})", file=sys.stderr, flush=True)
        command = (f"benchmark_offpolicy_collector_active.py --cases {case} --num-envs {args.num_envs} "
                   f"--warmup-steps {args.warmup_steps} --measure-steps {args.measure_steps} "
                   f"--replay-capacity-steps {args.replay_capacity_steps} --seed {args.seed}"
                   + "".join(f" --override {o}" for o in args.override))
        env = None
        try:
            cfg, fixes = compose(case, args.num_envs, args.override, version)
            env = make_env(era, cfg, case.split("/")[0], args.seed)
            measured = run_case(era, env, args.num_envs, args.warmup_steps, args.measure_steps,
                                args.replay_capacity_steps, args.seed, turns, i - 1)
            results.append(case_result(case, cfg, measured, args.num_envs, args.warmup_steps, args.measure_steps,
                                       args.replay_capacity_steps, args.override, fixes, era, command))
        except UsageError:
            raise
        except Exception as e:  # a failing case is reported with the framework's own error, never dropped
            if not args.continue_on_error:
                print(f"error: case {case} failed: {type(e).__name__}: {e}", file=sys.stderr)
                return 1
            errors.append({"case": case, "type": type(e).__name__, "message": str(e).strip().splitlines()[0]
                           if str(e).strip() else type(e).__name__})
        finally:
            if env is not None and hasattr(env, "close"):
                try:
                    env.close()
                except Exception:  # noqa: BLE001 - closing must not turn a measured case into a failure
                    pass
    applied = sorted({n for r in results for n in r["case"]["config_fixes"]})
    doc = {
        "created_at": datetime.now(UTC).isoformat(),
        "benchmark": BENCHMARK,
        "definition": DEFINITION,
        "device": {"type": "cpu", "torch_threads": str(threads)},
        "args": {"cases": args.cases, "algos": args.algos, "backend": args.backend, "all_backends": args.all,
                 "num_envs": args.num_envs, "warmup_steps": args.warmup_steps, "measure_steps": args.measure_steps,
                 "replay_capacity_steps": args.replay_capacity_steps, "override": args.override, "seed": args.seed,
                 "out_json": args.out_json, "out_csv": args.out_csv, "continue_on_error": args.continue_on_error,
                 "resolved_cases": cases},
        "results": results,
        "errors": errors,
        "provenance": {"seed": args.seed, "torch_threads": threads, "framework_era": era.name,
                       "config_fixes": [{"name": f.name, "releases": f"{f.first}-{f.last}", "case": f.case,
                                         "overrides": list(f.overrides), "reason": f.reason}
                                        for f in CONFIG_FIXES if f.name in applied],
                       "versions": {n: _version(n) for n in VERSIONS},
                       "host": {"node": platform.node(), "machine": platform.machine(), "cpus": os.cpu_count()},
                       # every pool a run may start, as it was set: torch's (intra- and inter-op), OpenMP/MKL/
                       # OpenBLAS/numba through their variables, and the CPUs the process may use
                       "thread_env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                                                     "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS",
                                                                     "OMP_WAIT_POLICY", THREADS_ENV)},
                       "torch_interop_threads": torch.get_num_interop_threads(),
                       "cpu_affinity": sorted(os.sched_getaffinity(0)),
                       # sharing the CPU with a partner entry in turns (None: the CPUs it had were its own)
                       "turns": None if turns is None else {"role": turns.role, "turn_ms": turns.turn_s * 1000.0},
                       "entry": __file__},
    }
    Path(args.out_json).write_text(json.dumps(_finite(doc), indent=2, allow_nan=False) + "\n")
    if args.out_csv:
        rows = [csv_row(r) for r in results]
        buf = io.StringIO(newline="")
        if rows:
            w = csv.DictWriter(buf, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(_finite(rows))
        Path(args.out_csv).write_text(buf.getvalue())
    for r in results:
        print(f"{r['case']['algo']}/{r['case']['task']}/{r['case']['sim']}: "
              f"{r['collector_active_steps_per_sec']:,.0f} env steps/s")
    for e in errors:
        print(f"FAILED {e['case']}: {e['type']}: {e['message']}")
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


if __name__ == "__main__":
    sys.exit(main())
