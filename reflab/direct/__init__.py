"""Direct runtime: one hand-written vectorized env body per task family."""
from reflab.direct.motion_tracking import MotionTrackingEnv
from reflab.direct.velocity_tracking import VelocityTrackingEnv

DIRECT_ENVS = {
    "go2_joystick_flat": VelocityTrackingEnv,
    "g1_walk_flat": VelocityTrackingEnv,
    "g1_motion_tracking": MotionTrackingEnv,
}
