"""The off-policy collector's active window, as the field defines it.

Setup (env creation, replay allocation, one priming step) is outside the
window. Per recorded vector step three phases are timed with perf_counter_ns:
env_step (env.step), replay (observation casting, terminal-observation
handling, replay add) and bookkeeping (episode returns/lengths and reward-term
logs). Actions are generated before the window: policy inference belongs to
the learner.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from reflab import ACTIVE_WINDOW
from reflab.envs import make_env
from reflab.runtime import VecEnv

DEFAULT_TORCH_THREADS = 8
THREADS_ENV = "UNILAB_COLLECTOR_TORCH_THREADS"


def collector_torch_threads() -> int:
    """Threads for torch, read as the field's entry reads them."""
    raw = os.environ.get(THREADS_ENV, str(DEFAULT_TORCH_THREADS))
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"{THREADS_ENV}={raw!r} is not an integer") from None
    return max(1, min(n, os.cpu_count() or 1))


class ReplayBuffer:
    """Preallocated CPU torch ring of ``capacity_steps x num_envs`` rows."""

    def __init__(self, num_envs, capacity_steps, obs_dim, action_dim, critic_dim=0):
        rows = num_envs * capacity_steps
        self.num_envs, self.capacity_steps = num_envs, capacity_steps
        self.obs = torch.zeros(rows, obs_dim)
        self.next_obs = torch.zeros(rows, obs_dim)
        self.actions = torch.zeros(rows, action_dim)
        self.rewards = torch.zeros(rows)
        self.terminated = torch.zeros(rows, dtype=torch.bool)
        self.truncated = torch.zeros(rows, dtype=torch.bool)
        self.critic_obs = torch.zeros(rows, critic_dim) if critic_dim else None
        self.next_critic_obs = torch.zeros(rows, critic_dim) if critic_dim else None
        self.ptr = 0
        self.size = 0

    def add(self, obs, actions, rewards, next_obs, terminated, truncated, critic_obs=None, next_critic_obs=None):
        rows = slice(self.ptr * self.num_envs, (self.ptr + 1) * self.num_envs)
        self.obs[rows] = obs
        self.next_obs[rows] = next_obs
        self.actions[rows] = actions
        self.rewards[rows] = rewards
        self.terminated[rows] = terminated
        self.truncated[rows] = truncated
        if self.critic_obs is not None:
            self.critic_obs[rows] = critic_obs
            self.next_critic_obs[rows] = next_critic_obs
        self.ptr = (self.ptr + 1) % self.capacity_steps
        self.size = min(self.size + 1, self.capacity_steps)


@dataclass
class PhaseSamples:
    """One value per recorded vector step, in ms (reset_done_count: envs)."""

    n: int
    ms: dict[str, np.ndarray] = field(default_factory=dict)

    KEYS = ("env_step_ms", "replay_ms", "bookkeeping_ms", "action_select_ms", "env_step_total_ms", "apply_action_ms",
            "step_core_ms", "update_state_ms", "reset_done_ms", "env_step_internal_gap_ms",
            "physics_ms", "reset_done_count")

    def __post_init__(self):
        self.ms = {k: np.zeros(self.n) for k in self.KEYS}


class Collector:
    def __init__(self, env: VecEnv, replay_capacity_steps: int, seed: int):
        self.env = env
        N = env.num_envs
        self.replay = ReplayBuffer(N, replay_capacity_steps, env.obs_dim, env.action_dim, env.critic_dim)
        self.obs = torch.from_numpy(env.obs_policy.copy())
        self.critic_obs = torch.from_numpy(env.obs_critic.copy()) if env.critic_dim else None
        self._next_obs = np.zeros_like(env.obs_policy)
        self._next_critic = np.zeros_like(env.obs_critic) if env.critic_dim else None
        self.episode_return = np.zeros(N)
        self.episode_length = np.zeros(N, dtype=np.int64)
        self.episode_term_sums = np.zeros((N, len(env.reward_term_names)))
        self.completed_episodes = 0
        self.completed_return_sum = 0.0
        self.completed_term_sums = np.zeros(len(env.reward_term_names))
        self.rng = np.random.default_rng(seed)
        self.turns_record = None  # the turns taken with a duet partner on this CPU, if any

    def make_actions(self, steps: int) -> np.ndarray:
        env = self.env
        return self.rng.uniform(-1.0, 1.0, size=(steps, env.num_envs, env.action_dim)).astype(np.float32)

    def step(self, actions: np.ndarray) -> tuple[int, int, int]:
        """One vector step; returns (env_step, replay, bookkeeping) in ns."""
        env = self.env
        t0 = time.perf_counter_ns()
        env.step(actions)
        t1 = time.perf_counter_ns()
        done = env.done_ids
        np.copyto(self._next_obs, env.obs_policy)
        self._next_obs[done] = env.terminal_obs_policy[done]
        next_critic = None
        if self._next_critic is not None:
            np.copyto(self._next_critic, env.obs_critic)
            self._next_critic[done] = env.terminal_obs_critic[done]
            next_critic = torch.from_numpy(self._next_critic)
        self.replay.add(self.obs, torch.from_numpy(actions), torch.from_numpy(env.reward),
                        torch.from_numpy(self._next_obs), torch.from_numpy(env.terminated),
                        torch.from_numpy(env.truncated), self.critic_obs, next_critic)
        self.obs.copy_(torch.from_numpy(env.obs_policy))
        if self.critic_obs is not None:
            self.critic_obs.copy_(torch.from_numpy(env.obs_critic))
        t2 = time.perf_counter_ns()
        self.episode_return += env.reward
        self.episode_length += 1
        self.episode_term_sums += env.reward_terms
        if len(done):
            self.completed_episodes += len(done)
            self.completed_return_sum += float(self.episode_return[done].sum())
            self.completed_term_sums += self.episode_term_sums[done].sum(axis=0)
            self.episode_return[done] = 0.0
            self.episode_length[done] = 0
            self.episode_term_sums[done] = 0.0
        t3 = time.perf_counter_ns()
        return t1 - t0, t2 - t1, t3 - t2

    def run(self, warmup_steps: int, measure_steps: int, turns=None) -> tuple[PhaseSamples, float]:
        """Warm up, then record ``measure_steps`` steps. Returns the samples and
        the process CPU utilisation (%) over the recorded window. With ``turns``
        (a duet partner on this CPU) the loop hands the CPU over between steps,
        after every timer of the step."""
        between_steps = turns.between_steps if turns is not None else (lambda: None)
        actions = self.make_actions(warmup_steps + measure_steps)
        for k in range(warmup_steps):
            self.step(actions[k])
            between_steps()
        samples = PhaseSamples(measure_steps)
        ms, t = samples.ms, self.env.timings
        cpu0, wall0 = time.process_time(), time.perf_counter()
        with_select = ACTIVE_WINDOW == "with-action-select"
        policy_out = torch.zeros(actions.shape[1:])
        for k in range(measure_steps):
            if with_select:
                # the oldest field entry also timed taking the action out of the policy output
                t_sel = time.perf_counter_ns()
                policy_out.copy_(torch.from_numpy(actions[warmup_steps + k]))
                step_actions = policy_out.numpy()
                ms["action_select_ms"][k] = (time.perf_counter_ns() - t_sel) / 1e6
            else:
                step_actions = actions[warmup_steps + k]
            e, r, b = self.step(step_actions)
            ms["env_step_ms"][k] = e / 1e6
            ms["replay_ms"][k] = r / 1e6
            ms["bookkeeping_ms"][k] = b / 1e6
            ms["env_step_total_ms"][k] = t.total_ns / 1e6
            ms["apply_action_ms"][k] = t.apply_action_ns / 1e6
            ms["step_core_ms"][k] = t.step_core_ns / 1e6
            ms["update_state_ms"][k] = t.update_state_ns / 1e6
            ms["reset_done_ms"][k] = t.reset_done_ns / 1e6
            parts = t.apply_action_ns + t.step_core_ns + t.update_state_ns + t.reset_done_ns
            ms["env_step_internal_gap_ms"][k] = (t.total_ns - parts) / 1e6
            ms["physics_ms"][k] = t.physics_ns / 1e6
            ms["reset_done_count"][k] = t.reset_done_count
            between_steps()
        wall = time.perf_counter() - wall0
        cpu_pct = 100.0 * (time.process_time() - cpu0) / wall if wall > 0 else float("nan")
        return samples, cpu_pct


def timing_stats(values: np.ndarray) -> dict:
    v = np.asarray(values, dtype=float)
    return {
        "samples_ms": v.tolist(),
        "mean_ms": float(v.mean()),
        "median_ms": float(np.median(v)),
        "std_ms": float(v.std()),
        "min_ms": float(v.min()),
        "max_ms": float(v.max()),
    }


def run_collector(cfg, warmup_steps: int, measure_steps: int, replay_capacity_steps: int, turns=None,
                  case_index: int = 0) -> tuple[VecEnv, PhaseSamples, float, Collector]:
    """One case's collector. ``turns``: the suite's turn protocol (mbaphases/turns.py), met at the
    priming step and left however the loop ends; its record is ``collector.turns_record``."""
    env = make_env(cfg)
    try:
        collector = Collector(env, replay_capacity_steps, int(cfg.seed))
        if turns is not None:
            turns.begin(case_index)
        try:
            collector.step(collector.make_actions(1)[0])  # priming step, outside the window
            samples, cpu_pct = collector.run(warmup_steps, measure_steps, turns)
        finally:
            if turns is not None:
                collector.turns_record = turns.end()
    finally:
        env.close()
    return env, samples, cpu_pct, collector
