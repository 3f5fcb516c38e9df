"""Reference-motion tracking for the humanoid (g1_motion_tracking), written as
one vectorized body. The motion command is each env's frame index into the
clip; it advances one frame per control step (the clip is sampled at the
control rate)."""
from __future__ import annotations

import numpy as np

from reflab import ASSETS_DIR
from reflab.mathutil import projected_gravity, quat_angle, quat_rotate_inverse
from reflab.direct.base import DirectEnv

REWARD_TERMS = (
    "joint_pos_tracking", "body_pos_tracking", "anchor_pos_tracking", "anchor_ori_tracking",
    "action_rate_l2", "joint_pos_limits",
)


def load_clip(task) -> dict[str, np.ndarray]:
    with np.load(ASSETS_DIR / task.clip_file) as z:
        clip = {k: z[k] for k in z.files}
    names = [str(n) for n in clip["body_names"]]
    if names != list(task.body_sensors):
        raise ValueError(f"task {task.name}: clip bodies {names} differ from body_sensors {list(task.body_sensors)}")
    return clip


class MotionTrackingEnv(DirectEnv):
    reward_term_names = REWARD_TERMS

    def __init__(self, cfg):
        super().__init__(cfg)
        task, N, nu = cfg.task, self.num_envs, self.action_dim
        lay = self.backend.layout
        self.clip = load_clip(task)
        if round(float(self.clip["fps"]) * self.step_dt) != 1:
            raise ValueError(f"task {task.name}: clip fps {self.clip['fps']} is not the control rate {1 / self.step_dt:g}")
        self.clip_len = len(self.clip["joint_pos"])
        self.body_slices = [lay.sensor_slices[n] for n in task.body_sensors]
        self.anchor_pos = lay.sensor_slices[task.anchor_pos_sensor]
        self.anchor_quat = lay.sensor_slices[task.anchor_quat_sensor]
        self.anchor_body = list(task.body_sensors).index(task.anchor_pos_sensor)
        obs = task.observation
        nb = len(self.body_slices)
        # policy: ref joint pos | anchor pos err 3 | anchor ori err 3 | ang_vel 3 | gravity 3 | joint_pos | joint_vel | last action
        obs_dim = 12 + 4 * nu
        noise_scale = np.concatenate([
            np.zeros(nu), np.full(3, obs.noise_anchor_pos), np.full(3, obs.noise_anchor_ori),
            np.full(3, obs.noise_ang_vel), np.full(3, obs.noise_gravity),
            np.full(nu, obs.noise_joint_pos), np.full(nu, obs.noise_joint_vel), np.zeros(nu),
        ])
        # critic adds: body position errors, base linear velocity, reference joint velocity
        self._allocate_observations(obs_dim, obs_dim + 3 * nb + 3 + nu if cfg.algo.asymmetric_critic else 0, noise_scale)
        self.frame = np.zeros(N, dtype=np.int64)
        self.body_pos = np.zeros((N, nb, 3))
        self.reset_all()

    def _read_bodies(self, rows):
        sd = self.backend.sensordata
        for k, sl in enumerate(self.body_slices):
            self.body_pos[rows, k] = sd[rows, sl]

    def _update_state(self):
        task, b, dt, clip = self.cfg.task, self.backend, self.step_dt, self.clip
        self.episode_step += 1
        np.minimum(self.frame + 1, self.clip_len - 1, out=self.frame)
        f = self.frame
        self._read_bodies(slice(None))
        projected_gravity(b.root_quat, out=self.gravity_b)
        q = b.joint_pos
        rw, terms = task.rewards, self.reward_terms
        jerr = q - clip["joint_pos"][f]
        terms[:, 0] = np.exp(-np.einsum("ij,ij->i", jerr, jerr) / len(self.default_joint_pos) / rw.joint_pos_tracking.std ** 2)
        berr = self.body_pos - clip["body_pos"][f]
        terms[:, 1] = np.exp(-np.einsum("ijk,ijk->i", berr, berr) / len(self.body_slices) / rw.body_pos_tracking.std ** 2)
        aerr = berr[:, self.anchor_body]
        terms[:, 2] = np.exp(-np.einsum("ij,ij->i", aerr, aerr) / rw.anchor_pos_tracking.std ** 2)
        ori_err = quat_angle(b.sensordata[:, self.anchor_quat], clip["torso_quat"][f])
        terms[:, 3] = np.exp(-np.square(ori_err) / rw.anchor_ori_tracking.std ** 2)
        da = self.actions - self.last_actions
        terms[:, 4] = np.einsum("ij,ij->i", da, da)
        terms[:, 5] = self._joint_limit_violation(q)
        terms *= self.weights * dt
        np.sum(terms, axis=1, out=self.reward)

        term = task.termination
        np.greater(np.abs(aerr[:, 2]), term.max_anchor_height_error, out=self.terminated)
        self.terminated |= ori_err > term.max_anchor_ori_error_rad
        self.terminated[self._diverged] = True
        self.truncated[:] = (self.episode_step >= self.max_episode_steps) | (f >= self.clip_len - 1)

        self._compute_obs(slice(None), self.gravity_b)
        np.copyto(self.last_actions, self.actions)

    def _compute_obs(self, rows, gravity_b):
        b, nu, clip = self.backend, self.action_dim, self.clip
        f = self.frame[rows]
        quat = b.root_quat[rows]
        o = self.obs_policy
        o[rows, 0:nu] = clip["joint_pos"][f] - self.default_joint_pos
        anchor_err = clip["body_pos"][f, self.anchor_body] - b.sensordata[rows, self.anchor_pos]
        o[rows, nu:nu + 3] = quat_rotate_inverse(quat, anchor_err)
        # orientation error as the reference's gravity direction minus the robot's, in the robot frame
        ref_gravity = projected_gravity(clip["torso_quat"][f])
        o[rows, nu + 3:nu + 6] = ref_gravity - projected_gravity(b.sensordata[rows, self.anchor_quat])
        o[rows, nu + 6:nu + 9] = b.sensor("base_ang_vel")[rows] * self.ang_vel_scale
        o[rows, nu + 9:nu + 12] = gravity_b
        o[rows, nu + 12:2 * nu + 12] = b.joint_pos[rows] - self.default_joint_pos
        o[rows, 2 * nu + 12:3 * nu + 12] = b.joint_vel[rows] * self.joint_vel_scale
        o[rows, 3 * nu + 12:] = self.actions[rows]
        if self.obs_critic is not None:
            c, d = self.obs_critic, self.obs_dim
            nb = len(self.body_slices)
            berr = (clip["body_pos"][f] - self.body_pos[rows]).reshape(-1, 3 * nb)
            c[rows, :d] = o[rows]
            c[rows, d:d + 3 * nb] = berr
            c[rows, d + 3 * nb:d + 3 * nb + 3] = b.sensor("base_lin_vel")[rows]
            c[rows, d + 3 * nb + 3:] = clip["joint_vel"][f] * self.joint_vel_scale
        self._noise_and_clip(rows)

    def _reset_envs(self, ids):
        task, b, clip = self.cfg.task, self.backend, self.clip
        n, lay = len(ids), b.layout
        # the motion command: a uniformly sampled start frame, leaving room to track
        frames = self.rng["command"].integers(0, self.clip_len - self.clip_len // 4, size=n)
        self.frame[ids] = frames
        qpos = np.empty((n, lay.nq))
        qpos[:, 0:3] = clip["root_pos"][frames]
        qpos[:, 3:7] = clip["root_quat"][frames]
        qpos[:, 7:] = clip["joint_pos"][frames]
        qvel = np.zeros((n, lay.nv))
        qvel[:, 0:3] = clip["root_lin_vel"][frames]
        qvel[:, 6:] = clip["joint_vel"][frames]
        ev = task.events
        if ev.randomize:
            rng = self.rng["events"]
            lo, hi = ev.joint_pos_offset
            qpos[:, 7:] += lo + (hi - lo) * rng.random((n, self.action_dim))
            np.clip(qpos[:, 7:], lay.joint_range[:, 0], lay.joint_range[:, 1], out=qpos[:, 7:])
            lo, hi = ev.base_xy
            qpos[:, 0:2] += lo + (hi - lo) * rng.random((n, 2))
        b.reset(ids, qpos, qvel)
        self.actions[ids] = 0.0
        self.last_actions[ids] = 0.0
        self.episode_step[ids] = 0
        self._read_bodies(ids)
        grav = projected_gravity(b.root_quat[ids])
        self.gravity_b[ids] = grav
        self._compute_obs(ids, grav)
