"""What differs between targets, in one place.

How a side's environment is made, and the one-time preparation before measured
runs. asv's install step runs this module (``python -m mbaphases.targets install ...``
in the suite's folder; see asv.conf.json and asv.field.conf.json). It imports the
standard library only, so the demo config runs it with the asv environment's own
python, where nothing of this suite is installed:
* a target with a ``uv.lock`` gets exactly what its lock says, with the configured
  extras (``uv export --frozen`` then ``uv pip install`` into asv's environment: what
  ``uv sync --extra ...`` gives that commit), then the project itself without deps;
* a target without a lock gets the wheel asv built for the commit (or its checkout)
  with uv, its dependencies checked against what the environment holds and installed
  with pip only when something is missing or incompatible: switching sides costs a
  fraction of a second, not a pip run;
* a prepare command (e.g. fetching assets) runs once per environment and command.

Where the entry is and how it is run lives beside the benchmarks
(benchmarks/_target.py), which run inside the target's environment.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

# standard library only, like this module: both run with a target environment's python
from mbaphases import assets

SUITE_DIR = Path(__file__).resolve().parents[1]
PLUGIN_DIR = SUITE_DIR / "asv-plugin"
INSTALL_RECORD = "mbaphases-install.json"
PINNED_LOCK = "requirements.lock"  # a published side's exact package list (mbaphases.published)
LOCK_FILES = (PINNED_LOCK, "uv.lock")  # a side whose checkout has one gets an environment of its own
# asv's own packages in every environment, kept when a side's environment is made its lock
HARNESS = {"asv-runner", "asv-bench-mbaphases", "pip", "setuptools", "wheel", "uv", "virtualenv"}


class TargetError(Exception):
    pass


def uv_binary(install_into: Path | None = None) -> str:
    """uv from PATH or beside this python; with ``install_into`` (an environment's python)
    missing uv is installed there once, so a plain `asv run` finds it without the suite's
    environment on PATH."""
    found = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    if not Path(found).exists() and install_into is not None:
        _run([str(install_into), "-m", "pip", "install", "-q", "uv"], "installing uv into the asv environment")
        found = str(Path(install_into).parent / "uv")
    if not Path(found).exists():
        raise TargetError("uv is not installed in the suite's environment (pip install uv)")
    return found


@functools.lru_cache(maxsize=1)
def _pip_config() -> dict[str, str]:
    """pip's configuration files, merged as pip reads them (``global.find-links`` -> its value): uv
    reads none of it. ``pip config list``, not ``get``: get finds no key of the machine-wide files."""
    p = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False)
    settings = {}
    for line in p.stdout.splitlines() if p.returncode == 0 else []:
        key, _, value = line.partition("=")
        with contextlib.suppress(ValueError, SyntaxError):  # pip prints each value as a Python string literal
            settings[key] = ast.literal_eval(value)
    return settings


@functools.lru_cache(maxsize=1)
def uv_env() -> dict[str, str]:
    """pip's package sources for uv, which does not read pip's configuration (without
    them a lock resolution would take torch's multi-GB CUDA build from the index)."""
    env = {}
    links = os.environ.get("PIP_FIND_LINKS") or _pip_config().get("global.find-links", "")
    if links and "UV_FIND_LINKS" not in os.environ:
        env["UV_FIND_LINKS"] = links.replace("\n", " ").split()[0]
    return env


def pip_constraints() -> list[str]:
    """pip's constraint files (PIP_CONSTRAINT, else its configuration) as uv's arguments."""
    paths = os.environ.get("PIP_CONSTRAINT") or _pip_config().get("global.constraint", "")
    return [arg for path in paths.split() for arg in ("--constraint", path)]


def _run(cmd: list[str], what: str, cwd: Path | None = None, env: dict | None = None) -> str:
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False,
                       env={**os.environ, **uv_env(), **(env or {})})
    if p.returncode != 0:
        last = (p.stderr.strip() or p.stdout.strip() or "no output").splitlines()[-1]
        raise TargetError(f"{what} failed: {last}")
    return p.stdout


def install(env_dir: Path, checkout: Path, extras: list[str], prepare: str | None, wheel: Path | None = None) -> dict:
    env_dir, checkout = Path(env_dir), Path(checkout)
    python = env_dir / "bin" / "python"
    commit = os.environ.get("ASV_COMMIT", "unknown")
    uv = uv_binary(install_into=python)
    plugin = subprocess.run([str(python), "-c", "import asv_bench_mbaphases"], capture_output=True, check=False)
    if plugin.returncode != 0:
        _run([uv, "pip", "install", "--python", str(python), str(PLUGIN_DIR)], "installing the asv benchmark type")
    record = {"commit": commit, "extras": extras}
    lock = checkout / "uv.lock"
    if (checkout / PINNED_LOCK).is_file():
        record.update(_install_pinned_lock(uv, python, checkout, commit))
    elif lock.is_file():
        reqs = env_dir / "lock-requirements.txt"
        extra_args = [a for e in extras for a in ("--extra", e)]
        _run([uv, "export", "--frozen", "--no-hashes", "--no-emit-project", *extra_args, "-o", str(reqs)],
             f"uv export of {commit[:12]}'s uv.lock with extras {extras}", cwd=checkout)
        _run([uv, "pip", "install", "--python", str(python), "-r", str(reqs)],
             f"installing {commit[:12]}'s locked packages")
        _run([uv, "pip", "install", "--python", str(python), "--no-deps", "--reinstall-package",
              _project_name(checkout), str(checkout)], f"installing {commit[:12]} itself")
        record.update(installer="uv.lock", lock_sha256=hashlib.sha256(lock.read_bytes()).hexdigest())
    else:
        source = str(wheel) if wheel is not None else str(checkout)
        _run([uv, "pip", "install", "--python", str(python), "--no-deps", "--reinstall-package",
              _project_name(checkout), source], f"installing {commit[:12]}")
        check = subprocess.run([uv, "pip", "check", "--python", str(python)], capture_output=True, check=False)
        record["dependencies"] = "present"
        if check.returncode != 0:
            # a new environment, or dependencies that changed: uv resolves them with pip's local wheels
            # (uv_env) and constraints, and compiles them as pip would (about 10 s where pip took 24 s
            # for the demo target's, docs/log/measurements.md)
            _run([uv, "pip", "install", "--python", str(python), "--compile-bytecode", *pip_constraints(), source],
                 f"installing {commit[:12]}'s dependencies")
            record["dependencies"] = "installed by uv"
        record.update(installer="uv pip (no uv.lock)" + (", asv's wheel" if wheel is not None else ""),
                      lock_sha256=None)
    listed = json.loads(_run([uv, "pip", "list", "--python", str(python), "--format", "json"],
                             "listing the installed packages"))
    # an editable install (a checkout side's source tree) is named with its version and where it is
    record["installed"] = {x["name"]: x["version"] + (f" (editable, {x['editable_project_location']})"
                                                      if x.get("editable_project_location") else "")
                           for x in listed}
    if prepare:
        marker = env_dir / f".prepared-{hashlib.sha256(prepare.encode()).hexdigest()[:12]}"
        if not marker.exists():
            p = subprocess.run(prepare, shell=True, cwd=checkout, capture_output=True, text=True, check=False,
                               env={**os.environ, "PATH": f"{python.parent}:{os.environ.get('PATH', '')}"})
            if p.returncode != 0:
                last = (p.stderr.strip() or p.stdout.strip() or "no output").splitlines()[-1]
                raise TargetError(f"prepare command {prepare!r} failed for {commit[:12]}: {last}")
            marker.write_text(prepare + "\n")
        record["prepared"] = prepare
    (env_dir / INSTALL_RECORD).write_text(json.dumps(record, indent=2) + "\n")
    return record


def own_environment(checkout: Path) -> bool:
    """Whether a side's checkout says what its environment holds (a lock): two such sides cannot
    share one environment at the same time, as a paired runs them."""
    return any((Path(checkout) / name).is_file() for name in LOCK_FILES)


def runner_requirement() -> str:
    """asv's runner at the version of the driver's: a side's own environment runs what asv sends it."""
    return f"asv_runner=={metadata.version('asv_runner')}"


def side_environment(env_root: Path, checkout: Path, commit: str, python_version: str, install_command: list[str],
                     conf_dir: Path, runner_requirement: str) -> Path:
    """A side's own environment, for runs that need two sides installed at once (a pair): a
    virtual environment with asv's runner, then the asv config's own install step with the
    substitutions asv makes, so it holds what asv's environment holds for that commit. Made once
    per commit, install step and python (an unfinished one, which has no install record, is made
    again); returns its python."""
    key = hashlib.sha256(json.dumps([commit, python_version, install_command]).encode()).hexdigest()[:16]
    env_dir = Path(env_root) / key
    python = env_dir / "bin" / "python"
    if (env_dir / INSTALL_RECORD).is_file():
        return python
    shutil.rmtree(env_dir, ignore_errors=True)
    uv = uv_binary()
    _run([uv, "venv", "-q", "--python", python_version, str(env_dir)], f"making {commit[:12]}'s environment")
    _run([uv, "pip", "install", "-q", "--python", str(python), runner_requirement], "installing asv's runner")
    values = {"{env_dir}": str(env_dir), "{build_dir}": str(checkout), "{conf_dir}": str(conf_dir)}
    for line in install_command:
        for name, value in values.items():
            line = line.replace(name, value)
        args = shlex.split(line)
        cwd = None
        if args and args[0].startswith("in-dir="):
            cwd, args = Path(args[0].removeprefix("in-dir=")), args[1:]
        # the install record names the commit, as under asv
        _run(args, f"installing {commit[:12]} into its own environment", cwd=cwd, env={"ASV_COMMIT": commit})
    if not (env_dir / INSTALL_RECORD).is_file():
        raise TargetError(f"the install step {install_command} wrote no {INSTALL_RECORD} in {env_dir}")
    return python


def requirement_name(requirement: str) -> str:
    """The canonical package name of a requirement or a lock/freeze line (``Foo_Bar[x]==1``,
    ``foo-bar @ url``): lower case, runs of ``-_.`` as one ``-``."""
    name = re.split(r"[\s\[<>=!~;@]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def _install_pinned_lock(uv: str, python: Path, checkout: Path, commit: str) -> dict:
    """A side of the published target (mbaphases.published): the environment becomes exactly its
    lock (every package at its locked version, installed without resolving again; what the lock
    does not hold is removed, except asv's own harness), then the assets are placed."""
    lock = checkout / PINNED_LOCK
    # an editable line (a checkout side's source tree) names a path, not a package: what it
    # installs is removed with the rest and installed again from the lock
    wanted = {requirement_name(ln) for ln in lock.read_text().splitlines()
              if ln.strip() and not ln.startswith(("#", "-e "))}
    listed = json.loads(_run([uv, "pip", "list", "--python", str(python), "--format", "json"],
                             "listing the installed packages"))
    extra = sorted({requirement_name(x["name"]) for x in listed} - wanted - HARNESS)
    if extra:
        _run([uv, "pip", "uninstall", "--python", str(python), *extra], f"removing what {commit[:12]}'s lock lacks")
    _run([uv, "pip", "install", "--python", str(python), "--no-deps", "-r", str(lock)],
         f"installing {commit[:12]}'s locked packages")
    record = {"installer": "requirements.lock (exact, no resolution)",
              "lock_sha256": hashlib.sha256(lock.read_bytes()).hexdigest(), "removed": extra}
    side = checkout / "side.json"
    if side.is_file():
        record["side"] = json.loads(side.read_text()).get("definition")
    manifest = checkout / "assets.json"
    if manifest.is_file():
        root = _package_dir(python, "unilab")
        if root is None:
            raise TargetError(f"{commit[:12]}: the lock installs no unilab package to place the assets in")
        try:
            record["assets"] = assets.place(root / "assets", SUITE_DIR / ".asv" / "assets",
                                            json.loads(manifest.read_text()))
        except assets.AssetError as e:
            raise TargetError(str(e)) from None
    return record


def _package_dir(python: Path, package: str) -> Path | None:
    """Where a package is installed in an environment, found without importing it."""
    p = subprocess.run([str(python), "-c", "import importlib.util as u, sys; s = u.find_spec(sys.argv[1]); "
                        "print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')",
                        package], capture_output=True, text=True, check=False)
    return Path(p.stdout.strip()) if p.returncode == 0 and p.stdout.strip() else None


def _project_name(checkout: Path) -> str:
    try:
        return tomllib.loads((checkout / "pyproject.toml").read_text())["project"]["name"]
    except (OSError, KeyError, ValueError):
        raise TargetError(f"{checkout}/pyproject.toml names no project") from None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m mbaphases.targets")
    sub = p.add_subparsers(dest="command", required=True)
    i = sub.add_parser("install", help="install one side into asv's environment")
    i.add_argument("--env-dir", required=True)
    i.add_argument("--checkout", required=True)
    i.add_argument("--extras", default="", help="comma list of the target's extras")
    i.add_argument("--prepare", default="", help="one-time command before measured runs (shell)")
    i.add_argument("--wheel", default="", help="the wheel asv built for this commit (targets without a uv.lock)")
    args = p.parse_args(argv)
    try:
        install(Path(args.env_dir), Path(args.checkout), [e for e in args.extras.split(",") if e],
                args.prepare or None, Path(args.wheel) if args.wheel else None)
    except TargetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def conf_command(extras: list[str], prepare: str | None) -> str:
    """asv's install_command for the field profile (asv interpolates the braces)."""
    parts = [sys.executable, "-m", "mbaphases.targets", "install", "--env-dir", "{env_dir}",
             "--checkout", "{build_dir}", "--extras", ",".join(extras)]
    if prepare:
        parts += ["--prepare", prepare]
    return "in-dir={conf_dir} " + " ".join(shlex.quote(x) if "{" not in x else x for x in parts)


if __name__ == "__main__":
    sys.exit(main())
