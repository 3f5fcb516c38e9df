"""Termination terms: (n,) bool."""
import numpy as np


def time_out(env, rows):
    return env.episode_step[rows] >= env.max_episode_steps


def base_height_below(env, rows, min_height):
    return env.state.root_pos[rows, 2] < min_height


def bad_orientation(env, rows, max_tilt_rad):
    return env.state.gravity_b[rows, 2] > -np.cos(max_tilt_rad)


def motion_clip_end(env, rows, command_name):
    cmd = env.command_manager.get(command_name)
    return cmd.frame[rows] >= cmd.clip_len - 1


def motion_anchor_height_error(env, rows, command_name, threshold):
    cmd = env.command_manager.get(command_name)
    err = env.state.body_pos[rows, cmd.anchor_body, 2] - cmd.ref("body_pos", rows)[:, cmd.anchor_body, 2]
    return np.abs(err) > threshold


def motion_anchor_ori_error(env, rows, command_name, threshold):
    return env.command_manager.get(command_name).anchor_ori_error[rows] > threshold
