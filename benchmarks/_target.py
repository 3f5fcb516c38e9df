"""What the benchmarks need to drive a target, stdlib only: the benchmarks run
in the target's own asv environment, where nothing of this suite is installed.
"""
from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib.util
import json
import math
import os
import platform
import re
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from importlib import metadata
from pathlib import Path

# where the field's collector entry has lived, newest first
ENTRY_PATHS = ("scripts/benchmark/rl/benchmark_offpolicy_collector_active.py",
               "benchmark/rl/benchmark_offpolicy_collector_active.py",
               "benchmark/benchmark_offpolicy_collector_active.py")
# measured runs must not reach out: assets and packages were fetched when the env was made
OFFLINE = {"HF_HUB_OFFLINE": "1", "UV_OFFLINE": "1", "PIP_NO_INDEX": "1", "UNILAB_OFFLINE": "1"}
SUITE_DIR = Path(os.environ.get("ASV_CONF_DIR") or Path(__file__).resolve().parents[1])
PACKAGES = ("numpy", "torch", "mujoco", "mujoco-uni-runtime", "motrixsim", "motrixsim-core",
            "hydra-core", "omegaconf", "asv", "asv_runner")
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY", "UNILAB_COLLECTOR_TORCH_THREADS")
BUSY_FRACTION = 0.25  # other processes using more than this share of the run's CPUs: flagged
STEAL_FRACTION = 0.05  # the hypervisor taking more than this share of the run's CPUs during it: flagged
LOCK_TIMEOUT_S = float(os.environ.get("MBAPHASES_LOCK_TIMEOUT", "3600"))


@contextlib.contextmanager
def hold_formal_run_lock(what: str):
    """Hold the formal-run lock for one entry run, whoever started asv.

    Under `mbaphases run` (which holds it for the whole run and names itself in the
    environment) the parent's hold counts. Otherwise wait for it, saying who holds it,
    up to MBAPHASES_LOCK_TIMEOUT seconds. Yields what the run's meta records: whether it
    ran alone, how long it waited, whom it waited for."""
    lock = suite_module("formal_lock")
    parent = os.environ.get(lock.HOLDER_VAR)
    if parent:
        yield {"alone": True, "held_by": parent, "waited_s": float(os.environ.get(lock.WAITED_VAR, 0))}
        return
    try:
        with lock.acquire(what, LOCK_TIMEOUT_S) as (waited, holder, _):
            yield {"alone": True, "held_by": f"this run (pid {os.getpid()})", "waited_s": waited, "waited_for": holder}
    except lock.LockBusy as e:
        # measured anyway, and recorded as not alone: the run is kept and shown, never dropped
        yield {"alone": False, "held_by": None, "waited_s": e.waited_s, "waited_for": e.holder, "timed_out": True}


def load_pins() -> dict:
    return suite_module("pins").for_benchmark(SUITE_DIR)


def pins_version(pins: dict) -> str:
    """The asv benchmark version: changes whenever a pinned value of what one case's run measures
    does (the profile). Not the list of cases: a run of some of them (mbaphases find) measures
    the same thing, and the loader keeps runs of another version apart."""
    key = {"profile": pins["active_profile"], "entry": "offpolicy_collector_active"}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def target_dir() -> tuple[Path, str]:
    """The commit's own checkout and its entry (relative path): the entry runs there,
    where it finds its configs relative to its own file, as in the field's repository."""
    candidates = []
    if os.environ.get("ASV_ENV_DIR"):
        candidates.append(Path(os.environ["ASV_ENV_DIR"]) / "project")  # asv's checkout of this commit
    if os.environ.get("MBAPHASES_TARGET_DIR"):
        candidates.append(Path(os.environ["MBAPHASES_TARGET_DIR"]))
    for c in candidates:
        for rel in ENTRY_PATHS:
            if (c / rel).is_file():
                return c, rel
    where = [str(c) for c in candidates] or ["ASV_ENV_DIR/project or MBAPHASES_TARGET_DIR (neither set)"]
    raise FileNotFoundError(f"no collector entry in {', '.join(where)}; paths tried: {', '.join(ENTRY_PATHS)}")


def _machine_from_asv_command() -> str | None:
    """The --machine of the asv command that started this benchmark (asv passes it to no
    benchmark process), read from the process tree where /proc has it."""
    pid = os.getppid()
    for _ in range(8):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        if "asv" in (Path(a).name for a in args[:3]):  # `asv ...` or `python -m asv ...`
            for i, a in enumerate(args):
                if a == "--machine" and i + 1 < len(args):
                    return args[i + 1]
                if a.startswith("--machine="):
                    return a.split("=", 1)[1]
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        if pid <= 1:
            return None
    return None


def machine_name() -> str:
    if os.environ.get("MBAPHASES_MACHINE"):
        return os.environ["MBAPHASES_MACHINE"]
    named = _machine_from_asv_command()
    if named:
        return named
    try:
        machines = [k for k in json.loads((Path.home() / ".asv-machine.json").read_text()) if k != "version"]
    except (OSError, ValueError):
        machines = []
    return machines[0] if len(machines) == 1 else platform.node()


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _cpu_jiffies(cpus: list[int] | None = None) -> tuple[int, int, int] | None:
    """(all, idle, steal) CPU time so far of ``cpus`` (the machine's when None), in clock ticks. Steal:
    time the hypervisor gave these CPUs to others, what most disturbs a run on a shared VM."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
        rows = [lines[0]] if cpus is None else [line for line in lines if line.startswith("cpu")
                                               and line[3:4].isdigit() and int(line.split()[0][3:]) in cpus]
        fields = [sum(col) for col in zip(*([int(x) for x in row.split()[1:]] for row in rows))]
    except (OSError, ValueError, IndexError):
        return None
    if len(fields) < 5:
        return None
    return sum(fields), fields[3] + fields[4], fields[7] if len(fields) > 7 else 0


def _own_cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the entry, once waited for)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _children_switches() -> tuple[int, int]:
    """(involuntary, voluntary) context switches of the finished children (the entry)."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_nivcsw, kids.ru_nvcsw


def host_load() -> dict:
    """Load average and frequency/governor (where readable), and the counters that
    busy_during() turns into other processes' CPU share, the steal share and the entry's
    context switches. Reads only: no sampling pause between runs.

    The counters are those of the CPUs this process may use (its affinity, which the entry
    inherits): work on other CPUs (another slot's pair, another runner pinned beside it) does not
    take this run's CPU time."""
    cpus = sorted(os.sched_getaffinity(0))
    return {
        "time": time.time(),
        "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "cur_freq_khz": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq"),
        "cpus": cpus,
        "cpu_jiffies": _cpu_jiffies(None if len(cpus) == os.cpu_count() else cpus),
        "own_cpu_s": _own_cpu_seconds(),
        "children_switches": _children_switches(),
    }


def busy_during(start: dict, end: dict, partner_share: float = 0.0) -> dict:
    """Over the run: the share of the run's CPUs that other processes used (their busy time less
    this process's and the entry's own CPU time), the share the hypervisor stole, and the entry's
    context switches (involuntary: it was preempted). Where a partner shares these CPUs
    (``partner_share`` of them) they are expected busy: only what is beyond it flags the run."""
    a, b = start.get("cpu_jiffies"), end.get("cpu_jiffies")
    busy = steal = None
    if a and b and b[0] > a[0]:
        tick = os.sysconf("SC_CLK_TCK")
        capacity_s = (b[0] - a[0]) / tick
        used_s = ((b[0] - a[0]) - (b[1] - a[1])) / tick
        busy = min(1.0, max(0.0, (used_s - (end["own_cpu_s"] - start["own_cpu_s"])) / capacity_s))
        if len(a) > 2 and len(b) > 2:
            steal = min(1.0, max(0.0, (b[2] - a[2]) / (b[0] - a[0])))
    out = {"cpu_busy_fraction": busy, "busy": bool(busy is not None and busy > BUSY_FRACTION + partner_share),
           **({"cpus": end["cpus"]} if end.get("cpus") and len(end["cpus"]) < (os.cpu_count() or 1) else {}),
           **({"partner_share": partner_share} if partner_share else {}),
           "steal_fraction": steal, "steal": bool(steal is not None and steal > STEAL_FRACTION),
           "seconds": end["time"] - start["time"]}
    sa, sb = start.get("children_switches"), end.get("children_switches")
    if sa and sb:
        out["involuntary_switches"], out["voluntary_switches"] = sb[0] - sa[0], sb[1] - sa[1]
    return out


def _torch_cuda() -> str | None:
    """torch.version.cuda read from torch's version file: importing torch here would add
    about a second between runs."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        tree = ast.parse((Path(list(spec.submodule_search_locations)[0]) / "version.py").read_text())
    except (OSError, SyntaxError):
        return None
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == "cuda" and isinstance(node.value, ast.Constant):
            return node.value.value
    return None


def suite_module(name: str):
    """A standard-library module of the suite (mbaphases/<name>.py), loaded by path: the
    suite is not installed in the target's environment, and one home describes hardware."""
    spec = importlib.util.spec_from_file_location(f"_mbaphases_{name}", SUITE_DIR / "mbaphases" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def environment() -> dict:
    """Hardware and software of the asv environment this process runs in."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "os": platform.platform(), "kernel": platform.release(), **suite_module("hardware").describe(),
        "python": platform.python_version(), "python_executable": sys.executable,
        "packages": versions, "torch_cuda": _torch_cuda(),
        "thread_env": {k: os.environ.get(k) for k in THREAD_VARS},
    }


def refuse_other_hardware() -> None:
    """Called when asv imports the benchmarks, before anything runs: appending to a machine whose
    stored runs were measured on other hardware stops asv there. (Failing later would make asv
    store a failed result, which replaces the samples it kept for that commit.)"""
    raw_root = Path(os.environ.get("MBAPHASES_RAW_DIR") or SUITE_DIR / "raw-runs")
    refused = other_hardware(raw_root / machine_name(), environment())
    if refused:
        raise RuntimeError(refused)


def other_hardware(machine_dir: Path, env: dict) -> str | None:
    """Why no run may be appended to this machine's results (``raw-runs/<machine>``): the runs
    stored under its name were measured on other hardware (None: same hardware, or none stored)."""
    if os.environ.get("MBAPHASES_ALLOW_OTHER_HARDWARE") == "1":
        return None
    hw = suite_module("hardware")
    stored = hw.stored_other(machine_dir, env)
    if stored is None:
        return None
    return (f"machine {Path(machine_dir).name!r} holds runs measured on other hardware ({hw.text(stored)}; "
            f"this host: {hw.text(env)}); name another machine, or set MBAPHASES_ALLOW_OTHER_HARDWARE=1")


CASE_LINE = re.compile(r"^\[(\d+)/(\d+)\] (\S+)")


def _run_with_progress(cmd, cwd, env, commit: str, run: int, at_case=None) -> subprocess.CompletedProcess:
    """Run the entry; its per-case progress lines (stderr) go to MBAPHASES_PROGRESS, a
    file `mbaphases run` reads to show a live line, and to ``at_case(proc, index, case)``."""
    progress = os.environ.get("MBAPHASES_PROGRESS")
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out_chunks = []
    reader = threading.Thread(target=lambda: out_chunks.append(proc.stdout.read()), daemon=True)
    reader.start()
    err_lines = []
    for line in proc.stderr:
        err_lines.append(line)
        m = CASE_LINE.match(line)
        if progress and m:
            state = {"commit": commit, "run": run, "case_index": int(m.group(1)), "cases": int(m.group(2)),
                     "case": m.group(3), "time": time.time()}
            try:
                Path(progress).write_text(json.dumps(state))
            except OSError:
                pass
        if at_case and m:
            at_case(proc, int(m.group(1)), m.group(3))
    proc.wait()
    reader.join()
    return subprocess.CompletedProcess(cmd, proc.returncode, "".join(out_chunks), "".join(err_lines))


def run_entry(pins: dict) -> dict:
    """One independent run: the entry in a fresh process over every case.

    The raw JSON/CSV, its log and a meta file (pins, commit, load, environment)
    are kept under raw-runs/<machine>/<commit>/run<k>.*; the raw runs alone
    rebuild every table."""
    prof = pins["active_profile"]
    try:
        target, entry_rel = target_dir()
    except FileNotFoundError as e:
        target, entry_rel, missing = None, None, str(e)
    commit = os.environ.get("ASV_COMMIT") or os.environ.get("MBAPHASES_COMMIT") or "unknown"
    machine = machine_name()
    out_dir = Path(os.environ.get("MBAPHASES_RAW_DIR") or SUITE_DIR / "raw-runs") / machine / commit
    env_now = environment()
    k, stem = _next_run(out_dir)
    # one `mbaphases run` is one batch; runs from plain asv are grouped by the day they ran
    batch = os.environ.get("MBAPHASES_BATCH") or f"asv-{time.strftime('%Y-%m-%d')}"
    meta = {"machine": machine, "commit": commit, "run": k, "batch": batch, "profile": prof, "cases": pins["cases"],
            "baseline": pins["baseline"], "candidates": pins.get("candidates") or [pins.get("candidate")],
            "version": pins_version(pins)}
    cmd = _entry_command(pins, entry_rel, stem)
    duet = duet_settings()
    share_cpu = bool(duet and duet["share_cpu"])
    env = side_env(prof)
    if share_cpu:
        # the two entries of the pair on one CPU, their collector loops in turns: the entry loads the
        # suite's protocol by its path (nothing of the suite in the side's environment)
        env.update(MBAPHASES_TURNS_MODULE=str(SUITE_DIR / "mbaphases" / "turns.py"),
                   MBAPHASES_TURNS_DIR=duet["dir"], MBAPHASES_TURNS_ROLE=str(duet["role"]))
    meta["command"] = cmd
    env_now["cpus"] = run_cpus(prof, env)
    with hold_formal_run_lock(f"entry run {stem}") as lock:
        meta["lock"] = lock
        if lock.get("timed_out") or target is None:
            why = missing if target is None else (f"not run: the formal-run lock stayed held by "
                                                  f"{lock['waited_for']} for {lock['waited_s']:.0f} s")
            # a failed run, reported per case, never skipped
            proc = subprocess.CompletedProcess(cmd, 1, "", why)
            meta["started"] = meta["ended"] = time.time()
        else:
            meta["load_start"] = host_load()
            meta["started"] = time.time()
            if duet:
                proc, meta["duet"] = _run_duet_entry(cmd, target, env, commit, k, duet)
            else:
                proc = _run_with_progress(cmd, target, env, commit, k)
            meta["ended"] = time.time()
    meta["load_end"] = host_load()
    if "load_start" in meta:
        # the counters are this run's CPUs (its slot): across CPUs the partner is on a slot of its own,
        # outside them; sharing one, the partner holds the slot whenever this side waits, by design
        partner = 1.0 if share_cpu else 0.0
        meta["load_during"] = busy_during(meta["load_start"], meta["load_end"], partner)
    meta["returncode"] = proc.returncode
    meta["environment"] = env_now
    meta["entry"] = {"checkout": str(target) if target else None, "path": entry_rel}
    # asv's environment, or the side's own that a duet made (the python running this)
    install = Path(os.environ.get("ASV_ENV_DIR") or sys.prefix) / "mbaphases-install.json"
    if install.is_file():
        # how this side's environment was made: its lock's hash and what got installed
        meta["environment"]["install"] = json.loads(install.read_text())
    write = suite_module("staging").write_text_atomic  # a run's files: complete, or not there
    write(Path(f"{stem}.log"), proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    results, errors = _case_outcomes(pins["cases"], Path(f"{stem}.json"), proc, share_cpu)
    meta["failed_cases"] = errors
    write(Path(f"{stem}.meta.json"), json.dumps(meta, indent=2) + "\n")
    if os.environ.get("MBAPHASES_PROFILE_FUNCTIONS") == "1" and target is not None:
        # after the measured run has ended, in processes of their own: never a sample
        # alone: the pair's turns were the measured run's
        alone = {k: v for k, v in env.items() if not k.startswith("MBAPHASES_TURN")}
        profile_functions(pins, target, entry_rel, out_dir / "profile" / batch, alone)
    return {"run": k, "results": results, "errors": errors}


# every pool a side may start: torch's and OpenMP's, MKL, OpenBLAS, numba
POOL_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")


def side_env(prof: dict) -> dict:  # not entry_*: asv would take it for a benchmark
    """The entry's environment: offline, every pool at the profile's threads where the run has the
    CPUs the profile asks for (the pinned program); on fewer CPUs (a pair's slot on a smaller host,
    a one-CPU runner) at as many threads as the run has CPUs: never more threads than CPUs."""
    have, want = len(os.sched_getaffinity(0)), suite_module("hardware").profile_cpus(prof)
    threads = str(min(have, want))
    return {**os.environ, **OFFLINE, "UNILAB_COLLECTOR_TORCH_THREADS": threads, **dict.fromkeys(POOL_VARS, threads),
            **({"OMP_WAIT_POLICY": "PASSIVE"} if have < want else {})}


def run_cpus(prof: dict, env: dict) -> dict:
    """The CPUs this run had (its affinity) against the profile's, and each pool's threads: runs
    with other CPU counts measure another program and are never compared (mbaphases.comparable)."""
    affinity = sorted(os.sched_getaffinity(0))
    return {"affinity": affinity, "count": len(affinity), "profile_asks": suite_module("hardware").profile_cpus(prof),
            "pools": {k: env.get(k) for k in ("UNILAB_COLLECTOR_TORCH_THREADS", *POOL_VARS)}}


DUET_WAIT_S = 1800.0  # the partner's case takes at most this long to reach the barrier


def duet_settings() -> dict | None:
    """This run's place in a duet (mbaphases run --duet), or None when it runs alone."""
    folder = os.environ.get("MBAPHASES_DUET_DIR")
    if not folder:
        return None
    return {"dir": folder, "pair": os.environ["MBAPHASES_DUET_PAIR"], "role": int(os.environ["MBAPHASES_DUET_ROLE"]),
            "cpu": int(os.environ["MBAPHASES_DUET_CPU"]), "cpus": sorted(os.sched_getaffinity(0)),
            "partner": os.environ["MBAPHASES_DUET_PARTNER"],
            "round": int(os.environ["MBAPHASES_DUET_ROUND"]),
            "share_cpu": os.environ.get("MBAPHASES_DUET_SHARE_CPU") == "1"}


def duet_barrier(folder: Path, step: str, role: int, timeout_s: float = DUET_WAIT_S) -> tuple[float, bool]:
    """Arrive at ``step`` and wait for the partner to arrive too (or to have ended: the runner
    marks each side's end). Returns (seconds waited, whether the partner arrived)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{step}.{role}").write_text(str(time.time()))
    other, ended = folder / f"{step}.{1 - role}", folder / f"ended.{1 - role}"
    started = time.time()
    while not other.exists():
        if ended.exists() or time.time() - started > timeout_s:
            return time.time() - started, False
        time.sleep(0.005)
    return time.time() - started, True


def _run_duet_entry(cmd: list[str], target: Path, env: dict, commit: str, k: int,
                    duet: dict) -> tuple[subprocess.CompletedProcess, dict]:
    """The entry over every case, as in a solo run, held at each case's start (its progress line)
    until the partner's entry reaches the same case, so the two measured windows overlap. One
    process a side: the interpreter's start is paid once, not once per case."""
    record = {**{key: duet[key] for key in ("pair", "round", "role", "cpu", "cpus", "partner", "share_cpu")},
              "threads": {key: env.get(key) for key in (*THREAD_VARS, "NUMBA_NUM_THREADS")},
              "affinity": sorted(os.sched_getaffinity(0)), "held_at": "case progress line", "cases": {}}

    def at_case(proc, index: int, case: str) -> None:
        # stopped where it printed the line (before the case's environment is built), until the
        # partner arrives; a few milliseconds of the case's set-up may run before the stop lands
        with contextlib.suppress(ProcessLookupError):  # ended right after its line: nothing to hold
            os.kill(proc.pid, signal.SIGSTOP)
        try:
            waited, met = duet_barrier(Path(duet["dir"]), f"case{index - 1}", duet["role"])
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
        record["cases"][case] = {"waited_s": round(waited, 3), "partner_arrived": met, "started": time.time()}

    proc = _run_with_progress(cmd, target, env, commit, k, at_case)
    return proc, record


def _next_run(out_dir: Path) -> tuple[int, Path]:
    """The next run number under ``out_dir`` (never one already used) and its files' stem."""
    k = suite_module("raw_runs").next_run(out_dir)
    return k, out_dir / f"run{k}"


def _entry_command(pins: dict, entry_rel: str | None, stem: Path) -> list[str]:
    """The entry's command line for the active profile, writing its JSON and CSV at ``stem``."""
    prof = pins["active_profile"]
    cmd = [sys.executable, entry_rel or "(no entry)", "--cases", ",".join(pins["cases"]),
           "--num-envs", str(prof["num_envs"]), "--warmup-steps", str(prof["warmup_steps"]),
           "--measure-steps", str(prof["measure_steps"]),
           "--replay-capacity-steps", str(prof["replay_capacity_steps"]),
           "--out-json", f"{stem}.json", "--out-csv", f"{stem}.csv", "--continue-on-error"]
    for override in prof.get("overrides", []):
        cmd += ["--override", override]
    return cmd


NO_TURNS = ("the entry did not take turns with its partner on their shared CPU (--duet-share-cpu needs an entry "
            "that loads MBAPHASES_TURNS_MODULE: mbaphases/turns.py)")


def _case_outcomes(cases: list[str], out_json: Path, proc, turns_expected: bool = False) -> tuple[dict, dict]:
    """Per case: its result, or why it failed (every pinned case is one or the other: a case the
    entry did not report failed with the entry's last line). With ``turns_expected`` (a duet on one
    shared CPU) a case measured without taking turns failed: it ran beside its partner, not in turns."""
    doc = json.loads(out_json.read_text()) if out_json.is_file() else None
    results, errors = {}, {}
    for r in (doc or {}).get("results", []):
        c = r["case"]
        name = f"{c['algo']}/{c['task']}/{c['sim']}"
        thr = r.get("collector_active_steps_per_sec")
        if not isinstance(thr, (int, float)) or isinstance(thr, bool) or not math.isfinite(thr) or thr <= 0:
            # a measurement that cannot be one is a failed case, never a sample
            errors[name] = f"invalid throughput {thr!r}"
            continue
        if turns_expected and not r.get("turns"):
            errors[name] = NO_TURNS
            continue
        results[name] = r
    for e in (doc or {}).get("errors", []):
        errors[e["case"]] = f"{e['type']}: {e['message']}"
    tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
    # a negative status is the signal that ended the entry (the out-of-memory killer's SIGKILL)
    how = (f"entry ended by {signal.Signals(-proc.returncode).name}" if proc.returncode < 0
           else f"entry exit {proc.returncode}")
    for case in cases:
        if case not in results and case not in errors:
            errors[case] = f"{how}: {tail[0]}"
    return results, errors


PROFILE_RATE_HZ = 500  # pins profile_rate_hz overrides: py-spy stops the target for every native unwind
PROFILE_MIN_STEPS = 200  # the profiled run measures at least this many steps, for enough samples; its figures are not used


def case_slug(case: str) -> str:
    return case.replace("/", "__")


def profile_side() -> None:
    """One side's function profiles alone, outside every measured run (the runner's profile wave
    after a shared-CPU duet's rounds, mbaphases.runner), with the measured runs' settings: every
    pool at one thread, the entry on its one CPU, no partner."""
    pins = load_pins()
    target, entry_rel = target_dir()
    out = (Path(os.environ.get("MBAPHASES_RAW_DIR") or SUITE_DIR / "raw-runs") / machine_name()
           / os.environ["MBAPHASES_COMMIT"] / "profile" / os.environ["MBAPHASES_BATCH"])
    profile_functions(pins, target, entry_rel, out, side_env(pins["active_profile"]))


def profile_functions(pins: dict, target: Path, entry_rel: str, out: Path, env: dict) -> None:
    """One extra entry run per case under the sampling profiler (py-spy, raw folded stacks, with
    native frames where py-spy can read them, subprocesses followed, idle samples kept so the main
    thread's waits on the physics workers count), once per side and batch. Its figures never enter a table or asv: the
    folded stacks are kept beside the raw runs with the command that made them."""
    record = out / "profile.json"
    if record.exists():
        return
    out.mkdir(parents=True, exist_ok=True)
    pyspy = env.get("MBAPHASES_PYSPY") or shutil.which("py-spy")
    prof = pins["active_profile"]
    rate = int(pins.get("profile_rate_hz", PROFILE_RATE_HZ))
    steps = max(int(prof["measure_steps"]), PROFILE_MIN_STEPS)
    doc = {"profiler": pyspy, "rate_hz": rate, "measure_steps": steps, "cases": {},
           "started": time.time()}
    for case in pins["cases"]:
        folded = out / f"{case_slug(case)}.folded"
        entry = [sys.executable, entry_rel, "--cases", case, "--num-envs", str(prof["num_envs"]),
                 "--warmup-steps", str(prof["warmup_steps"]),
                 "--measure-steps", str(steps),
                 "--replay-capacity-steps", str(prof["replay_capacity_steps"]),
                 "--out-json", str(out / f"{case_slug(case)}.json")]
        for override in prof.get("overrides", []):
            entry += ["--override", override]
        row = {"folded": folded.name}
        if not pyspy:
            row["error"] = "py-spy not found (MBAPHASES_PYSPY or PATH)"
            doc["cases"][case] = row
            continue
        # Python frames by default, read without pausing the target (--nonblocking): py-spy
        # otherwise stops the whole process at every sample, the stops that slowed profiled runs
        # 1.5-6x; a sample may then be a torn stack now and then, which a table of hundreds of
        # samples absorbs. pins profile_native = true adds native frames (a phase whose time is in
        # native code); py-spy must pause the target to unwind them.
        for native in ((True, False) if pins.get("profile_native") else (False,)):
            cmd = [pyspy, "record", "--format", "raw", "--rate", str(rate), "--idle", "--threads",
                   "--subprocesses", "--native" if native else "--nonblocking", "-o", str(folded), "--", *entry]
            p = subprocess.run(cmd, cwd=target, env=env, capture_output=True, text=True, check=False)
            row.update(command=cmd, returncode=p.returncode, native=native, paused=native)
            if p.returncode == 0 and folded.is_file():
                break
            row["error"] = (p.stderr.strip().splitlines() or ["no output"])[-1]
        if p.returncode == 0:
            row.pop("error", None)
        doc["cases"][case] = row
    doc["ended"] = time.time()
    suite_module("staging").write_text_atomic(record, json.dumps(doc, indent=2) + "\n")
