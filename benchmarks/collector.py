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


def _phase(*path):
    """The benchmark of one phase: its mean over the run's vector steps, in seconds. asv names it
    by the class attribute it is bound to."""
    def entry(self, run, case):
        return self._sample(run, case, lambda r: _stat(r, *path))

    entry.unit = "seconds"
    return entry


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

    # a phase: the run's mean time per vector step (seconds), under the entry's keys
    entry_env_step = _phase("phase_ms_per_vector_step", "env_step_ms")
    entry_physics = _phase("physics_ms_per_vector_step")
    entry_step_core = _phase("env_step_timing_ms_per_vector_step", "step_core_ms")
    entry_update_state = _phase("env_step_timing_ms_per_vector_step", "update_state_ms")
    entry_reset_done = _phase("env_step_timing_ms_per_vector_step", "reset_done_ms")
    entry_replay = _phase("phase_ms_per_vector_step", "replay_ms")
    entry_bookkeeping = _phase("phase_ms_per_vector_step", "bookkeeping_ms")

    def entry_resets_per_step(self, run, case):
        # a count, not a time: the entry stores it in a TimingStats under *_ms keys
        return self._sample(run, case, lambda r: 1000.0 * _stat(r, "env_step_timing_ms_per_vector_step", "reset_done_count"))

    entry_resets_per_step.unit = "resets/step"
