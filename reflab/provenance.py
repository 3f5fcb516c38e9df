"""What the field's entry does not record: package versions, host, threads, git."""
from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

PACKAGES = ("numpy", "torch", "mujoco", "mujoco-uni-runtime", "motrixsim", "motrixsim-core",
            "hydra-core", "omegaconf")
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY",
               "UNILAB_COLLECTOR_TORCH_THREADS")


def package_versions() -> dict[str, str | None]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def host() -> dict[str, str]:
    import torch

    return {
        "node": platform.node(),
        "platform": platform.platform(),
        "kernel": platform.release(),
        "cpu": _cpu_model(),
        "logical_cpus": str(os.cpu_count()),
        "python": platform.python_version(),
        "torch_num_threads": str(torch.get_num_threads()),
        "torch_cuda": str(torch.version.cuda),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
    }


def thread_env() -> dict[str, str | None]:
    return {k: os.environ.get(k) for k in THREAD_VARS}


def git_state(path: Path) -> dict[str, str | bool | None]:
    def git(*args):
        return subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True, check=False)

    sha = git("rev-parse", "HEAD")
    if sha.returncode != 0:
        return {"sha": None, "dirty": None}
    return {"sha": sha.stdout.strip(), "dirty": bool(git("status", "--porcelain").stdout.strip())}


def config_hash(resolved: dict) -> str:
    """Stable across runs and machines: sha256 of the canonical JSON."""
    blob = json.dumps(resolved, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
