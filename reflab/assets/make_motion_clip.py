"""Make the reference motion clip of g1_motion_tracking: a procedural walking
gait with arm swing for the G1-like humanoid, 10 s at 50 Hz (the control rate).

Body positions are those of the model's frame sensors (torso, hands, feet),
computed with MuJoCo's kinematics, so the task can compare them with the
robot's own frame sensors. Run: python -m reflab.assets.make_motion_clip
"""
from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np

HERE = Path(__file__).resolve().parent
CLIP_PATH = HERE / "g1_motion_clip.npz"
BODY_SENSORS = ("torso_pos", "left_hand_pos", "right_hand_pos", "left_foot_pos", "right_foot_pos")
FPS = 50
DURATION_S = 10.0
STRIDE_HZ = 1.0
FORWARD_SPEED = 0.4


def joint_trajectory(t: np.ndarray) -> np.ndarray:
    """(T, 29) joint angles; order as in g1.xml."""
    ph = 2 * np.pi * STRIDE_HZ * t
    q = np.zeros((len(t), 29))
    for side, sign in ((0, 1.0), (6, -1.0)):  # left leg, right leg in antiphase
        s = np.sin(ph) * sign
        lift = np.clip(np.sin(ph + (0 if sign > 0 else np.pi)), 0.0, None)
        q[:, side + 0] = -0.1 - 0.3 * s  # hip pitch
        q[:, side + 3] = 0.3 + 0.5 * lift  # knee
        q[:, side + 4] = -0.2 + 0.15 * s - 0.25 * lift  # ankle pitch
    q[:, 12] = 0.1 * np.sin(ph)  # waist yaw
    for side, sign in ((15, 1.0), (22, -1.0)):  # arms swing against the legs
        q[:, side + 0] = 0.35 * np.sin(ph) * sign
        q[:, side + 1] = 0.2 * sign
        q[:, side + 3] = 0.9
    return q


def make_clip() -> dict[str, np.ndarray]:
    model = mujoco.MjModel.from_xml_path(str(HERE / "g1.xml"))
    data = mujoco.MjData(model)
    t = np.arange(int(DURATION_S * FPS)) / FPS
    joint_pos = joint_trajectory(t)
    root_pos = np.stack([FORWARD_SPEED * t, np.zeros_like(t),
                         0.745 + 0.01 * np.cos(4 * np.pi * STRIDE_HZ * t)], axis=1)
    root_quat = np.tile([1.0, 0.0, 0.0, 0.0], (len(t), 1))
    body_pos = np.zeros((len(t), len(BODY_SENSORS), 3))
    torso_quat = np.zeros((len(t), 4))
    adr = {model.sensor(i).name: int(model.sensor_adr[i]) for i in range(model.nsensor)}
    for k in range(len(t)):
        data.qpos[:3], data.qpos[3:7], data.qpos[7:] = root_pos[k], root_quat[k], joint_pos[k]
        mujoco.mj_forward(model, data)
        for b, name in enumerate(BODY_SENSORS):
            body_pos[k, b] = data.sensordata[adr[name]:adr[name] + 3]
        torso_quat[k] = data.sensordata[adr["torso_quat"]:adr["torso_quat"] + 4]
    return {
        "fps": np.array(FPS),
        "joint_pos": joint_pos,
        "joint_vel": np.gradient(joint_pos, 1.0 / FPS, axis=0),
        "root_pos": root_pos,
        "root_quat": root_quat,
        "root_lin_vel": np.gradient(root_pos, 1.0 / FPS, axis=0),
        "body_pos": body_pos,
        "torso_quat": torso_quat,
        "body_names": np.array(BODY_SENSORS),
    }


if __name__ == "__main__":
    np.savez_compressed(CLIP_PATH, **make_clip())
    print(f"wrote {CLIP_PATH}")
