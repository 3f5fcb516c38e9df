"""What the direct envs share: joint-position actions around the default pose,
soft joint limits, the observation buffers with their noise and clip pass, and
terminal observations. Each task family writes its own body on top."""
from __future__ import annotations

import numpy as np

from reflab.runtime import VecEnv, add_uniform_noise


class DirectEnv(VecEnv):
    reward_term_names: tuple[str, ...] = ()

    def __init__(self, cfg):
        super().__init__(cfg)
        task, N, nu = cfg.task, self.num_envs, self.action_dim
        lay = self.backend.layout
        self.default_joint_pos = np.asarray(task.default_joint_pos, dtype=np.float64)
        if self.default_joint_pos.shape != (nu,):
            raise ValueError(f"task {task.name}: default_joint_pos has {self.default_joint_pos.size} values, robot has {nu} joints")
        self.action_scale = float(task.action_scale)
        mid = lay.joint_range.mean(axis=1)
        half = 0.5 * (lay.joint_range[:, 1] - lay.joint_range[:, 0]) * float(task.soft_joint_limit)
        self.soft_lo, self.soft_hi = mid - half, mid + half
        obs = task.observation
        self.ang_vel_scale = float(obs.ang_vel_scale)
        self.joint_vel_scale = float(obs.joint_vel_scale)
        self.obs_clip = float(obs.clip)
        self.add_noise = bool(obs.noise)
        self._ctrl = np.tile(self.default_joint_pos, (N, 1))
        self.actions = np.zeros((N, nu))
        self.last_actions = np.zeros((N, nu))
        self.gravity_b = np.zeros((N, 3))
        self.reward_terms = np.zeros((N, len(self.reward_term_names)), dtype=np.float32)
        self.weights = np.array([task.rewards[n].weight for n in self.reward_term_names])

    def _allocate_observations(self, obs_dim: int, critic_dim: int, noise_scale: np.ndarray) -> None:
        N = self.num_envs
        self.obs_dim, self.critic_dim = obs_dim, critic_dim
        self.noise_scale = noise_scale.astype(np.float32)
        self.obs_policy = np.zeros((N, obs_dim), dtype=np.float32)
        self.obs_critic = np.zeros((N, critic_dim), dtype=np.float32) if critic_dim else None
        self.terminal_obs_policy = np.zeros_like(self.obs_policy)
        self.terminal_obs_critic = np.zeros_like(self.obs_critic) if critic_dim else None
        self._noise = np.zeros((N, obs_dim), dtype=np.float32)

    # one control target per control step, held by the backend over the substeps
    def _apply_action(self, actions):
        np.copyto(self.actions, actions)
        np.multiply(self.actions, self.action_scale, out=self._ctrl)
        self._ctrl += self.default_joint_pos

    def _joint_limit_violation(self, q: np.ndarray) -> np.ndarray:
        return (np.clip(self.soft_lo - q, 0.0, None) + np.clip(q - self.soft_hi, 0.0, None)).sum(axis=1)

    def _noise_and_clip(self, rows) -> None:
        """The policy observation's last pass: noise (if on), then clip."""
        o = self.obs_policy
        if self.add_noise:
            add_uniform_noise(self.rng["noise"], o, rows, self.noise_scale, self._noise)
        if isinstance(rows, slice):
            np.clip(o, -self.obs_clip, self.obs_clip, out=o)
        else:
            o[rows] = np.clip(o[rows], -self.obs_clip, self.obs_clip)

    def _save_terminal_obs(self, ids):
        self.terminal_obs_policy[ids] = self.obs_policy[ids]
        if self.obs_critic is not None:
            self.terminal_obs_critic[ids] = self.obs_critic[ids]
