"""What runs between and around the entry processes: the load record of a run and
the install step that switches sides."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from benchmarks import _target
from mbaphases import hardware, inputs, load
from mbaphases.errors import UsageError
from mbaphases.run import prepare


def test_other_processes_cpu_during_a_run_is_measured():
    # own work (this process and a child it waited for) is not counted as other load
    start = _target.host_load()
    subprocess.run([sys.executable, "-c", "sum(i * i for i in range(6_000_000))"], check=True)
    quiet = _target.busy_during(start, _target.host_load())
    # a process that is not ours (not waited for within the window) spinning one core of two
    hog = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 2.0: pass"])
    try:
        time.sleep(0.3)
        start = _target.host_load()
        time.sleep(1.0)
        busy = _target.busy_during(start, _target.host_load())
    finally:
        hog.wait()
    assert busy["busy"] and busy["cpu_busy_fraction"] >= 0.3, busy
    assert quiet["cpu_busy_fraction"] < busy["cpu_busy_fraction"], (quiet, busy)
    assert 0.9 < busy["seconds"] < 5


def test_torch_cuda_is_read_without_importing_torch():
    code = ("import sys; sys.path.insert(0, '.'); from benchmarks import _target; "
            "print(_target._torch_cuda()); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=_target.SUITE_DIR, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == [str(torch.version.cuda), "False"]


def test_install_step_runs_with_a_bare_python():
    """asv.conf.json runs `python -m mbaphases.targets` with the asv environment's python,
    where nothing of this suite is installed: the module needs the standard library only."""
    p = subprocess.run([sys.executable, "-S", "-m", "mbaphases.targets", "install", "--help"],
                       cwd=_target.SUITE_DIR, capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr
    assert "--wheel" in p.stdout


def _side(root, value):
    (root / "side_probe").mkdir(parents=True)
    (root / "side_probe" / "__init__.py").write_text(f"VALUE = {value!r}\n")
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "side-probe"\nversion = "0.1.0"\ndependencies = ["six"]\n\n'
        '[tool.setuptools]\npackages = ["side_probe"]\n')
    return root


@pytest.mark.slow  # real venvs and installs
def test_switching_sides_installs_the_side_and_fetches_dependencies_only_when_missing(tmp_path):
    """The install step as asv runs it for a target without a uv.lock, in a new environment
    whose PATH has no uv: uv is installed into it once, the first side's dependency comes
    through uv, the second side (same version number) replaces the first without pip."""
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    path = os.pathsep.join([str(env_dir / "bin"), "/usr/bin", "/bin"])
    records = []
    for value in ("first", "second"):
        checkout = _side(tmp_path / value, value)
        p = subprocess.run([str(python), "-m", "mbaphases.targets", "install", "--env-dir", str(env_dir),
                            "--checkout", str(checkout)], cwd=_target.SUITE_DIR, capture_output=True, text=True,
                           env={**os.environ, "PATH": path}, check=False, timeout=600)
        assert p.returncode == 0, p.stderr
        records.append(json.loads((env_dir / "mbaphases-install.json").read_text()))
        installed = subprocess.run([str(python), "-c", "import side_probe, six; print(side_probe.VALUE)"],
                                   capture_output=True, text=True, check=True).stdout.strip()
        assert installed == value
    assert (env_dir / "bin" / "uv").is_file()
    assert [r["dependencies"] for r in records] == ["installed by uv", "present"]
    assert "six" in records[1]["installed"] and records[1]["installer"] == "uv pip (no uv.lock)"


def test_steal_and_context_switches_from_recorded_counters():
    """A test cannot make the hypervisor steal: the arithmetic on recorded /proc/stat and
    getrusage counters instead (10 ms ticks; 1000 ticks of all CPUs over the run)."""
    start = {"time": 0.0, "cpu_jiffies": (1000, 400, 10), "own_cpu_s": 0.0, "children_switches": (5, 10)}
    end = {"time": 5.0, "cpu_jiffies": (2000, 1200, 110), "own_cpu_s": 1.0, "children_switches": (25, 40)}
    d = _target.busy_during(start, end)
    tick = __import__("os").sysconf("SC_CLK_TCK")
    assert d["steal_fraction"] == 0.1 and d["steal"] is True
    assert d["involuntary_switches"] == 20 and d["voluntary_switches"] == 30
    assert abs(d["cpu_busy_fraction"] - max(0.0, (200 / tick - 1.0) / (1000 / tick))) < 1e-12
    calm = _target.busy_during(start, {**end, "cpu_jiffies": (2000, 1200, 50)})
    assert calm["steal_fraction"] == 0.04 and calm["steal"] is False
    # a run meta carrying a flagged steal share is listed per run by the loader
    assert any("STEAL" in n and "10.0%" in n for n in load.run_flags({"load_during": d}))
    # older metas, without steal counters, still read
    old = _target.busy_during({**start, "cpu_jiffies": (1000, 400)}, {**end, "cpu_jiffies": (2000, 1200)})
    assert old["steal_fraction"] is None and old["steal"] is False
    # a run's own CPUs: their rows of /proc/stat, which add up to the machine's line
    every = _target._cpu_jiffies(sorted(range(os.cpu_count())))
    machine = _target._cpu_jiffies()
    assert all(abs(x - y) <= 10 * os.cpu_count() for x, y in zip(every, machine)), (every, machine)
    assert any("of CPU 1 used by other processes" in n
               for n in load.busy_notes({"load_during": {"busy": True, "cpu_busy_fraction": 0.5, "cpus": [1]}}))


def test_a_real_run_records_steal_and_switches():
    start = _target.host_load()
    subprocess.run([sys.executable, "-c", "sum(range(3_000_000))"], check=True)
    d = _target.busy_during(start, _target.host_load())
    assert 0.0 <= d["steal_fraction"] <= 1.0
    assert d["voluntary_switches"] + d["involuntary_switches"] >= 1


def test_appending_to_a_machine_of_other_hardware_is_refused(tmp_path):
    here = hardware.describe()
    machine = tmp_path / "raw-runs" / "m" / "abc"
    machine.mkdir(parents=True)
    (machine / "run1.meta.json").write_text(json.dumps({"environment": {**here, "memory": "23.6 GiB"
                                                                        if here["memory"] == "23.5 GiB" else here["memory"]}}))
    prepare.check_same_hardware(tmp_path / "raw-runs", "m")  # the same hardware (RAM class, not the exact MemTotal)
    assert _target.other_hardware(machine.parent, here) is None
    (machine / "run1.meta.json").write_text(json.dumps({"environment": {**here, "cpu": "AMD EPYC 9654"}}))
    with pytest.raises(UsageError, match="other hardware.*AMD EPYC 9654.*--allow-other-hardware"):
        prepare.check_same_hardware(tmp_path / "raw-runs", "m")
    assert "AMD EPYC 9654" in _target.other_hardware(machine.parent, here)
    name = prepare.default_machine("demo")
    assert name.endswith(f"-{hardware.fingerprint(here)}-demo")
    assert hardware.fingerprint({**here, "cpu": "AMD EPYC 9654"}) != hardware.fingerprint(here)


@pytest.mark.parametrize("name", sorted(p.name for p in (Path(__file__).resolve().parents[2]).glob("pins*.toml")))
def test_every_shipped_pins_file_passes_the_pins_schema_with_each_profile(name):
    path = Path(__file__).resolve().parents[2] / name
    first = inputs.load_active_pins(path)
    for profile in first["profiles"]:
        pins = inputs.load_active_pins(path, profile)
        assert pins["active_profile"]["name"] == profile and pins["cases"]
    labels = [first["baseline"]["label"], *(c["label"] for c in first["candidates"])]
    assert len(set(labels)) == len(labels)


@pytest.mark.two_cpus
def test_a_run_counts_only_other_work_on_its_own_cpus():
    """A run pinned to one CPU (a one-CPU runner, a pair's slot) is flagged for a process spinning on
    that CPU, not for one spinning on another: the CPU time it could have had is its own CPUs'."""
    mine, other = sorted(os.sched_getaffinity(0))[:2]
    probe = ("import json, time\nfrom benchmarks import _target\nstart = _target.host_load()\ntime.sleep(1.0)\n"
             "print(json.dumps(_target.busy_during(start, _target.host_load())))")
    spin = "import time\nt = time.time()\nwhile time.time() - t < 3.0: pass"
    seen = {}
    for where in (other, mine):
        hog = subprocess.Popen(["taskset", "-c", str(where), sys.executable, "-c", spin])
        try:
            time.sleep(0.3)
            out = subprocess.run(["taskset", "-c", str(mine), sys.executable, "-c", probe], cwd=_target.SUITE_DIR,
                                 capture_output=True, text=True, check=True).stdout
            seen[where] = json.loads(out)
        finally:
            hog.wait()
    assert not seen[other]["busy"] and seen[other]["cpu_busy_fraction"] < 0.25, seen
    assert seen[mine]["busy"] and seen[mine]["cpu_busy_fraction"] > 0.3 and seen[mine]["cpus"] == [mine], seen
    assert any(f"of CPU {mine} used" in n for n in load.busy_notes({"load_during": seen[mine]}))
