"""A fleet's unit of work, whatever schedules it: one pair block (both sides of one pair of one round,
in turns on one slot of one node, every case of the batch), never split over nodes.

A block runs in a staging folder of its own on its node (asv's results, the raw runs, asv's machine
file) and comes back to the driver whole or not at all: a node lost mid-block loses that block only,
and it runs again on another node. The driver stores each block under the machine name of the
node's hardware class (``<machine>-<fingerprint>``): classes are never pooled, nodes of one class
are blocks of one comparison. The nodes see the suite folder, the sides' checkouts and
environments at the driver's paths (``files = "shared"``), or are sent what they need and make the
rest themselves (``files = "shipped"``: mbaphases.run.executors.shipping; docs/fleet.md).

What schedules the blocks is a backend (mbaphases.run.executors.ray_fleet: a Ray cluster's slots;
mbaphases.run.executors.slurm_fleet: jobs of a Slurm partition): it hands a block to a node,
says when one ended, and cancels the rest; everything else is here.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import shutil
import socket
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from asv import results as asv_results
from asv import runner as asv_runner

from mbaphases import hardware, processes, raw_runs
from mbaphases.errors import UsageError
from mbaphases.formal_lock import HOLDER_VAR
from mbaphases.run import design as design_mod
from mbaphases.run.executors import local, shipping
from mbaphases.run.prepare import ensure_machine, worktrees

SLOT_LOCKS = Path(tempfile.gettempdir()) / "mbaphases-slots"  # host-wide: two nodes on one host share CPUs
RETRIES = 2  # a block whose node was lost runs again elsewhere, at most this many times


@dataclass(frozen=True)
class Fleet:
    address: str  # Ray: auto, HOST:PORT or ray://HOST:PORT; Slurm: slurm or slurm:PARTITION
    insecure: bool = False  # sent to a Ray cluster without token authentication, as asked
    files: str = "shared"  # shared: the nodes see the driver's paths; shipped: sent (mbaphases.run.executors.shipping)

    @property
    def scheduler(self) -> str:
        return "slurm" if self.address == "slurm" or self.address.startswith("slurm:") else "ray"


def refuse(fleet: Fleet, design: design_mod.Design, until_decisive: dict | None) -> None:
    """What a fleet batch cannot be, refused before anything runs."""
    if not design.paired:
        raise UsageError(f"--fleet runs pair blocks; --design {design.kind} runs one side at a time: --design turns")
    if not design.share_cpu:
        raise UsageError("--fleet runs a pair's two sides in turns on one slot: --design turns")
    if until_decisive is not None:  # a look reads one machine's runs; a fleet stores one machine per class
        raise UsageError("--fleet with --until-decisive: a fleet runs the pinned rounds; run the extra rounds "
                         "with --runs")


class BlockLost(Exception):
    """A block that did not come back (its node lost, the block cancelled)."""


class Backend(Protocol):
    """What schedules a fleet's blocks."""
    nodes: dict  # node -> the slots it offers
    where: str  # the fleet in words ("the Ray cluster at ...")
    one_machine: bool  # this machine alone: its runs under the batch's machine name, not per hardware class

    def put(self, data: bytes): ...  # something every block is given, sent once
    def submit(self, spec: dict, bundle, node: str | None = None): ...  # a block to any node, or to ``node``
    def wait(self, handles: list): ...  # the first of ``handles`` to end
    def result(self, handle) -> dict: ...  # an ended block's result (BlockLost: it did not end)
    def cancel(self, handles: list) -> None: ...


def class_machines(machine: str) -> str:
    """The pattern of the machine names a fleet batch stores its runs under (one per hardware class)."""
    return f"{machine}-" + "[0-9a-f]" * 6




def balanced(todo: list[tuple]) -> list[tuple]:
    """The blocks in the order they are handed out: round by round (each side first in half its pairs,
    as the local runner orders them), so whichever nodes take them, every stretch of the fleet's time
    holds every pair of sides alike."""
    return sorted(todo, key=lambda item: (item[3], item[1]))


@contextlib.contextmanager
def slot_of(size: int, cpus: list[int], count: int = 1):
    """``count`` free CPU sets of ``size`` on this host (a pair at once takes one a side), held until
    the block ends (a file lock per set: Ray's resource counts per node, this keeps two nodes of one
    host, or two blocks of one machine, off each other's CPUs). Yields the sets."""
    SLOT_LOCKS.mkdir(parents=True, exist_ok=True)
    sets = [cpus[i:i + size] for i in range(0, len(cpus) - size + 1, size)] or [cpus]
    while True:
        held: list[tuple[list[int], object]] = []
        for s in sets:
            handle = open(SLOT_LOCKS / ("cpus-" + "-".join(map(str, s)) + ".lock"), "w")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            held.append((s, handle))
            if len(held) == count:
                break
        if len(held) == count:
            try:
                yield [s for s, _ in held]
            finally:
                for _, handle in held:
                    handle.close()
            return
        for _, handle in held:  # not all of them free: none kept, so two blocks never hold half each
            handle.close()
        time.sleep(0.5)


def node_machine(prefix: str) -> tuple[str, dict]:
    """The machine name a node's blocks are stored under: the batch's machine and the node's hardware
    fingerprint (one name per hardware class)."""
    described = hardware.describe()
    return f"{prefix}-{hardware.fingerprint(described)}", described




def run_block(spec: dict, bundle_bytes: bytes | None, node: str, out=None) -> dict:
    """On a node: one pair block in a staging folder of its own; returns its files (nothing partial:
    a block that did not end returns nothing), or why this node cannot run the batch's blocks (a
    shipped batch's environment or checkout it could not make: ``refused``). ``out``: where its lines
    go as they come (else they come back with the result)."""
    if spec.get("class_machines", True):
        machine, described = node_machine(spec["machine"])
    else:  # one machine: its runs under the batch's machine name, its hardware checked by the driver
        machine, described = spec["machine"], hardware.describe()
    sweep_orphans(Path(tempfile.gettempdir()))
    staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{spec['name']}-", dir=spec.get("staging_in")))
    (staging / OWNER_FILE).write_text(str(os.getpid()))
    try:
        try:
            where = _block_files(spec, bundle_bytes, staging, node)
        except shipping.NodeRefused as e:
            return {"refused": str(e), "node": node, "machine": machine}
        conf_path = staging / "asv.block.conf.json"
        conf_path.write_text(json.dumps(where.conf, indent=2))
        # asv's machine file in the staging folder: blocks starting at once never share one
        env = {**os.environ, **spec["env"], **where.env, "HOME": str(staging),
               "MBAPHASES_RAW_DIR": str(staging / "raw-runs"), "MBAPHASES_MACHINE": machine}
        with _home(staging):
            ensure_machine(conf_path, machine)
        base = [where.python, "-m", "asv", "run", "--config", str(conf_path), "--machine", machine,
                "--record-samples", "--show-stderr"]
        design = design_mod.Design(**spec["design"])
        sets = 1 if design.share_cpu else 2  # in turns both sides on one slot; at once a slot a side
        with slot_of(spec["slot_size"], sorted(os.sched_getaffinity(0)), sets) as slot_sets:
            began = time.time()
            cpus = [c for s in slot_sets for c in s]
            # the slot's lock is this block's formal-run lock: its entry runs count it as theirs
            env[HOLDER_VAR] = f"block {spec['batch']}/{spec['name']} on CPU {','.join(map(str, cpus))}"
            slots = local.Slots(slot_sets, spec["slot_size"], cpus)
            executor = local.LocalExecutor(base, where.conf, conf_path, where.suite_dir, None, env, spec["names"],
                                           spec["batch"], slots, out or io.StringIO(), pythons=where.pythons)
            # a pair id of this execution's own: a block Ray runs again after its node was lost must
            # not be released by the markers of the lost one
            codes = executor.run_pair(design, tuple(spec["item"]), spec["pair_count"],
                                      f"{spec['attempt']}x{uuid.uuid4().hex[:6]}", where.trees)
            ended = time.time()
        files = {str(p.relative_to(staging)): p.read_bytes() for p in sorted(staging.rglob("*"))
                 if p.is_file() and p.parts[len(staging.parts)] in ("raw-runs", "results")}
        log = executor.out.getvalue() if isinstance(executor.out, io.StringIO) else ""
        return {"machine": machine, "hardware": described, "cpus": cpus, "codes": codes, "files": files,
                "node": node, "log": log, "began": began, "ended": ended}
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@dataclass
class BlockFiles:
    """Where a block's run finds what it runs: the suite's folder, asv's config, the checkouts, the pythons."""
    suite_dir: Path
    conf: dict
    trees: Path
    python: str  # asv's
    pythons: dict  # each side's
    env: dict  # the batch's variables that name the driver's files, made this node's


def _block_files(spec: dict, bundle_bytes: bytes | None, staging: Path, node: str) -> BlockFiles:
    """The driver's paths (shared files), or this node's own (shipped: the suite folder Ray unpacked as
    the working folder, the commits from the bundle, the environments made here)."""
    if spec["files"] == "shared":
        suite_dir = Path(spec["suite_dir"])
        conf = {**absolute_paths(spec["conf"], suite_dir), "results_dir": str(staging / "results")}
        return BlockFiles(suite_dir, conf, Path(spec["trees"]), spec["python"], spec["pythons"], {})
    suite_dir = Path.cwd()  # Ray's working_dir: the suite's folder as the driver sent it
    repo, trees, pythons = shipping.prepare(spec, bundle_bytes, suite_dir, node)
    conf = {**absolute_paths(spec["conf"], suite_dir), "repo": str(repo), "env_dir": str(staging / "env"),
            "results_dir": str(staging / "results")}
    (staging / "pins.toml").write_text(spec["pins_text"])
    return BlockFiles(suite_dir, conf, trees, sys.executable, pythons,
                      {"MBAPHASES_PINS": str(staging / "pins.toml"), "MBAPHASES_PROGRESS": str(staging / "progress.json")})


STAGING_PREFIX, OWNER_FILE = "mbaphases-block-", "owner.pid"


def sweep_orphans(folder: Path) -> list[Path]:
    """Staging folders whose worker is gone (killed with its node's process, so its own cleanup never
    ran) are removed when the next block starts on that host, and whatever of their block still runs
    is ended first (every process of a block has its staging folder as HOME, whatever session it is
    in). A folder whose worker lives, or that names none (not this suite's), is left alone. Returns
    the removed ones."""
    removed = []
    for staging in folder.glob(f"{STAGING_PREFIX}*"):
        try:
            os.kill(int((staging / OWNER_FILE).read_text()), 0)
        except ProcessLookupError:
            for sid in {_session_of(pid) for pid in processes.with_env(f"HOME={staging}")} - {None}:
                processes.end_session(sid)
            shutil.rmtree(staging, ignore_errors=True)
            removed.append(staging)
        except (OSError, ValueError):
            continue  # no owner named, or one this user may not signal: not ours to remove
    return removed


def _session_of(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except ProcessLookupError:
        return None


def absolute_paths(conf: dict, suite_dir: Path) -> dict:
    """asv reads a config's folders relative to the config's own folder: the block's config lives in
    its staging folder, so its folders are named whole."""
    out = dict(conf)
    for key in ("benchmark_dir", "env_dir", "html_dir", "repo"):
        if key in out and not Path(out[key]).is_absolute() and (suite_dir / out[key]).exists():
            out[key] = str(suite_dir / out[key])
    return out


@contextlib.contextmanager
def _home(path: Path):
    old = os.environ.get("HOME")
    os.environ["HOME"] = str(path)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = old




def changed_hardware(node_machine: dict, finished: dict) -> str | None:
    """Why a block is refused when its node's hardware fingerprint is not the one its earlier blocks
    had (a node resized or replaced under the same id: its runs would join another class's); None
    when it is the same, or the node's first block."""
    before = node_machine.get(finished["node"])
    if before is None or before == finished["machine"]:
        return None
    return (f"node {finished['node'][:8]} was {before} and is now {finished['machine']}: its hardware changed "
            "inside the batch; the block is not kept (the node's blocks are refused for this batch)")


def store_block(done: dict, suite_dir: Path, results_dir: Path, fleet: bool = True) -> list[dict]:
    """A block's files into the driver's store under its machine: raw runs at the next free run
    numbers of each commit (never over a file), asv's samples appended to asv's own results file;
    a fleet's runs name their node (``fleet``). Returns the runs stored ({sha, run})."""
    machine = done["machine"]
    runs: dict[tuple[str, str], dict[str, bytes]] = {}  # (sha, stem) -> file suffix -> content
    for p, data in done["files"].items():
        parts = Path(p).parts
        if parts[0] == "raw-runs" and len(parts) == 4:
            stem, suffix = parts[3].split(".", 1)
            runs.setdefault((parts[2], stem), {})[suffix] = data
    stored = []
    for (sha, _), files in sorted(runs.items()):
        folder = suite_dir / "raw-runs" / machine / sha
        k = raw_runs.next_run(folder)
        for suffix, data in files.items():
            if suffix == "meta.json":
                meta = json.loads(data)
                if fleet:
                    meta["fleet"] = {"node": done["node"], "cpus": done["cpus"], "block_run": meta.get("run")}
                meta["run"] = k
                data = json.dumps(meta, indent=2).encode()
            with open(folder / f"run{k}.{suffix}", "xb") as f:  # never over a stored file
                f.write(data)
        stored.append({"sha": sha, "run": k})
    for p, data in done["files"].items():
        parts = Path(p).parts
        if parts[0] != "results":
            continue
        if len(parts) == 3 and parts[2] != "machine.json":
            _append_results(results_dir, machine, parts[2], data)
        else:  # the machine's description and the benchmarks' list: asv's, the same from every block
            target = results_dir.joinpath(*parts[1:])
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
    return stored


def _append_results(results_dir: Path, machine: str, name: str, data: bytes) -> None:
    """asv's results of one block added to the driver's file for that commit and environment, the
    samples appended by asv's own code (as ``asv run --append-samples`` would)."""
    target = results_dir / machine / name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return
    with tempfile.TemporaryDirectory() as tmp:
        block_file = Path(tmp) / machine / name
        block_file.parent.mkdir(parents=True)
        block_file.write_bytes(data)
        block = asv_results.Results.load(str(block_file), machine)
    stored = asv_results.Results.load(str(target), machine)
    for key in block.get_all_result_keys():
        params = block.get_result_params(key)
        stats = block.get_result_stats(key, params)
        number = [s.get("number") if s else None for s in stats]
        result = asv_runner.BenchmarkResult(result=block.get_result_value(key, params),
                                            samples=block.get_result_samples(key, params), number=number,
                                            errcode=0, stderr="", profile=None)
        stored.add_result({"name": key, "version": block.benchmark_version[key], "params": params}, result,
                          record_samples=True, append_samples=True)
    stored.save(str(results_dir))


@dataclass
class FleetExecutor:
    """Runs a batch's pair blocks on a fleet's slots (its backend schedules them); the driver keeps the
    store. One machine is a fleet of one node (mbaphases.run.executors.local_node): the same blocks,
    staging and gathering, its runs under the batch's own machine name."""
    local: local.LocalExecutor  # the batch's settings (command, config, environment, names)
    backend: Backend
    machine: str
    blocks: list[dict] = field(default_factory=list)  # every block as it ended (the batch record's fleet part)
    node_machine: dict = field(default_factory=dict)  # node id -> the machine (hardware class) its blocks had
    files: str = "shared"  # shared or shipped (mbaphases.run.executors.shipping)
    shipped: dict | None = None  # a shipped batch's commits: the sides' lock hashes, the bundle (sent once)
    refused: dict = field(default_factory=dict)  # node id -> why it cannot run this batch's blocks
    busy_s: list[float] = field(default_factory=list)  # each run_pairs call's wall (from its first block's start)

    # the batch's settings are the local executor's
    slots = property(lambda self: self.local.slots)
    batch = property(lambda self: self.local.batch)
    names = property(lambda self: self.local.names)
    conf_path = property(lambda self: self.local.conf_path)
    deadline = property(lambda self: self.local.deadline)
    node_slots = property(lambda self: self.backend.nodes)
    not_started = property(lambda self: self.local.not_started)
    one_machine = property(lambda self: self.backend.one_machine)
    tag = property(lambda self: "[block]" if self.backend.one_machine else "[fleet] block")

    def say(self, text: str) -> None:
        self.local.say(text)

    def late_by(self) -> float | None:
        return self.local.late_by()

    def occupancy(self) -> dict:
        """How busy the slots were while blocks ran: the blocks' time over the slots' time (slots x
        the wall of the block runs)."""
        slots = sum(self.node_slots.values())
        block_s = sum(b["ended"] - b["began"] for b in self.blocks if "began" in b)
        wall = sum(self.busy_s)
        return {"slots": slots, "block_s": round(block_s, 3), "wall_s": round(wall, 3),
                "occupancy": round(block_s / (slots * wall), 4) if wall > 0 else None}

    def as_record(self) -> dict:
        record = {"blocks": self.blocks, "occupancy": self.occupancy()}
        if self.one_machine:
            return record
        return {"address": self.backend.where, "nodes": self.node_slots, "files": self.files, **record,
                **({"refused": self.refused} if self.refused else {})}

    def plan_lines(self) -> list[str]:
        n = sum(self.node_slots.values())
        if self.one_machine:
            return ["blocks: one pair of one round each, in a staging store of its own, started as soon as a slot "
                    "is free (pairs that share a side too); its runs gathered into this machine's store"]
        return [f"fleet: {len(self.node_slots)} node{'s' if len(self.node_slots) != 1 else ''} of {self.backend.where}, "
                f"{n} slot{'s' if n != 1 else ''} of {self.local.slots.size} CPU"
                f"{'s' if self.local.slots.size != 1 else ''}; a block is one pair of one round, both sides in turns "
                "on one slot of one node; each hardware class stored under its own machine name"]

    def run_solo(self, shas, rounds, tag) -> int:
        raise UsageError("--fleet runs pair blocks: --design turns")

    def profile_sides(self, sides, machine_dir, cases_of) -> list:
        if self.one_machine:
            return self.local.profile_sides(sides, machine_dir, cases_of)
        self.say("[fleet] no function profiles on a fleet: `mbaphases run --profile-functions` on one machine")
        return []

    def run_pairs(self, design: design_mod.Design, pairs_of, rounds: int, first_round: int,
                  done: set[str] = frozenset(), attempt: int = 0) -> int:
        """Every block of ``rounds`` rounds on the fleet's slots, as many at once as it has, the next
        as soon as one ends (none that the deadline would cut); each block's files stored as it ends
        (a line each, with an estimate of the rest)."""
        todo, pair_count = [], {}
        for k in range(first_round, first_round + rounds):
            pairs = pairs_of(k)
            pair_count[k] = len(pairs)
            todo += [(f"r{k + 1}p{i + 1}", i, pair, k) for i, pair in enumerate(pairs) if f"r{k + 1}p{i + 1}" not in done]
        if not todo:
            return 0
        shas = sorted({x["sha"] for it in todo for x in it[2]})
        if self.files == "shipped":  # the commits go as one bundle; the nodes check them out themselves
            self.shipped = {"locks": shipping.lock_hashes(self.local.repo_path, shas),
                            "bundle": self.backend.put(shipping.bundle(self.local.repo_path, shas))}
            trees = None
        else:
            trees = worktrees(self.local.suite_dir, self.local.repo_path, shas)
        # a pair at once takes a slot a side
        width = max(1, sum(self.node_slots.values()) // (1 if design.share_cpu else 2))
        queue = balanced(todo)
        self.say(f"{self.tag.split()[0]} {len(queue)} block{'s' if len(queue) != 1 else ''} on {width} slot"
                 + ("s" if width != 1 else "") + (" (the suite's folder, the commits and the sides' locks sent to the "
                                                  "nodes)" if self.files == "shipped" else ""))
        began, stored_before = time.time(), len(self.blocks)
        pending: dict = {}
        rc = 0
        try:
            while queue or pending:
                while queue and len(pending) < width:
                    if not self.local.fits(f"block {queue[0][0]}", len(queue)):
                        queue = []
                        break
                    item = queue.pop(0)
                    pending[self._submit(design, item, pair_count, attempt, trees)] = item
                if not pending:
                    break
                ended = self.backend.wait(list(pending))
                item = pending.pop(ended)
                code, elsewhere = self._ended(item, ended, began, len(pending) + len(queue), stored_before)
                if elsewhere is not None:
                    pending[self._submit(design, item, pair_count, attempt, trees, elsewhere)] = item
                rc = code or rc
        except BaseException:
            self.backend.cancel(list(pending))  # every block on every node ends with the driver
            raise
        finally:
            self.busy_s.append(time.time() - began)
        return rc

    def _submit(self, design, item, pair_count, attempt, trees, node: str | None = None):
        """One block handed to the backend: to any node with a free slot, or to ``node``."""
        return self.backend.submit(self._spec(design, item, pair_count, attempt, trees),
                                   (self.shipped or {}).get("bundle"), node)

    def _ended(self, item: tuple, ref, began: float, left: int, stored_before: int) -> tuple[int, str | None]:
        """One block's end: stored (unless lost, or from a node whose hardware changed), a line said; the
        rate is this call's (``began``, and the blocks stored before it, of earlier rounds, left out).
        Returns its exit status, and the node to run it on instead where its own refused the batch."""
        try:
            finished = self.backend.result(ref)
        except BlockLost as e:
            self.say(f"{self.tag} {item[0]} lost ({e}): nothing of it is kept")
            return 2, None
        if "refused" in finished:
            return self._refused(item, finished)
        changed = changed_hardware(self.node_machine, finished)
        if changed:
            self.say(f"{self.tag} {item[0]}: {changed}")
            return 2, None
        self.node_machine[finished["node"]] = finished["machine"]
        stored = store_block(finished, self.local.suite_dir, self._results_dir(), fleet=not self.one_machine)
        if max(finished["codes"]) and finished["log"]:  # asv's own lines say what failed
            self.say(finished["log"].rstrip())
        self.blocks.append({"block": item[0], "node": finished["node"], "machine": finished["machine"],
                            "hardware": hardware.text(finished["hardware"]), "cpu": finished["hardware"]["cpu"],
                            "cpus": finished["cpus"], "runs": stored, "began": finished["began"],
                            "ended": finished["ended"]})
        self.local.unit_seconds.append(finished["ended"] - finished["began"])
        elapsed = time.time() - began
        cpus = ",".join(map(str, finished["cpus"]))
        where = f"CPU {cpus}" if self.one_machine else f"node {finished['node'][:8]} ({finished['machine']}, CPU {cpus})"
        self.say(f"{self.tag} {item[0]} ended on {where}: {len(stored)} runs kept; {left} left"
                 + (f", about {left * elapsed / (len(self.blocks) - stored_before):.0f} s at the rate so far" if left else ""))
        return max(finished["codes"]), None

    def _refused(self, item: tuple, finished: dict) -> tuple[int, str | None]:
        """A node that cannot run the batch's blocks (said once); the block goes to the node of the others
        with the fewest blocks so far, or, where every node refused, is not run."""
        node = finished["node"]
        if node not in self.refused:
            self.refused[node] = finished["refused"]
            self.say(f"[fleet] node {node[:8]} ({finished['machine']}) cannot run this batch's blocks: "
                     f"{finished['refused']}")
        others = [n for n in self.node_slots if n not in self.refused]
        if not others:
            self.say(f"[fleet] block {item[0]} not run: every node of the fleet refused the batch")
            return 2, None
        load = {n: sum(b["node"] == n for b in self.blocks) for n in others}
        elsewhere = min(others, key=lambda n: load[n])
        self.say(f"[fleet] block {item[0]} goes to node {elsewhere[:8]}")
        return 0, elsewhere

    def _results_dir(self) -> Path:
        return self.local.suite_dir / self.local.conf.get("results_dir", "results")  # absolute stays absolute

    def _spec(self, design, item, pair_count, attempt, trees) -> dict:
        name, i, pair, k = item
        spec = {"machine": self.machine, "name": name, "conf": self.local.conf, "env": self._env(),
                "python": self.local.base[0], "design": {"kind": design.kind, "pairing": design.pairing,
                                                         "turn_ms": design.turn_ms},
                "slot_size": self.local.slots.size, "suite_dir": str(self.local.suite_dir), "names": self.local.names,
                "batch": self.local.batch, "pythons": self.local.pythons, "item": [name, i, list(pair), k],
                "pair_count": pair_count, "attempt": attempt, "trees": str(trees), "files": self.files,
                "class_machines": not self.one_machine}
        if self.files == "shipped":
            # the node's repository is one per driver's repository, whatever its path on the node
            spec.update(locks={x["sha"]: self.shipped["locks"][x["sha"]] for x in pair},
                        repo_key=hashlib.sha256(f"{socket.gethostname()}:{self.local.repo_path}".encode()).hexdigest()[:12],
                        pins_text=Path(self.local.env["MBAPHASES_PINS"]).read_text())
        return spec

    def _env(self) -> dict:
        # the batch's variables, not the driver's shell: a node has its own PATH, HOME and Ray's; the
        # driver's formal-run lock is no node's (each block holds its slot's)
        return {k: v for k, v in self.local.env.items() if k.startswith("MBAPHASES_") and k != HOLDER_VAR}
