"""Action terms."""
import numpy as np


class JointPositionAction:
    """Joint position targets around the default pose: one control target per
    control step, held by the backend over the substeps (one dispatch)."""

    def __init__(self, env, scale, default_joint_pos):
        self.scale = float(scale)
        self.default_joint_pos = np.asarray(default_joint_pos, dtype=np.float64)
        nu = env.backend.layout.nu
        if self.default_joint_pos.shape != (nu,):
            raise ValueError(f"default_joint_pos has {self.default_joint_pos.size} values, robot has {nu} actuators")

    def process(self, actions, ctrl):
        np.multiply(actions, self.scale, out=ctrl)
        ctrl += self.default_joint_pos
