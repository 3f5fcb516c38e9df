"""Both physics backends behind one interface, on the real engines."""
import numpy as np
import pytest

from reflab import ASSETS_DIR
from reflab.mathutil import quat_rotate_inverse
from reflab.sim import make_backend

STAND = np.array([0, 0.8, -1.5] * 2 + [0, 1.0, -1.5] * 2)


def standing(backend, n):
    qpos = np.tile(backend.home_qpos, (n, 1))
    qpos[:, 2] = 0.32
    qpos[:, 7:] = STAND
    backend.reset(np.arange(n), qpos, np.zeros((n, backend.layout.nv)))


@pytest.mark.parametrize("name", ["mujoco", "motrix"])
def test_backend_conventions_are_shared(name):
    b = make_backend(name, ASSETS_DIR / "go2.xml", 8, 1)
    try:
        standing(b, 8)
        for _ in range(20):
            b.step(np.tile(STAND, (8, 1)), 4)
        assert b.qpos.dtype == np.float64 and b.sensordata.dtype == np.float64
        # wxyz: the standing robot is nearly upright, w close to 1
        assert (b.root_quat[:, 0] > 0.99).all()
        np.testing.assert_allclose(b.sensor("base_quat"), b.root_quat, atol=2e-3)
        assert (b.root_pos[:, 2] > 0.2).all()
        feet_z = b.sensor("FL_foot_pos")[:, 2]
        assert (np.abs(feet_z) < 0.05).all()
        assert b.physics_ns > 0
    finally:
        b.close()


def test_both_engines_agree_on_a_standing_robot():
    out = {}
    for name in ("mujoco", "motrix"):
        b = make_backend(name, ASSETS_DIR / "go2.xml", 4, 1)
        standing(b, 4)
        for _ in range(25):
            b.step(np.tile(STAND, (4, 1)), 4)
        out[name] = (b.root_pos.copy(), quat_rotate_inverse(b.root_quat, np.array([0, 0, -1.0])))
        b.close()
    # different solvers by design: agree on the pose, not to the digit
    np.testing.assert_allclose(out["mujoco"][0][:, 2], out["motrix"][0][:, 2], atol=0.02)
    np.testing.assert_allclose(out["mujoco"][1], out["motrix"][1], atol=0.05)


@pytest.mark.parametrize("name", ["mujoco", "motrix"])
def test_partial_reset_touches_only_given_envs(name):
    b = make_backend(name, ASSETS_DIR / "go2.xml", 6, 1)
    try:
        standing(b, 6)
        for _ in range(5):
            b.step(np.tile(STAND, (6, 1)), 4)
        before = b.qpos.copy()
        target = before[[1, 4]].copy()
        target[:, 0] += 1.0
        b.reset(np.array([1, 4]), target, np.zeros((2, b.layout.nv)))
        np.testing.assert_allclose(b.qpos[[1, 4], :3], target[:, :3], atol=1e-5)
        np.testing.assert_array_equal(b.qpos[[0, 2, 3, 5]], before[[0, 2, 3, 5]])
    finally:
        b.close()


@pytest.mark.parametrize("name", ["mujoco", "motrix"])
def test_diverged_env_is_reset_and_counted(name):
    b = make_backend(name, ASSETS_DIR / "go2.xml", 4, 1)
    try:
        standing(b, 4)
        qvel = np.zeros((1, b.layout.nv))
        qvel[0, 6:] = 1e5  # an exploded state
        b.reset(np.array([2]), b.qpos[[2]].copy(), qvel)
        diverged = b.step(np.tile(STAND, (4, 1)), 4)
        assert 2 in diverged.tolist()
        assert b.diverged_count >= 1
        assert np.isfinite(b.qpos).all() and np.isfinite(b.qvel).all()
        assert np.abs(b.qvel[2]).max() < 1e3
    finally:
        b.close()
