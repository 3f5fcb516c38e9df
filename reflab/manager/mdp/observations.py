"""Observation terms."""
from reflab.mathutil import projected_gravity as _projected_gravity
from reflab.mathutil import quat_rotate_inverse


def base_lin_vel(env, rows):
    return env.state.lin_vel_b[rows]


def base_ang_vel(env, rows):
    return env.state.ang_vel_b[rows]


def projected_gravity(env, rows):
    return env.state.gravity_b[rows]


def generated_commands(env, rows, command_name):
    return env.command_manager.get(command_name).command[rows]


def joint_pos_rel(env, rows):
    return env.state.joint_pos[rows] - env.action_manager.default_joint_pos


def joint_vel_rel(env, rows):
    return env.state.joint_vel[rows]


def last_action(env, rows):
    return env.action_manager.actions[rows]


def base_height(env, rows):
    return env.state.root_pos[rows, 2:3]


def foot_height(env, rows):
    return env.state.foot_z[rows]


def foot_contact(env, rows):
    return env.state.contact[rows]


def motion_ref_joint_pos(env, rows, command_name):
    cmd = env.command_manager.get(command_name)
    return cmd.ref("joint_pos", rows) - env.action_manager.default_joint_pos


def motion_ref_joint_vel(env, rows, command_name):
    return env.command_manager.get(command_name).ref("joint_vel", rows)


def motion_anchor_pos_error_b(env, rows, command_name):
    cmd = env.command_manager.get(command_name)
    err = cmd.ref("body_pos", rows)[:, cmd.anchor_body] - env.state.anchor_pos[rows]
    return quat_rotate_inverse(env.state.root_quat[rows], err)


def motion_anchor_ori_error(env, rows, command_name):
    cmd = env.command_manager.get(command_name)
    return _projected_gravity(cmd.ref("torso_quat", rows)) - _projected_gravity(env.state.anchor_quat[rows])


def motion_body_pos_error(env, rows, command_name):
    cmd = env.command_manager.get(command_name)
    err = cmd.ref("body_pos", rows) - env.state.body_pos[rows]
    return err.reshape(err.shape[0], -1)
