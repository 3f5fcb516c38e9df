"""The reference target's envs on real physics (MuJoCo via mujoco_uni, MotrixSim)."""
import numpy as np
import pytest
from conftest import compose

from reflab.bench import SEED_CASES
from reflab.envs import make_env

N = 16


def step_random(env, steps, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        env.step((scale * rng.uniform(-1, 1, (env.num_envs, env.action_dim))).astype(np.float32))
        out.append((env.obs_policy.copy(), env.reward.copy(), env.terminated.copy(), env.truncated.copy()))
    return out


@pytest.mark.parametrize("case", SEED_CASES)
def test_case_steps_with_configured_dims_and_finite_rewards(case):
    cfg = compose(case, N)
    env = make_env(cfg)
    try:
        nu = env.backend.layout.nu
        assert env.action_dim == nu == len(cfg.task.default_joint_pos)
        assert env.obs_policy.shape == (N, env.obs_dim)
        if cfg.algo.asymmetric_critic:
            assert env.obs_critic.shape == (N, env.critic_dim) and env.critic_dim > env.obs_dim
        else:
            assert env.obs_critic is None and env.critic_dim == 0
        for obs, rew, _term, _trunc in step_random(env, 5):
            assert np.isfinite(obs).all() and np.isfinite(rew).all()
            assert obs.dtype == np.float32 and rew.shape == (N,)
        assert env.timings.physics_ns > 0
        assert env.timings.step_core_ns >= env.timings.physics_ns
    finally:
        env.close()


def test_observation_sizes_match_the_field():
    dims = {}
    for case in ("flashsac/go2_joystick_flat/mujoco", "sac/g1_walk_flat/mujoco", "sac/g1_motion_tracking/mujoco"):
        env = make_env(compose(case, 8))
        dims[case.split("/")[1]] = env.obs_dim
        env.close()
    assert dims["go2_joystick_flat"] == 48
    assert 90 <= dims["g1_walk_flat"] <= 100


@pytest.mark.parametrize("case", ["sac/g1_walk_flat/mujoco", "sac/g1_motion_tracking/motrix",
                                  "flashsac/go2_joystick_flat/mujoco"])
def test_fixed_seed_gives_identical_output_twice(case):
    runs = []
    for _ in range(2):
        env = make_env(compose(case, N, seed=7))
        runs.append(step_random(env, 6, seed=3))
        env.close()
    for a, b in zip(*runs):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    env = make_env(compose(case, N, seed=8))
    other = step_random(env, 1, seed=3)
    env.close()
    assert not np.array_equal(other[0][0], runs[0][0][0])


@pytest.mark.parametrize("sim", ["mujoco", "motrix"])
def test_fallen_env_is_reset_and_keeps_its_terminal_observation(sim):
    env = make_env(compose(f"flashsac/g1_walk_flat/{sim}", 8, ["task.observation.noise=false"]))
    try:
        b = env.backend
        fallen = b.qpos[[2, 5]].copy()
        fallen[:, 2] = 0.2  # below min_base_height 0.4
        b.reset(np.array([2, 5]), fallen, np.zeros((2, b.layout.nv)))
        env.step(np.zeros((8, env.action_dim), np.float32))
        assert set(env.done_ids.tolist()) >= {2, 5}
        assert env.terminated[[2, 5]].all()
        height_col = env.obs_dim  # the critic's base height
        assert (env.terminal_obs_critic[[2, 5], height_col] < 0.4).all()
        assert np.allclose(env.obs_critic[[2, 5], height_col], 0.75, atol=1e-3)
        assert env.timings.reset_done_count == len(env.done_ids)
        assert (env.episode_step[[2, 5]] == 0).all()
    finally:
        env.close()


def test_random_actions_make_envs_fall_and_reset():
    env = make_env(compose("sac/g1_walk_flat/mujoco", 16))
    try:
        resets = 0
        rng = np.random.default_rng(0)
        for _ in range(150):
            env.step(rng.uniform(-1, 1, (16, env.action_dim)).astype(np.float32))
            resets += len(env.done_ids)
        assert resets > 0
    finally:
        env.close()


def test_motion_tracking_reset_starts_on_the_clip():
    env = make_env(compose("sac/g1_motion_tracking/mujoco", 8, ["task.events.randomize=false"]))
    try:
        f = env.frame
        np.testing.assert_allclose(env.backend.joint_pos, env.clip["joint_pos"][f], atol=1e-9)
        np.testing.assert_allclose(env.backend.root_pos, env.clip["root_pos"][f], atol=1e-9)
        body_err = env.body_pos - env.clip["body_pos"][f]
        assert np.abs(body_err).max() < 1e-6
    finally:
        env.close()
