"""What runs between and around the entry processes: the load record of a run and
the install step that switches sides."""
import subprocess
import sys
import time

from benchmarks import _target


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
    import torch

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
