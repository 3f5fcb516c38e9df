"""A shipped fleet's node makes its own checkouts of the commits a bundle brings (real git)."""
import subprocess
from pathlib import Path

from mbaphases.run.executors import shipping


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def commit(repo: Path, text: str) -> str:
    (repo / "f.txt").write_text(text)
    git(repo, "add", "f.txt")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", text)
    return git(repo, "rev-parse", "HEAD")


def test_a_commit_that_came_as_a_parent_gets_a_ref_of_its_own_when_its_own_batch_checks_it_out(tmp_path):
    """A batch of the child first: the node holds the parent's objects with no ref naming it. A later
    batch of the parent must still name it (the order of test_fleet.py's shipped batches once left
    the parent unnamed)."""
    target = tmp_path / "target"
    subprocess.run(["git", "init", "-q", str(target)], check=True)
    parent = commit(target, "parent")
    child = commit(target, "child")
    cache = tmp_path / "cache"
    trees = shipping.checkouts(cache, "key", [child], shipping.bundle(target, [child]))
    repo = cache / "repos" / "key"
    assert (trees / child / "f.txt").read_text() == "child"
    trees = shipping.checkouts(cache, "key", [parent], shipping.bundle(target, [parent]))
    assert (trees / parent / "f.txt").read_text() == "parent"
    for sha in (parent, child):
        assert git(repo, "rev-parse", f"{shipping.BUNDLE_REFS}/{sha}") == sha
