"""The manager-based runtime does the same work as the direct one.

With the same seed and actions both runtimes must give the same observations,
rewards, terminations, resets and terminal observations. Random draws come
from per-purpose streams (command, events, noise), so the guarantee holds with
observation noise and reset randomization on as well; the first test takes
them off, as the contract states it, the second keeps them on.
"""
import numpy as np
import pytest
from conftest import compose

from reflab.bench import SEED_CASES
from reflab.envs import make_env
from reflab.manager import dev_costs
from reflab.manager.managers import TermConfigError

N = 16
STEPS = 200
# float32 observations: both runtimes do the same float64 arithmetic before the cast
ATOL = 1e-5


def rollout(case, runtime, overrides, steps, seed=0):
    env = make_env(compose(case, N, [f"runtime={runtime}", *overrides], seed=seed))
    rng = np.random.default_rng(42)
    trace = []
    try:
        for _ in range(steps):
            env.step(rng.uniform(-1, 1, (N, env.action_dim)).astype(np.float32))
            done = env.done_ids.copy()
            rec = {"obs": env.obs_policy.copy(), "reward": env.reward.copy(), "terminated": env.terminated.copy(),
                   "truncated": env.truncated.copy(), "done": done, "terminal": env.terminal_obs_policy[done].copy()}
            if env.obs_critic is not None:
                rec["critic"] = env.obs_critic.copy()
                rec["terminal_critic"] = env.terminal_obs_critic[done].copy()
            trace.append(rec)
    finally:
        env.close()
    return trace


def assert_same(direct, mba):
    resets = 0
    for k, (a, b) in enumerate(zip(direct, mba)):
        assert a.keys() == b.keys()
        np.testing.assert_array_equal(a["done"], b["done"], err_msg=f"step {k}: reset envs differ")
        np.testing.assert_array_equal(a["terminated"], b["terminated"], err_msg=f"step {k}")
        np.testing.assert_array_equal(a["truncated"], b["truncated"], err_msg=f"step {k}")
        for key in ("obs", "reward", "terminal", "critic", "terminal_critic"):
            if key in a:
                np.testing.assert_allclose(a[key], b[key], atol=ATOL, rtol=0, err_msg=f"step {k}: {key}")
        resets += len(a["done"])
    return resets


@pytest.mark.parametrize("case", SEED_CASES)
def test_parity_without_noise_and_randomization(case):
    # short episodes and strong actions, so time-outs and falls both happen
    off = ["task.observation.noise=false", "task.events.randomize=false", "task.episode_length_s=1.5",
           "task.action_scale=1.0"]
    direct, mba = rollout(case, "direct", off, STEPS), rollout(case, "mba", off, STEPS)
    resets = assert_same(direct, mba)
    assert resets > 0, "the rollout must exercise resets"


@pytest.mark.parametrize("case", ["flashsac/go2_joystick_flat/motrix", "sac/g1_motion_tracking/mujoco"])
def test_parity_with_noise_and_randomization(case):
    assert_same(rollout(case, "direct", [], 40, seed=3), rollout(case, "mba", [], 40, seed=3))


def test_reset_randomization_has_the_configured_distribution():
    lo, hi = -0.1, 0.1
    for runtime in ("direct", "mba"):
        env = make_env(compose("sac/g1_walk_flat/mujoco", 512, [f"runtime={runtime}"]))
        offsets = env.backend.joint_pos - np.asarray(env.cfg.task.default_joint_pos)
        inner = offsets[:, 3]  # the knee: its range leaves the offset unclipped
        assert abs(inner.mean() - (lo + hi) / 2) < 0.01
        assert abs(inner.std() - (hi - lo) / np.sqrt(12)) < 0.01
        yaw = 2 * np.arctan2(env.backend.root_quat[:, 3], env.backend.root_quat[:, 0])
        assert np.abs(yaw).max() <= np.pi + 1e-6 and yaw.std() > 1.5
        env.close()


@pytest.mark.parametrize("override, needle", [
    ("task.managers.rewards.lin_vel_z_l2.func=rewards.no_such_term", "unknown function 'rewards.no_such_term'"),
    ("task.managers.rewards.track_lin_vel_xy.params.std=null", "raised TypeError"),
    ("+task.managers.rewards.lin_vel_z_l2.params.gain=2", "unknown ['gain']"),
    ("task.managers.observations.policy.terms.actions.func=rewards.lin_vel_z_l2", "returned shape (8,)"),
    ("task.managers.terminations.time_out.func=rewards.lin_vel_z_l2", "expected bool"),
    ("~task.managers.rewards.track_ang_vel_z.params.std", "missing ['std']"),
])
def test_bad_term_config_fails_at_construction_naming_the_term(override, needle):
    cfg = compose("sac/g1_walk_flat/mujoco", 8, ["runtime=mba", override])
    with pytest.raises(TermConfigError) as e:
        make_env(cfg)
    msg = str(e.value)
    assert "task g1_walk_flat" in msg and "manager" in msg and needle in msg


# The first manager-based version's costs (reflab/manager/dev_costs.py) change how, not what.
EXACT_COSTS = ("PER_TERM_STATE", "PER_ENV_RESET")


@pytest.fixture
def costs(monkeypatch):
    def switch_on(*names):
        for name in names:
            monkeypatch.setattr(dev_costs, name, True)
    return switch_on


@pytest.mark.parametrize("case", ["flashsac/go2_joystick_flat/mujoco", "sac/g1_motion_tracking/motrix"])
def test_parity_holds_with_the_first_versions_costs(case, costs):
    off = ["task.episode_length_s=1.5", "task.action_scale=1.0"]
    direct = rollout(case, "direct", off, 80, seed=5)
    costs(*EXACT_COSTS)
    assert assert_same(direct, rollout(case, "mba", off, 80, seed=5)) > 0


def test_per_substep_dispatch_leaves_motrix_as_direct(costs):
    # the cost is MuJoCo's (dev_costs.PER_SUBSTEP_DISPATCH): MotrixSim steps once per control step
    case = "sac/g1_walk_flat/motrix"
    off = ["task.episode_length_s=1.5", "task.action_scale=1.0"]
    direct = rollout(case, "direct", off, 60, seed=2)
    costs("PER_SUBSTEP_DISPATCH", *EXACT_COSTS)
    assert assert_same(direct, rollout(case, "mba", off, 60, seed=2)) > 0


def test_per_substep_dispatch_on_mujoco_differs_only_by_solver_warmstart(costs):
    # the pool restarts the solver's warmstart at each dispatch: one control step
    # agrees to solver tolerance, not bit for bit
    case = "sac/g1_walk_flat/mujoco"
    direct = rollout(case, "direct", ["task.observation.noise=false"], 1)
    costs("PER_SUBSTEP_DISPATCH")
    mba = rollout(case, "mba", ["task.observation.noise=false"], 1)
    diff = np.abs(direct[0]["obs"] - mba[0]["obs"]).max()
    assert 0 < diff < 0.5
