"""The field's off-policy collector benchmark, per case.

One asv round = one fresh run of the target's benchmark entry over every case
(setup_cache); every entry_ method reads its metric from that run. A metric's
value per run is the mean over the run's recorded vector steps, returned as one
asv sample, so rounds accumulate one sample per independent run.

``entry_`` methods are of the benchmark type in asv-plugin/ (installed into every
asv environment): unlike asv's own track type it declares ``rounds``, so plain
``asv run`` and ``asv continuous`` take the pinned number of independent runs.

Every metric is lower-is-better, as asv reads every row: times are seconds per
vector step, and throughput is stored as seconds per million env steps
(1e6 / collector_active_steps_per_sec), so a slower candidate reads as worse.
"""
from benchmarks._target import load_pins, pins_version, refuse_other_hardware, run_entry

PINS = load_pins()
refuse_other_hardware()


def _stat(result, *path):
    node = result
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    if node is None:
        return float("nan")  # the target does not report this one
    return float(node["mean_ms"]) / 1000.0


class CollectorActive:
    params = PINS["cases"]
    param_names = ["case"]
    version = pins_version(PINS)
    rounds = int(PINS["runs"])
    repeat = 1
    number = 1
    timeout = 7200

    def setup_cache(self):
        return run_entry(PINS)

    setup_cache.timeout = 7200

    @staticmethod
    def _sample(run, case, value_of):
        if case in run["errors"]:
            raise RuntimeError(f"case {case} failed in run {run['run']}: {run['errors'][case]}")
        return {"samples": [value_of(run["results"][case])], "number": 1}

    def entry_time_per_million_steps(self, run, case):
        return self._sample(run, case, lambda r: 1e6 / float(r["collector_active_steps_per_sec"]))

    entry_time_per_million_steps.unit = "seconds"

    def entry_active_time(self, run, case):
        return self._sample(run, case, lambda r: r["total_active_ms"] / r["measure_steps"] / 1000.0)

    entry_active_time.unit = "seconds"

    def entry_env_step(self, run, case):
        return self._sample(run, case, lambda r: _stat(r, "phase_ms_per_vector_step", "env_step_ms"))

    entry_env_step.unit = "seconds"

    def entry_physics(self, run, case):
        return self._sample(run, case, lambda r: _stat(r, "physics_ms_per_vector_step"))

    entry_physics.unit = "seconds"

    def entry_step_core(self, run, case):
        return self._sample(run, case, lambda r: _stat(r, "env_step_timing_ms_per_vector_step", "step_core_ms"))

    entry_step_core.unit = "seconds"

    def entry_update_state(self, run, case):
        return self._sample(run, case, lambda r: _stat(r, "env_step_timing_ms_per_vector_step", "update_state_ms"))

    entry_update_state.unit = "seconds"

    def entry_reset_done(self, run, case):
        return self._sample(run, case, lambda r: _stat(r, "env_step_timing_ms_per_vector_step", "reset_done_ms"))

    entry_reset_done.unit = "seconds"

    def entry_replay(self, run, case):
        return self._sample(run, case, lambda r: _stat(r, "phase_ms_per_vector_step", "replay_ms"))

    entry_replay.unit = "seconds"

    def entry_bookkeeping(self, run, case):
        return self._sample(run, case, lambda r: _stat(r, "phase_ms_per_vector_step", "bookkeeping_ms"))

    entry_bookkeeping.unit = "seconds"

    def entry_resets_per_step(self, run, case):
        # a count, not a time: the entry stores it in a TimingStats under *_ms keys
        return self._sample(run, case, lambda r: 1000.0 * _stat(r, "env_step_timing_ms_per_vector_step", "reset_done_count"))

    entry_resets_per_step.unit = "resets/step"
