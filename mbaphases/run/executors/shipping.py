"""A fleet whose nodes do not share the driver's files (``--fleet-files shipped``): what a block
needs reaches its node, and the node makes the rest itself.

- The suite's own files (asv's config, the benchmarks, the benchmark type, the suite's package):
  Ray's ``runtime_env`` ``working_dir``, uploaded once a batch and unpacked on every node; a block
  runs in it.
- The target's commits: one git bundle of the batch's commits (put in Ray's object store once),
  fetched by each node into a repository of its own, checked out there.
- Each side's environment: made on the node from the side's lock by the step the driver itself uses
  (mbaphases.targets.side_environment), once per node and commit; its install record's lock hash
  must be the one the driver reads from the commit (the same lock gives the same packages). A node
  that cannot make an environment, or makes one of another lock, says why and is refused for the
  batch; its blocks go to the other nodes.

What a node makes lives in its cache folder (``$MBAPHASES_FLEET_CACHE``, else
``~/.cache/mbaphases-fleet``), prepared under a lock: two nodes of one host share it.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from mbaphases import targets
from mbaphases.run.prepare import git

CACHE_VAR = "MBAPHASES_FLEET_CACHE"
FILES = ("shared", "shipped")
# what the batch's nodes never need of the suite's folder: stored results, environments, the target's
# checkouts (they go as a bundle), the suite's own tests and docs
NOT_SHIPPED = ["/.asv/", "/.git/", "/.venv/", "/results/", "/raw-runs/", "/reports/", "/html/", "/docs/", "/tests/",
               "__pycache__/", "*.egg-info/", "/asv-plugin/build/"]
BUNDLE_REFS = "refs/mbaphases-fleet"


class NodeRefused(Exception):
    """Why this node cannot run the batch's blocks (its environment, its checkout)."""


def runtime_env(suite_dir: Path, repo_path: Path | None, conf: dict) -> dict:
    """Ray's runtime environment of a shipped batch: the suite's folder as every block's working folder,
    less what no node needs (the target's repository goes as a bundle; asv's results, environments and
    pages of this config stay with the driver)."""
    excludes = list(NOT_SHIPPED)
    inside = [repo_path] + [suite_dir / conf[k] for k in ("results_dir", "html_dir", "env_dir") if conf.get(k)]
    for folder in inside:
        if folder is not None and folder.resolve().is_relative_to(suite_dir.resolve()):
            excludes.append("/" + folder.resolve().relative_to(suite_dir.resolve()).as_posix() + "/")
    return {"working_dir": str(suite_dir), "excludes": excludes}


def _git(repo: Path, *args: str) -> str:
    return git(repo, *args, refuse=NodeRefused)


def bundle(repo_path: Path, shas: list[str]) -> bytes:
    """A git bundle holding ``shas`` and their history, each under a ref of its own. Made in a scratch
    repository that borrows the target's objects, so the target's own refs are never touched."""
    with tempfile.TemporaryDirectory(prefix="mbaphases-bundle-") as tmp:
        scratch = Path(tmp) / "repo"
        subprocess.run(["git", "init", "-q", str(scratch)], check=True)
        objects = _git(repo_path, "rev-parse", "--path-format=absolute", "--git-common-dir")
        (scratch / ".git" / "objects" / "info" / "alternates").write_text(str(Path(objects) / "objects") + "\n")
        for sha in shas:
            _git(scratch, "update-ref", f"{BUNDLE_REFS}/{sha}", sha)
        _git(scratch, "bundle", "create", "-q", str(Path(tmp) / "b.bundle"), "--all")
        return (Path(tmp) / "b.bundle").read_bytes()


def lock_hashes(repo_path: Path, shas: list[str]) -> dict[str, str | None]:
    """Per commit, the sha256 of the lock its checkout carries (None: no lock; the side runs in the
    suite's own environment), read from the commit itself."""
    out = {}
    for sha in shas:
        out[sha] = None
        for name in targets.LOCK_FILES:
            p = subprocess.run(["git", "-C", str(repo_path), "show", f"{sha}:{name}"], capture_output=True, check=False)
            if p.returncode == 0:
                out[sha] = hashlib.sha256(p.stdout).hexdigest()
                break
    return out


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_VAR) or Path.home() / ".cache" / "mbaphases-fleet")


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def checkouts(cache: Path, repo_key: str, shas: list[str], bundle_bytes: bytes) -> Path:
    """The commits checked out on this node (from the bundle where its repository lacks them); returns
    the folder holding one checkout per commit. Each commit is named by a ref of its own: one that
    arrived only as another's history (a parent) is fetched again, so that it is kept however the
    refs of earlier batches go."""
    repo = cache / "repos" / repo_key
    if not (repo / ".git").is_dir():
        repo.mkdir(parents=True, exist_ok=True)
        _git(repo, "init", "-q")
    missing = [s for s in shas if subprocess.run(["git", "-C", str(repo), "rev-parse", "-q", "--verify",
                                                  f"{BUNDLE_REFS}/{s}^{{commit}}"],
                                                 capture_output=True, check=False).returncode != 0]
    if missing:
        with tempfile.NamedTemporaryFile(dir=cache, suffix=".bundle") as f:
            f.write(bundle_bytes)
            f.flush()
            _git(repo, "fetch", "-q", f.name, f"+{BUNDLE_REFS}/*:{BUNDLE_REFS}/*")
    trees = cache / "worktrees" / repo_key
    for sha in shas:
        if not (trees / sha).exists():
            _git(repo, "worktree", "add", "--detach", "-f", str(trees / sha), sha)
    return trees


def environments(cache: Path, trees: Path, locks: dict[str, str | None], conf: dict, suite_dir: Path) -> dict[str, str]:
    """Each side's python on this node: the node's own (the one running the suite) for a side without
    a lock, else an environment made from the side's lock, checked against the driver's lock hash."""
    pythons = {}
    for sha, expected in locks.items():
        if expected is None:
            pythons[sha] = sys.executable
            continue
        try:
            python = targets.side_environment(cache / "duet-env", trees / sha, sha, str(conf["pythons"][0]),
                                              list(conf.get("install_command") or []), suite_dir,
                                              targets.runner_requirement())
        except targets.TargetError as e:
            raise NodeRefused(f"cannot make {sha[:12]}'s environment: {e}") from None
        record = json.loads((Path(python).parent.parent / targets.INSTALL_RECORD).read_text())
        if record.get("lock_sha256") != expected:
            raise NodeRefused(f"{sha[:12]}'s environment here holds the lock {str(record.get('lock_sha256'))[:12]}, "
                              f"the driver's commit {expected[:12]}")
        pythons[sha] = str(python)
    return pythons


def prepare(spec: dict, bundle_bytes: bytes, suite_dir: Path, node: str) -> tuple[Path, Path, dict[str, str]]:
    """On a node: the block's commits checked out and its sides' environments made (cached), under the
    node's lock. Returns the node's repository, its checkouts and each side's python."""
    cache = cache_dir()
    shas = list(spec["locks"])
    # said once; the attempt's later blocks on this node end at once (a resumed batch tries the node again)
    refused = cache / f"refused-{spec['batch']}-{spec['attempt']}-{node}"
    if refused.is_file():
        raise NodeRefused(refused.read_text())
    with _locked(cache / "prepare.lock"):
        try:
            trees = checkouts(cache, spec["repo_key"], shas, bundle_bytes)
            pythons = environments(cache, trees, spec["locks"], spec["conf"], suite_dir)
        except NodeRefused as e:
            refused.write_text(str(e))
            raise
    return cache / "repos" / spec["repo_key"], trees, pythons
