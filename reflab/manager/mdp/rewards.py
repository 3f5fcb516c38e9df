"""Reward terms, unweighted; the reward manager applies weight x step dt."""
import numpy as np


def _sq_norm(x):
    return np.einsum("ij,ij->i", x, x)


def track_lin_vel_xy_exp(env, rows, command_name, std):
    err = env.command_manager.get(command_name).command[rows, :2] - env.state.lin_vel_b[rows, :2]
    return np.exp(-_sq_norm(err) / std ** 2)


def track_ang_vel_z_exp(env, rows, command_name, std):
    cmd = env.command_manager.get(command_name).command
    return np.exp(-np.square(cmd[rows, 2] - env.state.ang_vel_b[rows, 2]) / std ** 2)


def lin_vel_z_l2(env, rows):
    return np.square(env.state.lin_vel_b[rows, 2])


def ang_vel_xy_l2(env, rows):
    return _sq_norm(env.state.ang_vel_b[rows, :2])


def flat_orientation_l2(env, rows):
    return _sq_norm(env.state.gravity_b[rows, :2])


def action_rate_l2(env, rows):
    am = env.action_manager
    return _sq_norm(am.actions[rows] - am.last_actions[rows])


def joint_torques_l2(env, rows):
    """PD torque estimate of the position actuators."""
    am, s = env.action_manager, env.state
    lay = env.backend.layout
    torque = lay.actuator_kp * (am.ctrl[rows] - s.joint_pos[rows]) - lay.actuator_kv * s.joint_vel[rows]
    return _sq_norm(torque)


def joint_pos_limits(env, rows):
    q = env.state.joint_pos[rows]
    lo, hi = env.state.soft_joint_lo, env.state.soft_joint_hi
    return (np.clip(lo - q, 0.0, None) + np.clip(q - hi, 0.0, None)).sum(axis=1)


def feet_air_time(env, rows, command_name, threshold, command_threshold):
    s = env.state
    cmd = env.command_manager.get(command_name).command
    moving = np.linalg.norm(cmd[rows, :2], axis=1) > command_threshold
    return ((s.air_time[rows] - threshold) * s.first_contact[rows]).sum(axis=1) * moving


def motion_joint_pos_exp(env, rows, command_name, std):
    err = env.state.joint_pos[rows] - env.command_manager.get(command_name).ref("joint_pos", rows)
    return np.exp(-_sq_norm(err) / err.shape[1] / std ** 2)


def motion_body_pos_exp(env, rows, command_name, std):
    cmd = env.command_manager.get(command_name)
    err = env.state.body_pos[rows] - cmd.ref("body_pos", rows)
    return np.exp(-np.einsum("ijk,ijk->i", err, err) / err.shape[1] / std ** 2)


def motion_anchor_pos_exp(env, rows, command_name, std):
    cmd = env.command_manager.get(command_name)
    err = env.state.body_pos[rows, cmd.anchor_body] - cmd.ref("body_pos", rows)[:, cmd.anchor_body]
    return np.exp(-_sq_norm(err) / std ** 2)


def motion_anchor_ori_exp(env, rows, command_name, std):
    err = env.command_manager.get(command_name).anchor_ori_error[rows]
    return np.exp(-np.square(err) / std ** 2)
