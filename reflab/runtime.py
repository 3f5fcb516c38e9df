"""What every runtime (direct or manager-based) shares: the step skeleton with
its timers and the random streams. The factory that picks a runtime is
``reflab.envs.make_env``: the concrete runtimes import this module, so it
cannot import them.

``VecEnv.step`` runs four timed parts, the field's env.step sub-timings:
apply_action, step_core (one physics dispatch + state read), update_state
(commands, observations, rewards, terminations) and reset_done (auto-reset of
done envs, keeping their terminal observations).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from omegaconf import DictConfig

from reflab import ASSETS_DIR
from reflab.sim import make_backend

# Separate random streams per purpose, so that both runtimes draw the same
# numbers for the same purpose whatever order their code runs in.
RNG_STREAMS = ("command", "events", "noise")


@dataclass
class StepTimings:
    apply_action_ns: int = 0
    step_core_ns: int = 0
    update_state_ns: int = 0
    reset_done_ns: int = 0
    total_ns: int = 0
    physics_ns: int = 0
    reset_done_count: int = 0


def add_uniform_noise(rng: np.random.Generator, out: np.ndarray, rows, scale: np.ndarray,
                      scratch: np.ndarray) -> None:
    """``out[rows] += U(-1, 1) * scale``: one draw of the rows' full width, in place."""
    noise = scratch if isinstance(rows, slice) else scratch[: len(rows)]
    rng.random(out=noise, dtype=np.float32)
    noise *= 2.0
    noise -= 1.0
    noise *= scale
    out[rows] += noise


def make_rngs(seed: int) -> dict[str, np.random.Generator]:
    children = np.random.SeedSequence(seed).spawn(len(RNG_STREAMS))
    return {name: np.random.default_rng(s) for name, s in zip(RNG_STREAMS, children)}


class VecEnv:
    """Batched env. After ``step``: ``obs_policy``, ``obs_critic`` (or None),
    ``reward``, ``terminated``, ``truncated``, ``done_ids`` and, for those rows,
    ``terminal_obs_policy`` / ``terminal_obs_critic`` (the pre-reset observation)."""

    def __init__(self, cfg: DictConfig):
        self.cfg = cfg
        task = cfg.task
        self.num_envs = int(cfg.algo.num_envs)
        self.decimation = int(task.decimation)
        if self.decimation < 1:
            raise ValueError(f"task {task.name}: decimation={self.decimation} must be >= 1 physics step per control step")
        self.backend = make_backend(cfg.sim.backend, ASSETS_DIR / task.robot_file,
                                    self.num_envs, int(cfg.sim.nthread))
        self.physics_dt = float(task.physics_dt)
        self.step_dt = self.physics_dt * self.decimation
        self.max_episode_steps = int(round(float(task.episode_length_s) / self.step_dt))
        self.rng = make_rngs(int(cfg.seed))
        self.timings = StepTimings()
        self.action_dim = self.backend.layout.nu
        self.reward = np.zeros(self.num_envs, dtype=np.float32)
        self.terminated = np.zeros(self.num_envs, dtype=bool)
        self.truncated = np.zeros(self.num_envs, dtype=bool)
        self.done_ids = np.zeros(0, dtype=np.int64)
        self.episode_step = np.zeros(self.num_envs, dtype=np.int64)

    # sizes set by subclasses: obs_dim, critic_dim (0 without a critic group)
    obs_dim: int
    critic_dim: int
    reward_term_names: tuple[str, ...]

    def reset_all(self) -> None:
        self._reset_envs(np.arange(self.num_envs))

    def step(self, actions: np.ndarray) -> None:
        t = self.timings
        t0 = time.perf_counter_ns()
        self._apply_action(actions)
        t1 = time.perf_counter_ns()
        self._diverged = self._step_physics()
        t2 = time.perf_counter_ns()
        self._update_state()
        t3 = time.perf_counter_ns()
        done = self.terminated | self.truncated
        self.done_ids = np.flatnonzero(done)
        if len(self.done_ids):
            self._save_terminal_obs(self.done_ids)
            self._reset_envs(self.done_ids)
        t4 = time.perf_counter_ns()
        t.apply_action_ns, t.step_core_ns = t1 - t0, t2 - t1
        t.update_state_ns, t.reset_done_ns = t3 - t2, t4 - t3
        t.physics_ns = self.backend.physics_ns
        t.reset_done_count = len(self.done_ids)
        t.total_ns = time.perf_counter_ns() - t0

    def close(self) -> None:
        self.backend.close()

    def _step_physics(self) -> np.ndarray:
        """One dispatch holding the control target over the substeps; the ids of diverged envs."""
        return self.backend.step(self._ctrl, self.decimation)

    # the runtime-specific parts
    def _apply_action(self, actions: np.ndarray) -> None:
        raise NotImplementedError

    def _update_state(self) -> None:
        raise NotImplementedError

    def _save_terminal_obs(self, ids: np.ndarray) -> None:
        raise NotImplementedError

    def _reset_envs(self, ids: np.ndarray) -> None:
        raise NotImplementedError
