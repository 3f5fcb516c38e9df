"""Reset events. Each edits the staged ``qpos (n, nq)`` / ``qvel (n, nv)`` of
the envs being reset; the event manager then resets the backend once."""
import numpy as np

from reflab.mathutil import yaw_quat


def reset_to_default_pose(env, ids, qpos, qvel, height):
    qpos[:, 2] = height
    qpos[:, 7:] = env.action_manager.default_joint_pos


def reset_joints_uniform_offset(env, ids, qpos, qvel, offset_range):
    lo, hi = offset_range
    lay = env.backend.layout
    qpos[:, 7:] += lo + (hi - lo) * env.rng["events"].random((len(ids), lay.nu))
    np.clip(qpos[:, 7:], lay.joint_range[:, 0], lay.joint_range[:, 1], out=qpos[:, 7:])


def reset_base_xy_yaw(env, ids, qpos, qvel, xy_range, yaw_range):
    rng = env.rng["events"]
    lo, hi = xy_range
    qpos[:, 0:2] = lo + (hi - lo) * rng.random((len(ids), 2))
    lo, hi = yaw_range
    qpos[:, 3:7] = yaw_quat(lo + (hi - lo) * rng.random(len(ids)))


def reset_base_xy_offset(env, ids, qpos, qvel, xy_range):
    lo, hi = xy_range
    qpos[:, 0:2] += lo + (hi - lo) * env.rng["events"].random((len(ids), 2))


def reset_to_motion_frame(env, ids, qpos, qvel, command_name):
    cmd = env.command_manager.get(command_name)
    frames = cmd.frame[ids]
    qpos[:, 0:3] = cmd.clip["root_pos"][frames]
    qpos[:, 3:7] = cmd.clip["root_quat"][frames]
    qpos[:, 7:] = cmd.clip["joint_pos"][frames]
    qvel[:, 0:3] = cmd.clip["root_lin_vel"][frames]
    qvel[:, 6:] = cmd.clip["joint_vel"][frames]
