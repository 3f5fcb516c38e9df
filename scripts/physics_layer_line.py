"""Which physics-layer versions a release of the framework runs with, found by trying.

    python scripts/physics_layer_line.py 'unilab[mujoco,motrix]==1.3.0' [--package unisim-core]
        [--versions 1.9.0,1.8.2] [--cases flashsac/go2_joystick_flat/mujoco] [--out table.json]

Makes one environment of the release (its resolution with the CPU torch, as the suite's sides are
made), then for each version of the package (default: every version the registry has that the
release's own requirement admits, newest first) installs it without dependencies, as the field's
swap does, and records what happens: the framework does not import (its error), imports but the
suite's entry fails the case (the entry's error for that case), or runs. The table is printed as
markdown (docs/log/releases.md) and written as JSON with --out. Needs the package registry and uv.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mbaphases import assets, published, targets  # noqa: E402  (the suite's own modules, from the checkout)
from mbaphases.errors import UsageError  # noqa: E402

ENTRY = ROOT / "mbaphases" / "unilab_entry.py"
# the framework imported as its entry does: its era's env module and every registered task
IMPORT_PROBE = ("import importlib.util as u, sys; s = u.spec_from_file_location('unilab_entry', %r); "
                "e = sys.modules['unilab_entry'] = u.module_from_spec(s); s.loader.exec_module(e); "
                "era = e.installed_era(); e.part(era, 'ensure_registries')(); print(era.name)")


class ProbeError(Exception):
    pass


def _run(cmd: list[str], timeout: float = 900, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, cwd=cwd,
                          env={**os.environ, **targets.uv_env()})


def _last_line(p: subprocess.CompletedProcess) -> str:
    """The error a process ended with, and the first error of its chain where that differs (the
    framework wraps an import failure of a task module in its own RuntimeError)."""
    lines = (p.stderr.strip() or p.stdout.strip() or "no output").splitlines()
    errors = [line.strip() for line in lines if re.match(r"^[\w.]*(Error|Exception)\b", line)]
    if not errors:
        return lines[-1].strip()
    return errors[-1] if errors[0] == errors[-1] else f"{errors[-1]} (cause: {errors[0]})"


def registry_versions(package: str) -> list[str]:
    p = _run([sys.executable, "-m", "pip", "index", "versions", package])
    m = re.search(r"Available versions: (.*)", p.stdout)
    if p.returncode != 0 or not m:
        raise ProbeError(f"the registry lists no versions of {package}: {_last_line(p)}")
    return [v.strip() for v in m.group(1).split(",")]


def declared(python: Path, package: str) -> str:
    """The release's own requirement on the package (its specifier), from the installed metadata."""
    code = ("import importlib.metadata as m, re; reqs = m.requires('unilab') or []; "
            f"print(next((r.split(';')[0] for r in reqs if re.match(r'{re.escape(package)}\\b', r) "
            "and 'extra' not in r), ''))")
    return _run([str(python), "-c", code]).stdout.strip()


def admitted(versions: list[str], spec: str) -> list[str]:
    if not spec:
        return versions
    s = Requirement(spec).specifier
    return [v for v in versions if s.contains(v, prereleases=True)]


def make_env(work: Path, requirement: str) -> Path:
    """The release's environment in ``work/env`` (kept and reused with --keep), from the lock the
    suite's published target resolves for a side that installs it."""
    python = work / "env" / "bin" / "python"
    if python.exists():
        return python
    lock = work / "requirements.lock"
    lock.write_text(published.resolve_lock({"label": requirement, "install": requirement, "python": "3.11",
                                            "overrides": list(published.DEFAULT_OVERRIDES), "swap": []}))
    uv = targets.uv_binary()
    for cmd in ([uv, "venv", "-q", "-p", "3.11", str(work / "env")], [uv, "pip", "sync", "-q", str(lock)]):
        p = subprocess.run(cmd, capture_output=True, text=True, check=False,
                           env={**os.environ, **targets.uv_env(), "VIRTUAL_ENV": str(work / "env")})
        if p.returncode != 0:
            raise ProbeError(f"{requirement}: {' '.join(cmd[1:3])} failed: {_last_line(p)}")
    site = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    assets.place(Path(site) / "unilab" / "assets", ROOT / ".asv" / "assets")
    return python


def swap(python: Path, package: str, version: str) -> str | None:
    p = subprocess.run([targets.uv_binary(), "pip", "install", "-q", "--no-deps", f"{package}=={version}"],
                       capture_output=True, text=True, check=False,
                       env={**os.environ, **targets.uv_env(), "VIRTUAL_ENV": str(python.parents[1])})
    return None if p.returncode == 0 else f"does not install: {_last_line(p)}"


def try_import(python: Path, package: str, version: str, work: Path) -> dict:
    failed = swap(python, package, version)
    if failed:
        return {"version": version, "outcome": "no install", "detail": failed}
    p = _run([str(python), "-c", IMPORT_PROBE % str(ENTRY)], timeout=300, cwd=work)
    if p.returncode != 0:
        return {"version": version, "outcome": "no import", "detail": _last_line(p)}
    return {"version": version, "outcome": "imports", "era": p.stdout.strip().splitlines()[-1], "detail": ""}


def try_run(python: Path, package: str, version: str, cases: list[str], work: Path) -> dict:
    swap(python, package, version)
    out = work / f"run-{version}.json"
    out.unlink(missing_ok=True)
    p = _run([str(python), str(ENTRY), "--cases", ",".join(cases), "--num-envs", "8", "--warmup-steps", "1",
              "--measure-steps", "3", "--replay-capacity-steps", "4", "--continue-on-error", "--out-json",
              str(out)], timeout=900, cwd=work)
    if not out.is_file():
        return {"version": version, "outcome": "entry failed", "detail": _last_line(p)}
    doc = json.loads(out.read_text())
    ran = [f"{r['case']['algo']}/{r['case']['task']}/{r['case']['sim']}" for r in doc["results"]]
    errors = [f"{e['case']}: {e['type']}: {e['message']}" for e in doc["errors"]]
    return {"version": version, "outcome": "runs" if not errors else ("runs some" if ran else "cases fail"),
            "era": doc["provenance"]["framework_era"], "ran": ran, "detail": "; ".join(errors)}


def scan(python: Path, package: str, versions: list[str], cases: list[str], work: Path) -> list[dict]:
    """Every version imported; where cases are given, the entry run on the newest and the oldest
    version that import and bisected between them where the two differ (the versions that run are
    taken to be one stretch of the line, as a package's API moves one way); a version not run says
    which two run versions bracket it."""
    rows = {}
    for v in versions:
        rows[v] = try_import(python, package, v, work)
        print(f"{package} {v}: {rows[v]['outcome']} {rows[v]['detail'][:160]}", file=sys.stderr, flush=True)
    importing = [v for v in versions if rows[v]["outcome"] == "imports"]
    if not cases or not importing:
        return [rows[v] for v in versions]

    tried = set()

    def runs(i: int) -> bool:
        tried.add(i)
        v = importing[i]
        rows[v] = try_run(python, package, v, cases, work)
        print(f"{package} {v}: {rows[v]['outcome']} {rows[v]['detail'][:160]}", file=sys.stderr, flush=True)
        return rows[v]["outcome"] == "runs"

    lo, hi = 0, len(importing) - 1
    newest = runs(lo)
    if hi > lo and runs(hi) != newest:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if runs(mid) == newest:
                lo = mid
            else:
                hi = mid
    for i, v in enumerate(importing):
        if i in tried:
            continue
        before, after = max(j for j in tried if j < i), min(j for j in tried if j > i)
        rows[v]["detail"] = (f"not run: {importing[before]} and {importing[after]} on either side both "
                             f"{rows[importing[before]]['outcome']}")
    return [rows[v] for v in versions]


def markdown(requirement: str, package: str, rows: list[dict]) -> str:
    out = [f"{requirement}, {package} swapped:", "", f"| {package} | outcome | detail |", "|---|---|---|"]
    for r in rows:
        out.append(f"| {r['version']} | {r['outcome']} | {r['detail'][:200].replace('|', '/')} |")
    return "\n".join(out)


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ProbeError(message)


def main(argv=None) -> int:
    ap = _Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("requirement", help="the release, e.g. 'unilab[mujoco,motrix]==1.3.0'")
    ap.add_argument("--package", default="unisim-core")
    ap.add_argument("--versions", default="", help="comma list (default: every registry version the release admits)")
    ap.add_argument("--cases", default="", help="cases the entry runs at the tiny profile (bisected over the versions that import)")
    ap.add_argument("--out", default="")
    ap.add_argument("--keep", default="", help="keep the environment in this folder")
    try:
        args = ap.parse_args(argv)
        work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="physics-line-"))
        work.mkdir(parents=True, exist_ok=True)
        python = make_env(work, args.requirement)
        spec = declared(python, args.package)
        versions = ([v.strip() for v in args.versions.split(",") if v.strip()] if args.versions
                    else admitted(registry_versions(args.package), spec))
        cases = [c.strip() for c in args.cases.split(",") if c.strip()]
        rows = scan(python, args.package, versions, cases, work)
    except (ProbeError, UsageError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        if "work" in locals() and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    doc = {"requirement": args.requirement, "package": args.package, "declared": spec, "rows": rows}
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(markdown(args.requirement, args.package, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
