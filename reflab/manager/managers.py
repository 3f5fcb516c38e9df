"""Managers: each resolves its terms once at construction (function, params,
output shape), preallocates its buffers, and loops over its terms per step."""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import numpy as np

from reflab.manager import dev_costs
from reflab.manager.mdp import MODULES
from reflab.runtime import add_uniform_noise

# arguments a term receives from its manager, never from its params
MANAGER_ARGS = {"env", "rows", "ids", "qpos", "qvel"}


class TermConfigError(ValueError):
    pass


@dataclass
class Term:
    name: str
    func: object
    params: dict
    cfg: dict = field(default_factory=dict)


def _term_error(env, manager, term, msg) -> TermConfigError:
    return TermConfigError(f"task {env.task_name}, {manager} manager, term {term!r}: {msg}")


def resolve_term(env, manager: str, name: str, cfg: dict, allowed_keys: set[str]) -> Term:
    extra = set(cfg) - allowed_keys - {"func", "params"}
    if extra:
        raise _term_error(env, manager, name, f"unknown keys {sorted(extra)}; valid: {sorted(allowed_keys | {'func', 'params'})}")
    ref = cfg.get("func")
    if not isinstance(ref, str) or ref.count(".") != 1:
        raise _term_error(env, manager, name, f"func {ref!r} must be '<module>.<function>' with module one of {sorted(MODULES)}")
    mod_name, fn_name = ref.split(".")
    module = MODULES.get(mod_name)
    func = getattr(module, fn_name, None) if module else None
    if func is None or fn_name.startswith("_"):
        choices = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                         and getattr(v, "__module__", "") == module.__name__) if module else sorted(MODULES)
        raise _term_error(env, manager, name, f"unknown function {ref!r}; valid: {', '.join(choices)}")
    params = dict(cfg.get("params") or {})
    sig = inspect.signature(func)
    expected = {p for p in sig.parameters if p not in MANAGER_ARGS}
    missing, unknown = expected - set(params), set(params) - expected
    if missing or unknown:
        raise _term_error(env, manager, name, f"{ref} takes params {sorted(expected)}; missing {sorted(missing)}, unknown {sorted(unknown)}")
    return Term(name, func, params, {k: v for k, v in cfg.items() if k not in ("func", "params")})


def probe(env, manager, term, width, kind):
    """Call a term once at construction and check what it returns."""
    try:
        value = term.func(env, slice(None), **term.params)
    except Exception as e:
        raise _term_error(env, manager, term.name, f"raised {type(e).__name__}: {e}") from e
    _check_output(env, manager, term, value, width, kind)
    return value


def _check_output(env, manager, term, value, width, kind):
    n = env.num_envs
    if not isinstance(value, np.ndarray):
        raise _term_error(env, manager, term.name, f"returned {type(value).__name__}, expected a numpy array")
    shape_ok = value.shape == (n,) if width is None else (value.ndim == 2 and value.shape[0] == n)
    if not shape_ok:
        want = f"({n},)" if width is None else f"({n}, dim)"
        raise _term_error(env, manager, term.name, f"returned shape {value.shape}, expected {want}")
    if kind == "bool" and value.dtype != np.bool_:
        raise _term_error(env, manager, term.name, f"returned dtype {value.dtype}, expected bool")
    if kind == "float" and value.dtype.kind not in "fb":
        raise _term_error(env, manager, term.name, f"returned dtype {value.dtype}, expected a float array")


def _reread_for_term(env, rows) -> None:
    # the first version's step path: each term read and derived the state on its own
    if dev_costs.PER_TERM_STATE and isinstance(rows, slice):
        env.state.reread()


class ActionManager:
    def __init__(self, env, cfg):
        if len(cfg) != 1:
            raise TermConfigError(f"task {env.task_name}, action manager: exactly one action term is supported, got {list(cfg)}")
        (name, term_cfg), = cfg.items()
        term = resolve_term(env, "action", name, term_cfg, set())
        self.term = term.func(env, **term.params)
        self.default_joint_pos = self.term.default_joint_pos
        N, nu = env.num_envs, env.backend.layout.nu
        self.actions = np.zeros((N, nu))
        self.last_actions = np.zeros((N, nu))
        self.ctrl = np.tile(self.default_joint_pos, (N, 1))

    def process(self, actions):
        np.copyto(self.actions, actions)
        self.apply()

    def apply(self):
        """Actions -> the control target (per physics substep in the first version)."""
        self.term.process(self.actions, self.ctrl)

    def post_step(self):
        np.copyto(self.last_actions, self.actions)

    def reset(self, ids):
        self.actions[ids] = 0.0
        self.last_actions[ids] = 0.0


class CommandManager:
    def __init__(self, env, cfg):
        self.terms = {}
        for name, term_cfg in cfg.items():
            term = resolve_term(env, "command", name, term_cfg, set())
            self.terms[name] = term.func(env, **term.params)

    def get(self, name):
        return self.terms[name]

    def compute(self, dt):
        for t in self.terms.values():
            t.compute(dt)

    def update_metrics(self, rows):
        for t in self.terms.values():
            t.update_metrics(rows)

    def reset(self, ids):
        for t in self.terms.values():
            t.reset(ids)


class ObservationGroup:
    """Terms write straight into their column slice of the group's buffer; noise
    is one pass over the buffer with a per-column scale, then one clip pass."""

    def __init__(self, env, name, cfg):
        self.env, self.name = env, name
        self.terms = [resolve_term(env, f"observation[{name}]", n, c, {"scale", "noise"})
                      for n, c in cfg["terms"].items()]
        self.add_noise = bool(cfg.get("noise", False))
        self.clip = cfg.get("clip")
        self.slices, noise, start = [], [], 0
        for term in self.terms:
            value = probe(env, f"observation[{name}]", term, "2d", "float")
            width = value.shape[1]
            self.slices.append(slice(start, start + width))
            noise.append(np.full(width, float(term.cfg.get("noise", 0.0))))
            start += width
        self.dim = start
        self.noise_scale = np.concatenate(noise).astype(np.float32)
        self.buffer = np.zeros((env.num_envs, self.dim), dtype=np.float32)
        self.terminal = np.zeros_like(self.buffer)
        self._noise = np.zeros_like(self.buffer)
        self.nonfinite_rows = 0

    def _term_values(self, rows, reread: bool = False) -> list[np.ndarray]:
        values = []
        for term in self.terms:
            if reread:
                _reread_for_term(self.env, rows)
            value = term.func(self.env, rows, **term.params)
            scale = term.cfg.get("scale")
            values.append(value if scale is None else value * scale)
        return values

    def compute(self, rows):
        env, out = self.env, self.buffer
        if dev_costs.PER_TERM_STATE and isinstance(rows, slice):
            # the first version: per-term temporaries, one concatenation, a NaN check
            block = np.concatenate(self._term_values(rows, reread=True), axis=1)
            self.nonfinite_rows += int((~np.isfinite(block)).any(axis=1).sum())
            out[rows] = block
        else:
            for term, sl in zip(self.terms, self.slices):
                value = term.func(env, rows, **term.params)
                scale = term.cfg.get("scale")
                out[rows, sl] = value if scale is None else value * scale
        self._noise_and_clip(rows)

    def compute_keeping(self, ids):
        """Every term over every env; only the rows ``ids`` are kept (the first version's reset)."""
        self.buffer[ids] = np.concatenate([v[ids] for v in self._term_values(slice(None))], axis=1)
        self._noise_and_clip(ids)

    def _noise_and_clip(self, rows):
        env, out = self.env, self.buffer
        if self.add_noise:
            add_uniform_noise(env.rng["noise"], out, rows, self.noise_scale, self._noise)
        if self.clip is not None:
            if isinstance(rows, slice):
                np.clip(out, -self.clip, self.clip, out=out)
            else:
                out[rows] = np.clip(out[rows], -self.clip, self.clip)


class ObservationManager:
    def __init__(self, env, cfg, groups):
        self.groups = {g: ObservationGroup(env, g, cfg[g]) for g in groups}

    def compute(self, rows):
        # the critic group reads no noise, so group order does not matter
        for g in self.groups.values():
            g.compute(rows)

    def compute_keeping(self, ids):
        for g in self.groups.values():
            g.compute_keeping(ids)

    def save_terminal(self, ids):
        for g in self.groups.values():
            g.terminal[ids] = g.buffer[ids]


class RewardManager:
    def __init__(self, env, cfg):
        self.env = env
        self.terms = [resolve_term(env, "reward", n, c, {"weight"}) for n, c in cfg.items()]
        for t in self.terms:
            if "weight" not in t.cfg:
                raise _term_error(env, "reward", t.name, "missing weight")
            probe(env, "reward", t, None, "float")
        self.names = tuple(t.name for t in self.terms)
        self.weights = np.array([float(t.cfg["weight"]) for t in self.terms])
        self.values = np.zeros((env.num_envs, len(self.terms)), dtype=np.float32)

    def compute(self, dt, out):
        env, v = self.env, self.values
        for i, t in enumerate(self.terms):
            _reread_for_term(env, slice(None))
            v[:, i] = t.func(env, slice(None), **t.params)
        v *= self.weights * dt
        np.sum(v, axis=1, out=out)


class TerminationManager:
    def __init__(self, env, cfg):
        self.env = env
        self.terms = [resolve_term(env, "termination", n, c, {"time_out"}) for n, c in cfg.items()]
        for t in self.terms:
            probe(env, "termination", t, None, "bool")

    def compute(self, terminated, truncated):
        terminated[:] = False
        truncated[:] = False
        for t in self.terms:
            _reread_for_term(self.env, slice(None))
            target = truncated if t.cfg.get("time_out", False) else terminated
            target |= t.func(self.env, slice(None), **t.params)


class EventManager:
    """Reset-time events edit one staged state; the backend is reset once."""

    def __init__(self, env, cfg):
        self.env = env
        self.terms = [resolve_term(env, "event", n, c, {"enabled"}) for n, c in cfg.items()]
        self.terms = [t for t in self.terms if t.cfg.get("enabled", True)]

    def reset(self, ids):
        b = self.env.backend
        qpos = np.tile(b.home_qpos, (len(ids), 1))
        qvel = np.zeros((len(ids), b.layout.nv))
        for t in self.terms:
            t.func(self.env, ids, qpos, qvel, **t.params)
        if dev_costs.PER_ENV_RESET:
            # the first version: the engine is reset one env at a time
            for k in range(len(ids)):
                b.reset(ids[k:k + 1], qpos[k:k + 1], qvel[k:k + 1])
            return
        b.reset(ids, qpos, qvel)
