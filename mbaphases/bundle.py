"""An evidence bundle: one archive small enough to attach to an issue, from which
`mbaphases report --bundle` rebuilds the same tables.

It holds, for the sides of one report: their asv result files (with machine.json
and benchmarks.json), their raw runs with meta and the batch records, the pins and
exceptions files, the report (report.md, summary.json and the per-candidate
folders), a manifest naming the sides by SHA, and SHA256SUMS over everything.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from mbaphases.errors import UsageError

SCHEMA = "mbaphases.bundle/1"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write(out: Path, sides, results_dir: Path, machine: str, pins_path: Path | None, exceptions_path: Path | None,
          report_dir: Path, reference: str | None, history: list[str] | None = None) -> Path:
    """``sides``: the loaded Sides, baseline first."""
    out = Path(out)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "bundle"
        res = root / "results" / machine
        res.mkdir(parents=True)
        for name in ("machine.json",):
            shutil.copy2(results_dir / machine / name, res / name)
        if (results_dir / "benchmarks.json").is_file():
            shutil.copy2(results_dir / "benchmarks.json", root / "results" / "benchmarks.json")
        raw_root = results_dir.parent / "raw-runs" / machine
        batches = set()
        for side in sides:
            for f in sorted((results_dir / machine).glob(f"{side.revision[:8]}-*.json")):
                shutil.copy2(f, res / f.name)
            src = raw_root / side.revision
            if src.is_dir():
                shutil.copytree(src, root / "raw-runs" / machine / side.revision)
            batches |= set(side.batches.values())
        for b in sorted(batches):
            rec = raw_root / "batches" / f"{b}.json"
            if rec.is_file():
                (root / "raw-runs" / machine / "batches").mkdir(parents=True, exist_ok=True)
                shutil.copy2(rec, root / "raw-runs" / machine / "batches" / rec.name)
        if pins_path:
            shutil.copy2(pins_path, root / "pins.toml")
        if exceptions_path and Path(exceptions_path).is_file():
            shutil.copy2(exceptions_path, root / "exceptions.toml")
        shutil.copytree(report_dir, root / "report")
        manifest = {"schema": SCHEMA, "created": datetime.now(UTC).isoformat(), "machine": machine,
                    "reference": reference, "history": history,
                    "sides": [{"role": "baseline" if i == 0 else "candidate", "label": s.label, "sha": s.revision}
                              for i, s in enumerate(sides)]}
        (root / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        sums = [f"{_sha256(p)}  {p.relative_to(root)}" for p in sorted(root.rglob("*")) if p.is_file()]
        (root / "SHA256SUMS").write_text("\n".join(sums) + "\n")
        out.parent.mkdir(parents=True, exist_ok=True)
        staged = out.with_name(f".{out.name}.partial")
        with tarfile.open(staged, "w:gz") as tar:
            tar.add(root, arcname="bundle")
        staged.replace(out)
    return out


def open_bundle(path: Path, into: Path) -> dict:
    """Unpack and verify a bundle; returns its manifest with the folder it lies in."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"--bundle {path} not found")
    try:
        with tarfile.open(path, "r:gz") as tar:
            tar.extractall(into, filter="data")
    except (tarfile.TarError, OSError, EOFError) as e:
        raise UsageError(f"--bundle {path} is not a readable bundle ({e})") from None
    root = Path(into) / "bundle"
    try:
        manifest = json.loads((root / "manifest.json").read_text())
        sums = (root / "SHA256SUMS").read_text().splitlines()
    except (OSError, ValueError):
        raise UsageError(f"--bundle {path} has no manifest or checksums") from None
    if manifest.get("schema") != SCHEMA:
        raise UsageError(f"--bundle {path}: schema {manifest.get('schema')!r}, expected {SCHEMA}")
    for line in sums:
        digest, _, rel = line.partition("  ")
        f = root / rel
        if not f.is_file() or _sha256(f) != digest:
            raise UsageError(f"--bundle {path}: {rel} does not match its checksum")
    manifest["root"] = root
    return manifest
