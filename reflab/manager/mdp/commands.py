"""Command terms: per-env commands with their own resampling and reset."""
import numpy as np

from reflab import ASSETS_DIR
from reflab.mathutil import quat_angle


class UniformVelocityCommand:
    """(lin_vel_x, lin_vel_y, ang_vel_z), resampled every ``resampling_time_s``."""

    def __init__(self, env, resampling_time_s, lin_vel_x, lin_vel_y, ang_vel_z):
        self.env = env
        self.resampling_time_s = float(resampling_time_s)
        self.lo = np.array([lin_vel_x[0], lin_vel_y[0], ang_vel_z[0]], dtype=np.float64)
        self.hi = np.array([lin_vel_x[1], lin_vel_y[1], ang_vel_z[1]], dtype=np.float64)
        self.command = np.zeros((env.num_envs, 3))
        self.time_left = np.zeros(env.num_envs)

    def _resample(self, ids):
        self.command[ids] = self.lo + (self.hi - self.lo) * self.env.rng["command"].random((len(ids), 3))
        self.time_left[ids] = self.resampling_time_s

    def compute(self, dt):
        self.time_left -= dt
        due = np.flatnonzero(self.time_left <= 0.0)
        if len(due):
            self._resample(due)

    def reset(self, ids):
        self._resample(ids)

    def update_metrics(self, rows):
        pass


class MotionCommand:
    """Each env's frame index into the reference clip, one frame per control step."""

    def __init__(self, env, clip_file, body_sensors, anchor_pos_sensor, anchor_quat_sensor):
        self.env = env
        with np.load(ASSETS_DIR / clip_file) as z:
            self.clip = {k: z[k] for k in z.files}
        names = [str(n) for n in self.clip["body_names"]]
        if names != list(body_sensors):
            raise ValueError(f"clip bodies {names} differ from body_sensors {list(body_sensors)}")
        if round(float(self.clip["fps"]) * env.step_dt) != 1:
            raise ValueError(f"clip fps {self.clip['fps']} is not the control rate {1 / env.step_dt:g}")
        self.clip_len = len(self.clip["joint_pos"])
        self.anchor_body = list(body_sensors).index(anchor_pos_sensor)
        self.frame = np.zeros(env.num_envs, dtype=np.int64)
        self.anchor_ori_error = np.zeros(env.num_envs)

    def ref(self, key, rows):
        return self.clip[key][self.frame[rows]]

    def compute(self, dt):
        np.minimum(self.frame + 1, self.clip_len - 1, out=self.frame)

    def update_metrics(self, rows):
        """Orientation error, shared by a reward and a termination term: computed once."""
        self.anchor_ori_error[rows] = quat_angle(self.env.state.anchor_quat[rows], self.ref("torso_quat", rows))

    def reset(self, ids):
        # leave room to track: start in the first three quarters of the clip
        self.frame[ids] = self.env.rng["command"].integers(0, self.clip_len - self.clip_len // 4, size=len(ids))
