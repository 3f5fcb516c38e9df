"""The field's published framework as a target: sides that name what to install.

A side of this target is a requirement (a release, ``unilab[mujoco,motrix]==1.5.2``, or any
requirement uv can resolve, such as a commit of a checkout of the framework's repository),
optionally with dependency overrides (uv's override semantics: a declared pin that cannot be
met here, such as the NumPy-era releases' ``torch<2.12``) and swaps (the field's own practice:
the same lock with one package replaced, installed without dependencies, so everything else
stays identical).

Sides stay commits with labels, as everywhere in the suite: this module generates a small pin
repository, one commit per side on one first-parent line (pins order), each holding the side's
definition (``pyproject.toml``, ``side.json``), its lock (``requirements.lock``: every package
with its version, resolved once and reused while the side's definition is unchanged), the asset
manifest and the suite's collector entry at the field's entry path. asv then builds, stores and
publishes them like any commit, and the install step (mbaphases.targets) makes each side's
environment exactly its lock, with the assets placed (mbaphases.assets).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from mbaphases import assets, inputs, targets
from mbaphases.errors import UsageError
from mbaphases.inputs import published_tag
from mbaphases.run import prepare
from mbaphases.targets import requirement_name

ENTRY_SOURCE = Path(__file__).with_name("unilab_entry.py")
ENTRY_PATH = "scripts/benchmark/rl/benchmark_offpolicy_collector_active.py"
PACKAGE = "mbaphases-side"
MARKER = "mbaphases-published-sides"  # in .git: a pin repository this suite made (and may replace)
DEFAULT_OVERRIDES = ("torch==2.13.0+cpu",)  # the CPU build; anything else pulls a multi-GB CUDA build


def is_published(pins: dict) -> bool:
    return "published" in pins


def side_definitions(pins: dict, suite_dir: Path) -> list[dict]:
    """Every side with what it installs (baseline first, then the candidates in pins order)."""
    settings = pins["published"]
    common = list(settings.get("overrides", DEFAULT_OVERRIDES))
    out = []
    for role, side in [("baseline", pins["baseline"])] + [("candidate", c) for c in pins["candidates"]]:
        source = {}
        if "checkout" in side:
            source = export_commit(side, Path(pins["path"]).parent, suite_dir)
            install = f"-e {source['tree']}" + (f"[{','.join(side['extras'])}]" if side.get("extras") else "")
        elif "install" in side:
            install = side["install"]
        else:
            raise UsageError(f"pins: side {side['label']!r} names no install (a requirement such as "
                             "'unilab[mujoco,motrix]==1.5.2') and no checkout; every side of a [published] target "
                             "needs one")
        own = list(side.get("overrides", []))
        names = {requirement_name(o) for o in own}
        out.append({"role": role, "label": side["label"], "install": install, "source": source,
                    "overrides": [o for o in common if requirement_name(o) not in names] + own,
                    "swap": list(side.get("swap", [])), "python": settings.get("python", "3.11")})
    return out


def export_commit(side: dict, pins_dir: Path, suite_dir: Path) -> dict:
    """A commit of a checkout of the framework's repository as a source tree the side installs
    (editable, so the repository's own configs beside its sources are found): its files written
    once under .asv/checkouts/<sha>/. A file whose content the repository's object store lacks
    (a partial clone's large meshes) is listed, never invented; the asset step places the
    registry's byte-identical copies where the framework looks."""
    checkout = Path(side["checkout"])
    checkout = checkout if checkout.is_absolute() else (pins_dir / checkout)
    if not checkout.exists():
        raise UsageError(f"side {side['label']!r}: checkout {checkout} does not exist")
    sha = prepare.resolve_ref(checkout, side["commit"])
    tree = (suite_dir / ".asv" / "checkouts" / sha).resolve()
    record = tree.with_name(f"{sha}.json")
    if not record.is_file():
        absent = _write_tree(checkout, sha, tree)
        record.write_text(json.dumps({"checkout": str(checkout), "commit": sha, "absent": absent}, indent=2) + "\n")
    doc = json.loads(record.read_text())
    if doc["absent"]:
        print(f"{side['label']}: {len(doc['absent'])} file(s) of {sha[:12]} absent from {checkout}'s objects: "
              f"{', '.join(doc['absent'][:5])}{' ...' if len(doc['absent']) > 5 else ''}", flush=True)
    return {"tree": str(tree), "commit": sha, "absent": doc["absent"]}


def _write_tree(checkout: Path, sha: str, tree: Path) -> list[str]:
    """Every file of the commit under ``tree``, its blobs read through one ``git cat-file --batch``
    (one process for the whole tree, not one per file); the paths whose blob is missing returned."""
    listing = prepare.git(checkout, "ls-tree", "-r", "-z", sha)
    work = tree.with_name(tree.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    absent = []
    cat = subprocess.Popen(["git", "-C", str(checkout), "cat-file", "--batch"], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE)
    try:
        for entry in filter(None, listing.split("\0")):
            meta, path = entry.split("\t", 1)
            mode, kind, blob = meta.split()
            if kind != "blob":
                continue  # a submodule: not part of the framework's sources
            cat.stdin.write(blob.encode() + b"\n")
            cat.stdin.flush()
            header = cat.stdout.readline().split()
            if len(header) != 3:  # "<sha> missing"
                absent.append(path)
                continue
            content = cat.stdout.read(int(header[2]))
            cat.stdout.read(1)  # the newline after each object
            dst = work / path
            dst.parent.mkdir(parents=True, exist_ok=True)
            if mode == "120000":
                dst.symlink_to(content.decode())
            else:
                dst.write_bytes(content)
                if mode == "100755":
                    dst.chmod(0o755)
    finally:
        cat.stdin.close()
        cat.wait()
    work.mkdir(parents=True, exist_ok=True)
    work.rename(tree)
    return absent


def _uv(*args: str, what: str) -> str:
    p = subprocess.run([targets.uv_binary(), *args], capture_output=True, text=True, check=False,
                       env={**os.environ, **targets.uv_env()})
    if p.returncode != 0:
        said = [ln.strip() for ln in (p.stderr or p.stdout).splitlines() if ln.strip()]
        # uv explains an unsatisfiable resolution over several lines; its first says what failed
        reason = next((ln for ln in said if "because" in ln or "No solution" in ln or "not found" in ln.lower()),
                      said[-1] if said else "no output")
        raise UsageError(f"{what}: {reason.lstrip('×╰─▶ ').strip()}")
    return p.stdout


def resolve_lock(side: dict) -> str:
    """The side's full pinned package list: its requirement with the overrides, then the swaps."""
    with tempfile.TemporaryDirectory() as tmp:
        req, ovr = Path(tmp) / "requirements.in", Path(tmp) / "overrides.txt"
        req.write_text(side["install"] + "\n")
        ovr.write_text("".join(o + "\n" for o in side["overrides"]))
        text = _uv("pip", "compile", str(req), "--override", str(ovr), "--python-version", side["python"],
                   "--no-header", "--no-annotate", "--quiet",
                   what=f"side {side['label']!r}: cannot resolve {side['install']} with overrides "
                        f"{', '.join(side['overrides']) or 'none'}")
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    for swap in side["swap"]:
        name = requirement_name(swap)
        hits = [i for i, ln in enumerate(lines) if requirement_name(ln) == name]
        if not hits:
            raise UsageError(f"side {side['label']!r}: swap {swap!r} names a package its lock does not hold; "
                             f"valid: {', '.join(sorted(requirement_name(ln) for ln in lines))}")
        with tempfile.TemporaryDirectory() as tmp:
            one = Path(tmp) / "swap.in"
            one.write_text(swap + "\n")
            _uv("pip", "compile", str(one), "--no-deps", "--python-version", side["python"], "--quiet",
                what=f"side {side['label']!r}: swap {swap}")
        lines[hits[0]] = swap
    return "".join(ln + "\n" for ln in lines)


def _definition(side: dict) -> dict:
    return {k: side[k] for k in ("label", "install", "overrides", "swap", "python", "source") if side.get(k) != {}}


def _existing_locks(repo: Path) -> dict[str, str]:
    """Locks already resolved in a pin repository made before, by side definition: a lock is
    resolved once and reused while its side's definition is unchanged."""
    if not (repo / ".git" / MARKER).is_file():
        return {}
    out = {}
    for tag in prepare.git(repo, "tag", "--list", f"{inputs.PUBLISHED_TAG_PREFIX}*").split():
        side, lock = (prepare.git(repo, "show", f"{tag}:{name}") + "\n" for name in ("side.json", "requirements.lock"))
        out[json.dumps(json.loads(side).get("definition"), sort_keys=True)] = lock
    return out


def _pyproject(side: dict) -> str:
    def arr(xs):
        return "[" + ", ".join(json.dumps(x) for x in xs) + "]"

    return (f"# {side['label']}: what this side installs (generated by mbaphases; the lock is requirements.lock)\n"
            f"[project]\nname = \"{PACKAGE}\"\nversion = \"0\"\nrequires-python = \"=={side['python']}.*\"\n"
            f"dependencies = {arr([side['install']])}\n\n[tool.uv]\n"
            f"override-dependencies = {arr(side['overrides'] + side['swap'])}\n")


def generate(pins: dict, suite_dir: Path, out=sys.stdout) -> Path:
    """The pin repository for the pins' sides (``[published] repo``, default published-sides/):
    one commit per side on ``main``, tagged ``side/<label>``. Deterministic: the same definitions
    and locks give the same SHAs. Returns its path; sets each side's ``ref`` to its tag."""
    settings = pins["published"]
    repo = (suite_dir / settings.get("repo", "published-sides")).resolve()
    if repo.exists() and any(repo.iterdir()) and not (repo / ".git" / MARKER).is_file():
        raise UsageError(f"[published] repo {repo} exists and was not made by mbaphases; name another folder")
    manifest_path = Path(settings.get("assets", assets.MANIFEST))
    if not manifest_path.is_absolute():
        manifest_path = suite_dir / manifest_path
    try:
        manifest = json.loads(manifest_path.read_text())
        # every asset present and unaltered before anything is measured
        assets.fetch(suite_dir / ".asv" / "assets", manifest)
    except OSError as e:
        raise UsageError(f"[published] assets {manifest_path}: {e.strerror}") from None
    except assets.AssetError as e:
        raise UsageError(str(e)) from None
    sides = side_definitions(pins, suite_dir)
    known = _existing_locks(repo)
    work = Path(tempfile.mkdtemp(prefix="published-sides-", dir=suite_dir / ".asv" if (suite_dir / ".asv").is_dir()
                                 else None))
    resolved_with = _uv("--version", what="uv").strip()
    try:
        prepare.git(work, "init", "-q", "-b", "main")
        for i, side in enumerate(sides):
            key = json.dumps(_definition(side), sort_keys=True)
            lock = known.get(key)
            print(f"{side['role']:<9} {side['label']}: {side['install']}"
                  + (f" (overrides {', '.join(side['overrides'])})" if side["overrides"] else "")
                  + (f" (swap {', '.join(side['swap'])})" if side["swap"] else "")
                  + ("; lock reused" if lock else "; resolving its lock"), file=out, flush=True)
            if lock is None:
                lock = resolve_lock(side)
            for old in work.iterdir():
                if old.name != ".git":
                    shutil.rmtree(old) if old.is_dir() else old.unlink()
            (work / "pyproject.toml").write_text(_pyproject(side))
            (work / "requirements.lock").write_text(lock)
            (work / "side.json").write_text(json.dumps({"definition": _definition(side),
                                                        "resolved_with": resolved_with},
                                                       indent=2) + "\n")
            (work / "assets.json").write_text(json.dumps(manifest, indent=1) + "\n")
            entry = work / ENTRY_PATH
            entry.parent.mkdir(parents=True)
            shutil.copyfile(ENTRY_SOURCE, entry)
            prepare.git(work, "add", "-A")
            date = f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}+00:00"
            ident = {"GIT_AUTHOR_NAME": "mbaphases", "GIT_AUTHOR_EMAIL": "mbaphases@localhost",
                     "GIT_COMMITTER_NAME": "mbaphases", "GIT_COMMITTER_EMAIL": "mbaphases@localhost",
                     "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
            prepare.git(work, "commit", "-q", "--allow-empty", "-m", side["label"], env=ident)
            prepare.git(work, "tag", "-f", published_tag(side["label"]))
        (work / ".git" / MARKER).write_text("made by mbaphases.published; replaced on every run\n")
        if repo.exists():
            # commits measured before stay reachable: the new line is fetched into the old repository
            prepare.git(repo, "fetch", "-q", "--force", "--update-head-ok", str(work), "+refs/heads/main:refs/heads/main",
                 "+refs/tags/*:refs/tags/*")
            prepare.git(repo, "reset", "-q", "--hard", "main")
        else:
            repo.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(work), str(repo))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for side_pins in [pins["baseline"], *pins["candidates"]]:
        side_pins["ref"] = published_tag(side_pins["label"])
    return repo


def asv_conf(pins: dict, suite_dir: Path, repo: Path) -> Path:
    """asv config for the pin repository: the field template with this target's install step. One
    per pins file (pins.unilab.toml: asv.pins.unilab.resolved.conf.json), so a run of other pins never
    repoints the config a batch record names."""
    out = suite_dir / f"asv.{Path(pins['path']).stem}.resolved.conf.json"
    return prepare.field_conf(suite_dir / "asv.field.conf.json", str(repo), PACKAGE, out,
                             {"python": pins["published"].get("python", "3.11")})
