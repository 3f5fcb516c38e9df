"""Term functions of the manager-based runtime: plain functions of the env.

A term config names one as ``<module>.<function>`` (for example
``rewards.track_lin_vel_xy_exp``). Observation, reward and termination terms
are ``func(env, rows, **params)`` returning ``(n, dim)``, ``(n,)`` float or
``(n,)`` bool for the env rows ``rows`` (a slice for all envs, or ids). State
quantities come from ``env.state``, read once per step.
"""
from reflab.manager.mdp import actions, commands, events, observations, rewards, terminations

MODULES = {m.__name__.rsplit(".", 1)[1]: m for m in (actions, commands, events, observations, rewards, terminations)}
