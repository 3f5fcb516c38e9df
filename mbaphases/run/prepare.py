"""What a batch needs before its units run: the formal-run lock, the target repository and its
commits, the sides, asv's machine and results, each side's environment for pairs."""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import tomllib
from contextlib import contextmanager
from pathlib import Path

from mbaphases import formal_lock, hardware, targets
from mbaphases.errors import UsageError

LockBusy = formal_lock.LockBusy


@contextmanager
def formal_run_lock(what: str, timeout_s: float = 7200.0, out=sys.stderr):
    """Machine-wide: formal runs never overlap (mbaphases.formal_lock). Yields the seconds
    waited; the entry runs it starts see the holder in their environment and count this
    hold as theirs."""
    with formal_lock.acquire(what, timeout_s, out) as (waited, _, me):
        os.environ[formal_lock.HOLDER_VAR] = me
        os.environ[formal_lock.WAITED_VAR] = f"{waited:.1f}"
        try:
            yield waited
        finally:
            os.environ.pop(formal_lock.HOLDER_VAR, None)
            os.environ.pop(formal_lock.WAITED_VAR, None)


def git(repo, *args, env: dict | None = None, refuse: type[Exception] = UsageError) -> str:
    """git's output; a failure is ``refuse`` with git's last line (a node refusing a block raises its own)."""
    p = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False,
                       env={**os.environ, **env} if env else None)
    if p.returncode != 0:
        raise refuse(f"git {' '.join(args)} in {repo}: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else 'failed'}")
    return p.stdout.strip()


def resolve_ref(repo: Path, ref: str) -> str:
    p = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                       capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise UsageError(f"unknown revision {ref!r} in {repo}")
    return p.stdout.strip()


def default_machine(profile: str, duet: bool = False) -> str:
    """<host>-<hardware fingerprint>-<profile>: a new host never appends to another's results
    by accident (host names repeat across VMs), and other pinned sizes never share a machine.
    Paired runs have a machine of their own: never pooled with solo runs."""
    return f"{platform.node() or 'host'}-{hardware.fingerprint(hardware.describe())}-{profile}" + ("-duet" if duet else "")


def pyspy_path() -> str:
    """The py-spy binary installed with the suite (it profiles the target's process from outside)."""
    here = Path(sys.executable).parent / "py-spy"
    found = str(here) if here.is_file() else shutil.which("py-spy")
    if not found:
        raise UsageError("--profile-functions needs py-spy (a dependency of the suite: pip install 'py-spy>=0.4,<0.5')")
    return found


def check_same_hardware(raw_dir: Path, machine: str) -> None:
    """Appending to a machine whose stored runs were measured on other hardware is refused:
    runs of two hardwares under one name would be pooled into one side."""
    here = hardware.describe()
    stored = hardware.stored_other(raw_dir / machine, here)
    if stored is not None:
        raise UsageError(f"--machine {machine}: its runs were measured on other hardware ({hardware.text(stored)}; "
                         f"this host: {hardware.text(here)}); name another machine, or pass "
                         "--allow-other-hardware to append anyway (the report then gates each hardware apart)")


def ensure_machine(conf: Path, machine: str) -> None:
    p = subprocess.run([sys.executable, "-m", "asv", "machine", "--yes", "--machine", machine, "--config", str(conf)],
                       capture_output=True, text=True, check=False)
    if p.returncode != 0:
        said = (p.stderr.strip() or p.stdout.strip() or "no output").splitlines()[-1].lstrip("· ")
        raise UsageError(f"asv machine --machine {machine} with {conf}: {said}")


def field_conf(template: Path, repo: str, package: str | None, out: Path, settings: dict | None = None) -> Path:
    """asv config for the field's repository: "repo" (URL or path), the package, the
    Python version and the install step with the field profile's extras and prepare
    command (pins [field])."""
    settings = settings or {}
    text = template.read_text()
    if package is None and Path(repo).is_dir():
        try:
            package = tomllib.loads((Path(repo) / "pyproject.toml").read_text())["project"]["name"]
        except (OSError, KeyError, ValueError):
            package = None
    if package is None:
        raise UsageError(f"cannot read the package name of {repo}; pass --field-package NAME")
    repo_value = str(Path(repo).resolve()) if Path(repo).is_dir() else repo
    install = targets.conf_command(list(settings.get("extras", [])), settings.get("prepare"))
    for key, value in (("FIELD_REPO", repo_value), ("FIELD_PACKAGE", package),
                       ("FIELD_PYTHON", settings.get("python", f"{sys.version_info.major}.{sys.version_info.minor}")),
                       ("FIELD_INSTALL", install)):
        text = text.replace(f'"{key}"', json.dumps(value)).replace(key, value)
    out.write_text(text)
    return out


def resolve_sides(pins: dict, repo_path: Path | None, only: list[str] | None) -> list[dict]:
    """Baseline first, then the candidates (those named by ``only``), each with its SHA.

    A ref that does not resolve, or two sides on one commit, is refused."""
    sides = [{"role": "baseline", **pins["baseline"]}] + [{"role": "candidate", **c} for c in pins["candidates"]]
    if only:
        labels = [x["label"] for x in sides]
        unknown = [o for o in only if o not in labels]
        if unknown:
            raise UsageError(f"--sides {unknown[0]!r} is not a side; valid: {', '.join(labels)}")
        sides = [x for x in sides if x["role"] == "baseline" or x["label"] in only]
        if len(sides) < 2:
            raise UsageError("--sides names no candidate; give at least one besides the baseline")
    seen = {}
    for x in sides:
        x["sha"] = resolve_ref(repo_path, x["ref"]) if repo_path is not None else x["ref"]
        if x["sha"] in seen:
            raise UsageError(f"{x['label']!r} ({x['ref']}) and {seen[x['sha']]!r} are the same commit {x['sha'][:12]}")
        seen[x["sha"]] = x["label"]
    return sides


def worktrees(suite_dir: Path, repo_path: Path, shas: list[str]) -> Path:
    worktrees = suite_dir / ".asv" / "worktrees"
    for sha in shas:
        wt = worktrees / sha
        if not wt.exists():
            git(repo_path, "worktree", "add", "--detach", "-f", str(wt), sha)
    return worktrees


def side_pythons(conf: dict, conf_path: Path, suite_dir: Path, repo_path: Path, sides: list[dict],
                 python: str | None, out) -> dict[str, str]:
    """Each side's python in pairs. Sides whose checkout carries a lock (a published side, a field
    repository's commit) each get an environment of their own, made once (mbaphases.targets), as
    the two of a pair run installed at the same time; the demo target's sides share one (``python``,
    else this one) and run from their own checkouts."""
    shas = [x["sha"] for x in sides]
    trees = worktrees(suite_dir, repo_path, shas)
    own = [x for x in sides if targets.own_environment(trees / x["sha"])]
    if not own:
        return dict.fromkeys(shas, python or sys.executable)
    if python is not None:
        raise UsageError(f"--python {python} with --design pairs or turns: the sides {', '.join(x['label'] for x in own)} carry a lock "
                         "and each run in an environment of its own; leave --python out")
    pythons = dict.fromkeys(shas, sys.executable)
    for x in own:
        print(f"pair environment of {x['label']} ({x['ref']})", file=out, flush=True)
        try:
            pythons[x["sha"]] = str(targets.side_environment(
                suite_dir / ".asv" / "duet-env", trees / x["sha"], x["sha"], str(conf["pythons"][0]),
                list(conf.get("install_command") or []), conf_path.parent, targets.runner_requirement()))
        except targets.TargetError as e:
            raise UsageError(f"side {x['label']!r}: {e}") from None
    return pythons


def local_repo(conf: dict, suite_dir: Path) -> Path | None:
    """The target repository on this machine (None: a URL asv clones)."""
    repo = conf["repo"]
    repo_path = (suite_dir / repo) if not re.match(r"^\w+://", repo) else None
    if repo_path is not None and not repo_path.exists():
        raise UsageError(f"target repository {repo_path} not found (make it with: mbaphases demo-repo)")
    return repo_path


def set_aside_unreadable_results(machine_results: Path, out) -> list[Path]:
    """asv rewrites a commit's results file in place: a full disk leaves it truncated, and asv then
    refuses every later run of that commit (it cannot append to it). Such a file is renamed aside
    (``<name>.unreadable-<time>``, never read as results), said in one line; its samples are the
    raw runs', which the report reads."""
    moved = []
    for path in sorted(machine_results.glob("*.json")):
        if path.name == "machine.json":
            continue
        try:
            json.loads(path.read_text())
        except (OSError, ValueError) as e:
            aside = path.with_name(f"{path.name}.unreadable-{time.strftime('%Y%m%dT%H%M%S')}")
            path.rename(aside)
            print(f"asv's results file {path} cannot be read ({type(e).__name__}; a full disk truncates it): kept as "
                  f"{aside.name}; its runs are in the raw runs", file=out, flush=True)
            moved.append(aside)
    return moved


def publish(conf_path: Path) -> int:
    return subprocess.run([sys.executable, "-m", "asv", "publish", "--config", str(conf_path)],
                          cwd=Path(conf_path).resolve().parent, check=False).returncode
