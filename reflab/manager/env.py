"""The manager-based env: a task is its ``task.managers`` configuration."""
from __future__ import annotations

from omegaconf import OmegaConf

from reflab.manager import dev_costs

from reflab.manager.managers import (ActionManager, CommandManager, EventManager, ObservationManager,
                                     RewardManager, TerminationManager)
from reflab.manager.state import StateCache
from reflab.runtime import VecEnv


class ManagerBasedEnv(VecEnv):
    def __init__(self, cfg):
        super().__init__(cfg)
        self.task_name = cfg.task.name
        m = OmegaConf.to_container(cfg.task.managers, resolve=True)
        self.state = StateCache(self, **m.get("state", {}))
        self.command_manager = CommandManager(self, m.get("commands", {}))
        self.action_manager = ActionManager(self, m["actions"])
        self._ctrl = self.action_manager.ctrl
        self.event_manager = EventManager(self, m.get("events", {}))
        self.state.refresh(slice(None))
        self.command_manager.update_metrics(slice(None))
        groups = ["policy"] + (["critic"] if cfg.algo.asymmetric_critic else [])
        self.observation_manager = ObservationManager(self, m["observations"], groups)
        self.reward_manager = RewardManager(self, m["rewards"])
        self.termination_manager = TerminationManager(self, m["terminations"])
        policy = self.observation_manager.groups["policy"]
        critic = self.observation_manager.groups.get("critic")
        self.obs_dim, self.critic_dim = policy.dim, (critic.dim if critic else 0)
        self.obs_policy, self.terminal_obs_policy = policy.buffer, policy.terminal
        self.obs_critic = critic.buffer if critic else None
        self.terminal_obs_critic = critic.terminal if critic else None
        self.reward_term_names = self.reward_manager.names
        self.reward_terms = self.reward_manager.values
        self.reset_all()

    def _apply_action(self, actions):
        self.action_manager.process(actions)

    def _step_physics(self):
        if not dev_costs.PER_SUBSTEP_DISPATCH or self.backend.name != "mujoco":
            return super()._step_physics()
        return self.backend.step_each_substep(self._ctrl, self.decimation, self.action_manager.apply)

    def _update_state(self):
        self.episode_step += 1
        self.command_manager.compute(self.step_dt)
        self.state.refresh(slice(None))
        self.state.update_contacts()
        self.command_manager.update_metrics(slice(None))
        self.reward_manager.compute(self.step_dt, self.reward)
        self.state.advance_air_time(self.step_dt)
        self.termination_manager.compute(self.terminated, self.truncated)
        self.terminated[self._diverged] = True
        self.observation_manager.compute(slice(None))
        self.action_manager.post_step()

    def _save_terminal_obs(self, ids):
        if dev_costs.PER_ENV_RESET:
            for k in range(len(ids)):
                self.observation_manager.save_terminal(ids[k:k + 1])
            return
        self.observation_manager.save_terminal(ids)

    def _reset_envs(self, ids):
        self.command_manager.reset(ids)
        self.event_manager.reset(ids)
        self.action_manager.reset(ids)
        self.episode_step[ids] = 0
        self.state.reset(ids)
        if dev_costs.PER_ENV_RESET:
            # the first version: env by env, each reset refreshing every env's state,
            # command metrics and observation terms, of which it keeps its own row
            for k in range(len(ids)):
                self.state.refresh(slice(None))
                self.command_manager.update_metrics(slice(None))
                self.observation_manager.compute_keeping(ids[k:k + 1])
            return
        self.command_manager.update_metrics(ids)
        self.observation_manager.compute(ids)
