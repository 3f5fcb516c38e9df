"""A track benchmark whose ``rounds`` asv discovers.

asv_runner's own TrackBenchmark records no ``rounds``, so a plain ``asv run`` or
``asv continuous`` runs a track benchmark once per commit whatever its class
declares; only ``-a rounds=N`` on the command line repeats it. This type reads
``rounds`` from the benchmark (as TimeBenchmark does) so discovery stores it and
asv runs that many rounds, interleaved between commits, one fresh
``setup_cache`` (one entry process) per round. Methods named ``entry_*``.
"""
import re

from asv_runner.benchmarks._base import _get_first_attr
from asv_runner.benchmarks.track import TrackBenchmark


class EntryRunBenchmark(TrackBenchmark):
    name_regex = re.compile("^entry_.+$")

    def __init__(self, name, func, attr_sources):
        TrackBenchmark.__init__(self, name, func, attr_sources)
        self.rounds = int(_get_first_attr(attr_sources, "rounds", 1))


export_as_benchmark = [EntryRunBenchmark]
