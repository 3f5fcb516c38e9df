"""Vectorized quaternion helpers (wxyz, rows = envs)."""
from __future__ import annotations

import numpy as np


def quat_rotate_inverse(q: np.ndarray, v: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Rotate world vectors ``v (N, 3)`` (or one ``(3,)``) into the frames ``q (N, 4)``."""
    w = q[:, 0:1]
    u = q[:, 1:4]
    v = np.broadcast_to(v, u.shape)
    a = v * (2.0 * w * w - 1.0)
    b = np.cross(u, v) * (2.0 * w)
    c = u * (2.0 * np.einsum("ij,ij->i", u, v)[:, None])
    if out is None:
        return a - b + c
    np.subtract(a, b, out=out)
    out += c
    return out


def projected_gravity(q: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    return quat_rotate_inverse(q, np.array([0.0, 0.0, -1.0]), out=out)


def yaw_quat(yaw: np.ndarray) -> np.ndarray:
    q = np.zeros((len(yaw), 4))
    q[:, 0] = np.cos(yaw / 2)
    q[:, 3] = np.sin(yaw / 2)
    return q


def quat_angle(q1: np.ndarray, q2: np.ndarray) -> np.ndarray:
    """Rotation angle between two orientations, in [0, pi]."""
    dot = np.abs(np.einsum("ij,ij->i", q1, q2))
    return 2.0 * np.arccos(np.clip(dot, 0.0, 1.0))
