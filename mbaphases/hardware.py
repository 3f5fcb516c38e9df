"""What hardware a run was measured on, and its short fingerprint.

Standard library only: the benchmarks load this file by path inside the
target's asv environment (where the suite is not installed), so the run metas
and the suite's machine names describe hardware the same way.

Absolute throughputs are comparable only on one hardware: CPU model, logical
cores, RAM class and GPU. The host name is not hardware (two VMs may share it)."""
from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
from pathlib import Path

# the fields of a run's recorded environment that make its hardware
KEYS = ("cpu", "logical_cpus", "memory", "gpu")
# test-only: a node of a test's fleet passes for another hardware class (never set outside tests)
TEST_LABEL_VAR = "MBAPHASES_TEST_HARDWARE_LABEL"


def describe() -> dict:
    """This host: CPU model, logical and physical cores, memory, GPU."""
    cpu, physical, phys_id = platform.processor() or platform.machine(), set(), None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
            elif line.startswith("physical id"):
                phys_id = line.split(":", 1)[1].strip()
            elif line.startswith("core id"):
                physical.add((phys_id, line.split(":", 1)[1].strip()))
    except OSError:
        pass
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    gpu = "none"
    if shutil.which("nvidia-smi"):
        p = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
        gpu = p.stdout.strip() or "none"
    label = os.environ.get(TEST_LABEL_VAR)
    if label:  # a test's second hardware class on one host, named as such in every record
        cpu = f"{cpu} [test hardware label {label}]"
    return {"cpu": cpu, "logical_cpus": os.cpu_count(), "physical_cores": len(physical) or None,
            "memory": mem, "gpu": gpu}


def profile_cpus(profile: dict) -> int:
    """The CPUs a pinned profile's program uses: its torch pool's threads (the largest pool a profile
    pins). A pair's slot is this many CPUs; a run on fewer runs a smaller program."""
    return int(profile["torch_threads"])


def memory_class(memory) -> str | None:
    """'23.5 GiB' -> '24 GiB': the kernel's reserve moves MemTotal a little between
    identical hosts; a different RAM size is another class."""
    if memory is None:
        return None
    try:
        return f"{round(float(str(memory).split()[0]))} GiB"
    except (ValueError, IndexError):
        return str(memory)


def key(env: dict) -> dict:
    """The hardware part of a recorded environment, memory as its class (None: not recorded)."""
    out = {k: env.get(k) for k in KEYS}
    out["memory"] = memory_class(out["memory"])
    out["logical_cpus"] = None if out["logical_cpus"] is None else str(out["logical_cpus"])
    return out


def fingerprint(env: dict) -> str:
    """Six hex digits naming the hardware of a recorded environment."""
    return hashlib.sha256(json.dumps(key(env), sort_keys=True).encode()).hexdigest()[:6]


def stored_other(machine_dir: Path, env: dict) -> dict | None:
    """The recorded environment of the runs stored under a machine (``raw-runs/<machine>``), when
    their hardware is not ``env``'s; None when it is, or nothing is stored."""
    for meta_path in sorted(Path(machine_dir).glob("*/run*.meta.json")):
        try:
            stored = json.loads(meta_path.read_text()).get("environment") or {}
        except (OSError, ValueError):
            continue
        return stored if stored and fingerprint(stored) != fingerprint(env) else None
    return None


def text(env: dict) -> str:
    """The hardware in words, for notes and error lines."""
    k = key(env)
    return ", ".join(f"{name} {k[name]}" for name in KEYS if k[name] is not None) or "not recorded"
