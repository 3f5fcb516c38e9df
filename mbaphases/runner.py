"""A formal A/B run: both sides, >= 3 independent runs each, interleaved,
serial, never overlapping another formal run on this machine."""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import tomllib
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

from mbaphases import allocation, estimate, formal_lock, hardware, inputs, load, processes, staging, targets
from mbaphases import resume as resume_mod
from mbaphases import until_decisive as until_mod
from mbaphases.errors import UsageError
from mbaphases.stats import rules

LockBusy = formal_lock.LockBusy
EXIT_LOCK_TIMEOUT = 75  # EX_TEMPFAIL: another formal run kept the machine


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


def git(repo, *args, env: dict | None = None) -> str:
    p = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False,
                       env={**os.environ, **env} if env else None)
    if p.returncode != 0:
        raise UsageError(f"git {' '.join(args)} in {repo}: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else 'failed'}")
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
    Duet runs hold every pool at one thread and share the machine: never pooled with solo runs."""
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


def summarize(metas: list[dict], sides: dict[str, str]) -> tuple[list[str], list[str]]:
    """(failures, warnings) as lines: which case, side and run failed; busy runs."""
    failures, warnings = [], []
    for m in sorted(metas, key=lambda m: m["started"]):
        side = sides.get(m["commit"], m["commit"][:10])
        for case, msg in sorted(m.get("failed_cases", {}).items()):
            failures.append(f"FAILED {case} | side {side} | run {m['run']} | {msg}")
        warnings += [f"BUSY {side} run {m['run']}: {note}" for note in load.busy_notes(m)]
    return failures, warnings


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


class Progress:
    """A live line while a formal run goes: round, side, case k of n, elapsed, an ETA from
    the runs so far. Only on a terminal; the entry's progress reaches it through a file."""

    def __init__(self, path: Path, names: dict[str, str], total_runs: int, raw_dir: Path, started: float, out):
        self.path, self.names, self.total, self.raw_dir, self.started, self.out = path, names, total_runs, raw_dir, started, out
        self.live = hasattr(out, "isatty") and out.isatty()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        if self.live:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self.live:
            self._thread.join(timeout=5)
            print(file=self.out)

    def line(self) -> str | None:
        try:
            state = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        finished = [m for m in load.run_meta(self.raw_dir.parent, self.raw_dir.name, self.started) if m.get("ended")]
        elapsed = time.time() - self.started
        eta = ""
        if finished:
            per_run = elapsed / (len(finished) + 0.5)
            eta = f", ETA {_mmss(per_run * max(0, self.total - len(finished)))}"
        side = self.names.get(state["commit"], state["commit"][:10])
        return (f"run {len(finished) + 1}/{self.total} | {side} | case {state['case_index']}/{state['cases']} "
                f"{state['case']} | elapsed {_mmss(elapsed)}{eta}")

    def _loop(self):
        # the run's signals go to the main thread only, where processes.start can hold them
        signal.pthread_sigmask(signal.SIG_BLOCK, staging.DEFERRED)
        while not self._stop.wait(2.0):
            text = self.line()
            if text:
                print("\r" + text[:150].ljust(150), end="", file=self.out, flush=True)


def _mmss(seconds: float) -> str:
    return f"{int(seconds) // 60:02d}:{int(seconds) % 60:02d}"


def _run_round(base, conf, conf_path, suite_dir, shas, rounds, env, python, repo_path, names, out, tag) -> int:
    """``rounds`` interleaved rounds over ``shas`` (asv reverses the order every other round)."""
    if python is None:
        hashfile = suite_dir / ".asv" / f"hashes-{tag}.txt"
        hashfile.parent.mkdir(parents=True, exist_ok=True)
        hashfile.write_text("\n".join(shas) + "\n")
        cmd = base + [f"HASHFILE:{hashfile}", "-a", f"rounds={rounds}"]
        cmd += ["--interleave-rounds"] if rounds > 1 else []
        print("$ " + " ".join(cmd[1:]), file=out, flush=True)
        return processes.run(cmd, suite_dir, env)
    # an existing environment: one asv invocation per run and side, the order reversed every round
    worktrees = _worktrees(suite_dir, repo_path, shas)
    rc = 0
    for k in range(rounds):
        for sha in (shas if k % 2 == 0 else shas[::-1]):
            cmd = _existing_command(base, conf, conf_path, suite_dir, sha, python)
            print(f"[round {k + 1}/{rounds}] {names[sha]}: $ " + " ".join(cmd[1:]), file=out, flush=True)
            # existing environments get no ASV_* variables: name the checkout and commit
            # every run is made whatever the earlier ones returned: the first failure is the status
            code = processes.run(cmd, suite_dir,
                                 {**env, "MBAPHASES_TARGET_DIR": str(worktrees / sha), "MBAPHASES_COMMIT": sha})
            rc = rc or code
    return rc


PAIRINGS = ("star", "round-robin")


def duet_pairs(sides: list[dict], reference: str | None, pairing: str = "star", k: int = 0) -> list[tuple[dict, dict]]:
    """Which sides run together in duet round ``k``.

    star (the default): every candidate with the baseline (the gate's comparisons), and every
    other candidate with the ledger's reference (what each optimization bought); each comparison
    the report makes is then paired, at up to 2n-3 pairs a round.
    round-robin: each round one pairing of all sides (the circle method: the baseline stays, the
    others turn one place a round), so every side runs once a round and every two sides meet once
    in n-1 rounds; the rest of a comparison's runs are compared unpaired, inside the batch. With an
    odd number of sides, the side left without a partner runs with the baseline, which so runs
    in every round."""
    base, cands = sides[0], sides[1:]
    if pairing == "round-robin" and len(cands) > 1:
        ring = cands + ([None] if len(sides) % 2 else [])
        turn = k % len(ring)
        ring = ring[turn:] + ring[:turn]
        pairs = [(base, ring[0])] + [(ring[i], ring[-i]) for i in range(1, len(ring) // 2 + 1) if i != len(ring) - i]
        # the side that meets the bye runs with the baseline; on the baseline's own bye it runs
        # with the first side of another pair (twice this round): every round measures the baseline
        rest = [(base, a or b) if a is None or b is None else (a, b) for a, b in pairs[1:]]
        return [pairs[0] if pairs[0][1] is not None else (base, rest[0][0])] + rest
    pairs = [(base, c) for c in cands]
    ref = next((c for c in cands if c["label"] == reference), None)
    if ref is not None and len(cands) > 1:
        pairs += [(ref, c) for c in cands if c is not ref]
    return pairs


def duet_cpus() -> tuple[int, int]:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise UsageError(f"--duet needs two CPUs, one per side; this process may use {len(cpus)} ({cpus})")
    return cpus[0], cpus[1]


def _existing_command(base, conf, conf_path, suite_dir, sha, python) -> list[str]:
    """asv for one run of ``sha`` in an existing environment: asv takes no range there and runs the
    head of every configured branch, so a config copy naming only this commit (one per commit:
    two may run at once in a duet)."""
    one = suite_dir / f"asv.existing.{sha[:12]}.resolved.conf.json"
    one.write_text(json.dumps({**conf, "branches": [sha]}, indent=2))
    cmd = [c if c != str(conf_path) else str(one) for c in base]
    return cmd + ["-E", f"existing:{python}", "--set-commit-hash", sha, "-a", "rounds=1"]


def _worktrees(suite_dir: Path, repo_path: Path, shas: list[str]) -> Path:
    worktrees = suite_dir / ".asv" / "worktrees"
    for sha in shas:
        wt = worktrees / sha
        if not wt.exists():
            git(repo_path, "worktree", "add", "--detach", "-f", str(wt), sha)
    return worktrees


def _run_duets(base, conf, conf_path, suite_dir, pairs_of, rounds, first_round, env, pythons, repo_path, names, out,
               batch, done: set[str] = frozenset(), attempt: int = 0, share_cpu: bool = False) -> int:
    """``rounds`` duet rounds: in each, every pair runs at the same time, one side per CPU (the
    CPUs' roles swapped every round), every pool at one thread, each case started together with
    the partner's (a barrier in the benchmark), so the host's interference hits both alike.
    ``share_cpu``: the two sides of a pair share one CPU instead, their collector loops in turns
    (mbaphases/turns.py), so interference that stays on one CPU hits both alike; pairs without a
    side in common run at once, one per CPU, a round's last beside the next round's first (one
    side's two runs at once would race in asv's store).
    ``pythons``: each side's python (commit -> path). A resumed batch (``attempt`` > 0) skips the
    ``done`` pairs; its pairs get ids and barriers of their own (an interrupted pair's markers
    must not release the new one)."""
    cpus = duet_cpus()
    rc = 0
    # sharing a CPU, a wave may hold pairs of two rounds: a round's last pair runs beside the next
    # round's first instead of leaving a CPU idle (a round-robin of six sides has three pairs a round)
    todo, pair_count = [], {}
    for k in range(first_round, first_round + rounds):
        pairs = pairs_of(k)
        pair_count[k] = len(pairs)
        todo += [(f"r{k + 1}p{i + 1}", i, pair, k) for i, pair in enumerate(pairs) if f"r{k + 1}p{i + 1}" not in done]
    worktrees = _worktrees(suite_dir, repo_path, sorted({x["sha"] for item in todo for x in item[2]}))
    waves = _waves(todo, len(cpus)) if share_cpu else [[item] for item in todo]
    for w, wave in enumerate(waves):
        started, procs = [], []  # (process, its pair's barrier, its role); every process started
        try:
            for j, (name, i, pair, k) in enumerate(wave):
                pairs_in_round = pair_count[k]
                ordered = pair if k % 2 == 0 else pair[::-1]
                name += f".{attempt}" if attempt else ""
                barrier = suite_dir / ".asv" / "duet" / batch / name
                for role, x in enumerate(ordered):
                    if started:
                        _until_at_barrier(*started[-1])
                    cpu = cpus[(j + w) % len(cpus)] if share_cpu else cpus[role]
                    cmd = _existing_command(base, conf, conf_path, suite_dir, x["sha"], pythons[x["sha"]])
                    print(f"[duet round {k + 1}, pair {i + 1}/{pairs_in_round}] CPU {cpu}"
                          + (f" shared, turn {role + 1}" if share_cpu else "") + f": {names[x['sha']]}",
                          file=out, flush=True)
                    proc = processes.start(cmd, suite_dir, {
                        **env, "MBAPHASES_TARGET_DIR": str(worktrees / x["sha"]), "MBAPHASES_COMMIT": x["sha"],
                        "MBAPHASES_DUET_DIR": str(barrier), "MBAPHASES_DUET_PAIR": f"{batch}/{name}",
                        "MBAPHASES_DUET_ROLE": str(role), "MBAPHASES_DUET_CPU": str(cpu),
                        "MBAPHASES_DUET_PARTNER": ordered[1 - role]["sha"], "MBAPHASES_DUET_ROUND": str(k + 1),
                        **({"MBAPHASES_DUET_SHARE_CPU": "1"} if share_cpu else {})}, cpu=cpu, into=procs)
                    started.append((proc, barrier, role))
        except BaseException:
            processes.end_all(procs)  # interrupted while a side waits for the next's start
            raise
        codes = _wait_pairs(started)
        rc = rc or max(codes)
    return rc


def duet_pythons(conf: dict, conf_path: Path, suite_dir: Path, repo_path: Path, sides: list[dict],
                 python: str | None, out) -> dict[str, str]:
    """Each side's python in a duet. Sides whose checkout carries a lock (a published side, a field
    repository's commit) each get an environment of their own, made once (mbaphases.targets), as
    the two of a pair run installed at the same time; the demo target's sides share one (``python``,
    else this one) and run from their own checkouts."""
    shas = [x["sha"] for x in sides]
    worktrees = _worktrees(suite_dir, repo_path, shas)
    own = [x for x in sides if targets.own_environment(worktrees / x["sha"])]
    if not own:
        return dict.fromkeys(shas, python or sys.executable)
    if python is not None:
        raise UsageError(f"--python {python} with --duet: the sides {', '.join(x['label'] for x in own)} carry a lock "
                         "and each run in an environment of its own; leave --python out")
    pythons = dict.fromkeys(shas, sys.executable)
    runner_requirement = f"asv_runner=={metadata.version('asv_runner')}"
    for x in own:
        print(f"duet environment of {x['label']} ({x['ref']})", file=out, flush=True)
        try:
            pythons[x["sha"]] = str(targets.side_environment(
                suite_dir / ".asv" / "duet-env", worktrees / x["sha"], x["sha"], str(conf["pythons"][0]),
                list(conf.get("install_command") or []), conf_path.parent, runner_requirement))
        except targets.TargetError as e:
            raise UsageError(f"side {x['label']!r}: {e}") from None
    return pythons


def _waves(todo: list[tuple], width: int) -> list[list[tuple]]:
    """The pairs in groups that run at once: at most ``width``, no side in two of a group."""
    waves: list[list[tuple]] = []
    for item in todo:
        shas = {x["sha"] for x in item[2]}
        wave = next((w for w in waves if len(w) < width and not shas & {x["sha"] for it in w for x in it[2]}), None)
        if wave is None:
            waves.append([item])
        else:
            wave.append(item)
    return waves


def _until_at_barrier(proc, barrier: Path, role: int, timeout_s: float = 900.0) -> None:
    """The next side starts once the one started before it waits at its first case (or has ended):
    asv rewrites its machine file (~/.asv-machine.json) as it starts, and two starting at once can
    read it half-written. The barrier then holds each side until its partner arrives."""
    started = time.time()
    while not (barrier / f"case0.{role}").exists() and time.time() - started < timeout_s:
        if proc.poll() is not None:
            barrier.mkdir(parents=True, exist_ok=True)
            (barrier / f"ended.{role}").write_text(str(time.time()))
            return
        time.sleep(0.1)


def _profile_wave(suite_dir: Path, repo_path: Path, sides: list[dict], pythons: dict, env: dict, machine_dir: Path,
                  batch: str, names: dict, out) -> list[dict]:
    """The function profiles of the sides not yet profiled in this batch, each alone on one CPU, as
    many at once as there are CPUs; no measured run is running meanwhile. Returns the profiling
    processes that failed: a profile's failure is no measured run's, so it leaves the runs' status
    alone (a case the profiler could not run is recorded in its profile.json, as in a run)."""
    todo = [x for x in sides if not (machine_dir / x["sha"] / "profile" / batch / "profile.json").exists()]
    if not todo:
        return []
    cpus = duet_cpus()
    worktrees = _worktrees(suite_dir, repo_path, [x["sha"] for x in todo])
    failed = []
    for i in range(0, len(todo), len(cpus)):
        started = []
        wave = todo[i:i + len(cpus)]
        try:
            for cpu, x in zip(cpus, wave):
                print(f"[profile] CPU {cpu}: {names[x['sha']]}", file=out, flush=True)
                cmd = [pythons[x["sha"]], "-c", "from benchmarks._target import profile_side; profile_side()"]
                processes.start(cmd, suite_dir, {
                    **env, "MBAPHASES_TARGET_DIR": str(worktrees / x["sha"]), "MBAPHASES_COMMIT": x["sha"]}, cpu=cpu,
                    into=started)
        except BaseException:
            processes.end_all(started)
            raise
        for x, code in zip(wave, processes.wait_all(started)):
            if code != 0:
                print(f"[profile] {names[x['sha']]}: the profiling process exited {code}; this side has no "
                      "function table from this batch", file=out, flush=True)
                failed.append({"label": x["label"], "exit": code})
    return failed


def _wait_pairs(started: list[tuple]) -> list[int]:
    """Every side of the wave's pairs to its end; each side's end is marked in its pair's folder,
    so a partner that failed early is not waited for at every case."""
    pending = dict(enumerate(started))
    try:
        while pending:
            for n, (proc, barrier, role) in list(pending.items()):
                if proc.poll() is not None:
                    barrier.mkdir(parents=True, exist_ok=True)
                    (barrier / f"ended.{role}").write_text(str(time.time()))
                    del pending[n]
            time.sleep(0.2)
    except BaseException:
        processes.end_all([p for p, _, _ in started])  # interrupted: every side ends now, not at its run's end
        raise
    return processes.wait_all([p for p, _, _ in started])


def run_sides(conf_path: Path, pins: dict, runs: int, machine: str | None, python: str | None = None,
              only: list[str] | None = None, until_decisive: dict | None = None, out=sys.stdout,
              allow_other_hardware: bool = False, profile_functions: bool = False, duet: bool = False,
              resume: bool = False, resume_hint: str = "the same command with --resume goes on with this batch") -> int:
    """Run every side ``runs`` times with asv, interleaved; returns the exit status
    (0: every run of every case succeeded).

    ``until_decisive`` ({max_runs, budget_s, confidence, threshold}): afterwards add
    rounds of every side while a candidate has an INCONCLUSIVE case.
    ``resume``: if the newest batch of these pins on the machine did not finish, go on with it
    (its plan: sides, runs, profiles, until-decisive), running only what its kept runs miss;
    otherwise a new batch."""
    conf_path = Path(conf_path).resolve()
    conf = inputs.load_asv_conf(conf_path)
    suite_dir = conf_path.parent
    repo_path = _local_repo(conf, suite_dir)
    if runs < 1:
        raise UsageError(f"--runs {runs} must be >= 1")
    profile = pins["active_profile"]["name"]
    if duet:
        if repo_path is None:
            raise UsageError("--duet runs both sides of a pair from one existing environment, each from its own "
                             "checkout; it needs the target repository on this machine")
        cpus = duet_cpus()  # refused before anything is printed or measured
    machine = machine or default_machine(profile, duet)
    # beside results/, not in it: asv walks every folder under results/ and warns on each
    raw_dir = suite_dir / "raw-runs"
    if not allow_other_hardware:
        check_same_hardware(raw_dir, machine)
    prior = resume_mod.newest_record(raw_dir / machine, pins["path"]) if resume else None
    if resume and (prior is None or not resume_mod.unfinished(prior)):
        print("nothing to resume: " + (f"no batch of {pins['path']} on {machine}" if prior is None else
                                       f"batch {prior['batch']} finished") + "; a new batch", file=out, flush=True)
        prior = None
    if prior is not None:
        # the batch's own plan, whatever this command line says
        runs, until_decisive = prior["runs"], prior.get("until_decisive")
        profile_functions = bool(prior.get("profile_functions"))
        only = [x["label"] for x in prior["sides"] if x["role"] != "baseline"]
        if prior.get("duet"):
            pins = {**pins, "duet_pairing": prior["duet"]["pairing"],
                    "duet_share_cpu": bool(prior["duet"].get("share_cpu")), "duet_turn_ms": prior["duet"].get("turn_ms")}
    sides = resolve_sides(pins, repo_path, only)
    if prior is not None:
        resume_mod.check_sides(prior, sides)
    names = {x["sha"]: f"{x['label']} ({x['ref']})" for x in sides}
    for x in sides:
        print(f"{x['role']:<9} {x['sha']}  {x['label']} ({x['ref']})", file=out, flush=True)
    pythons = duet_pythons(conf, conf_path, suite_dir, repo_path, sides, python, out) if duet else None
    now = time.time()
    started = prior["started"] if prior else now
    batch = prior["batch"] if prior else f"{time.strftime('%Y%m%dT%H%M%S', time.localtime(started))}-{os.getpid()}"
    progress_file = suite_dir / ".asv" / f"progress-{batch}.json"
    progress_file.parent.mkdir(parents=True, exist_ok=True)
    env = _batch_env(pins, machine, raw_dir, batch, progress_file, allow_other_hardware, profile_functions)
    ensure_machine(conf_path, machine)
    set_aside_unreadable_results(suite_dir / conf.get("results_dir", "results") / machine, out)
    print(f"batch {batch}", file=out, flush=True)
    pairing = pins.get("duet_pairing", "star")
    share_cpu = bool(duet and pins.get("duet_share_cpu"))
    if share_cpu and pins.get("duet_turn_ms"):
        env["MBAPHASES_TURN_MS"] = str(pins["duet_turn_ms"])  # read by the entry's turns (mbaphases/turns.py)

    def pairs_of(k: int, among: list[dict] = sides) -> list[tuple[dict, dict]]:
        return duet_pairs(among, pins.get("reference"), pairing, k)

    pairs = pairs_of(0) if duet else None
    plan = (f"plan: {len(pairs)} duet pairs a round ({pairing}"
            + (", each pair's two sides in turns on one CPU" if share_cpu else "")
            + f") x {len(pins['cases'])} cases x {runs} rounds" if duet
            else f"plan: {len(sides)} sides x {len(pins['cases'])} cases x {runs} runs")
    print(estimate.text(raw_dir / machine / "batches", plan, 2 * len(pairs) if duet else len(sides), len(pins["cases"]),
                        runs, until_decisive["max_runs"] if until_decisive else None, profile_functions),
          file=out, flush=True)
    # where this machine's earlier runs of the design put the variance, and the steps and rounds
    # that reach the target at the least machine time (said here, kept in the batch record)
    allocated = allocation.plan(raw_dir / machine, pins["active_profile"],
                                allocation.design_of(duet, share_cpu, pairing, len(sides)), runs,
                                until_decisive["max_runs"] if until_decisive else None,
                                float(pins.get("target_half_width", allocation.TARGET_HALF_WIDTH)),
                                until_decisive["confidence"] if until_decisive else
                                float(pins.get("gate", {}).get("confidence", rules.DEFAULT_CONFIDENCE)))
    for line in allocation.text(allocated):
        print(line, file=out, flush=True)
    shas = [x["sha"] for x in sides]
    base = [sys.executable, "-m", "asv", "run", "--config", str(conf_path), "--machine", machine,
            "--record-samples", "--append-samples", "--show-stderr"]
    rc, done_runs = 0, runs
    kept = load.run_meta(raw_dir, machine, started) if prior else []
    done = resume_mod.runs_done(kept, batch)
    def runs_in(k: int, among: list[dict] = sides) -> dict[str, int]:
        return {x["label"]: (sum(x in pair for pair in pairs_of(k, among)) if duet else int(x in among)) for x in sides}

    runs_by_side = {x["label"]: sum(runs_in(k)[x["label"]] for k in range(runs)) for x in sides}
    # the pins and the asv config the run used: the report and find locate the config from here
    record = {"batch": batch, "machine": machine, "profile": profile, "started": started,
              "pins": str(Path(pins["path"]).resolve()), "config": str(conf_path), "cases": list(pins["cases"]),
              "profile_functions": profile_functions,
              "sides": [{k: x[k] for k in ("role", "label", "ref", "sha")} for x in sides], "runs": runs}
    if duet:
        record["duet"] = {"pairing": pairing, "pairs": [[a["label"], b["label"]] for a, b in pairs], "cpus": list(cpus),
                          "share_cpu": share_cpu, **({"turn_ms": pins["duet_turn_ms"]} if share_cpu and pins.get("duet_turn_ms") else {})}
    if until_decisive is not None:
        record["until_decisive"] = until_decisive
    if allocated is not None:
        record["allocation"] = allocated
    attempts = (prior.get("attempts") or [{"started": started}]) if prior else []
    if prior is not None:
        if "ended" not in attempts[-1]:  # its command's own end was not recorded (killed): its last run's
            attempts[-1]["ended"] = max([m.get("ended", 0) for m in kept if m.get("batch") == batch] + [attempts[-1]["started"]])
        print(f"resuming batch {batch} ({_how_it_ended(prior)}): {sum(done.values())} of its runs kept",
              file=out, flush=True)
    record["attempts"] = attempts + [{"started": now, "pid": os.getpid()}]
    _write_record(raw_dir / machine, {**record, "state": "running"})
    planned = sum(sum(runs_in(k).values()) for k in range(until_decisive["max_runs"] if until_decisive else runs))

    # sharing a CPU, the function profiles wait for the rounds' end (a pair's two profiles would share
    # its CPU while the other pair's CPU could sit idle), then run two sides at once, one CPU each
    profile_later = share_cpu and profile_functions
    rounds_env = {k: v for k, v in env.items() if k != "MBAPHASES_PROFILE_FUNCTIONS"} if profile_later else env

    def rounds_of(order: list[str], count: int, first: int, tag: str, skip: set[str] = frozenset()) -> int:
        if duet:
            among = [x for x in sides if x["sha"] in order]
            code = _run_duets(base, conf, conf_path, suite_dir, lambda k: pairs_of(k, among), count, first, rounds_env,
                              pythons, repo_path, names, out, batch, skip, len(record["attempts"]) - 1, share_cpu)
            if profile_later:
                failed = _profile_wave(suite_dir, repo_path, among, pythons, env, raw_dir / machine, batch, names, out)
                record.setdefault("profile_failures", []).extend(failed)
            return code
        return _run_round(base, conf, conf_path, suite_dir, order, count, env, python, repo_path, names, out, tag)

    try:
        with processes.terminate_as_interrupt(), Progress(progress_file, names, planned, raw_dir / machine, started, out):
            if prior is None:
                rc = rounds_of(shas, runs, 0, f"{int(started)}")
            elif duet:
                rc = rounds_of(shas, runs, 0, "", resume_mod.pairs_done(kept, batch))
            else:
                for j, order in enumerate(resume_mod.missing_rounds(done, shas, runs)):
                    rc = rounds_of(order, 1, 0, f"{int(now)}-resumed-{j + 1}") or rc
            if until_decisive is not None:
                # a resumed batch's extra rounds go on after the furthest one its kept runs reached
                done_runs = max([runs, *done.values()]) if prior and not duet else runs
                # the time budget counts the batch's attempts, not the pause between them
                budget_from = now - sum(x["ended"] - x["started"] for x in record["attempts"][:-1])

                def run_round(order: list[str], number: int) -> int:
                    nonlocal done_runs
                    done_runs = number  # kept current: an interrupted batch records what it ran
                    added = runs_in(number - 1, [x for x in sides if x["sha"] in order])
                    for label, n in added.items():
                        runs_by_side[label] += n
                    return rounds_of(order, 1, number - 1, f"{int(started)}-{number}")

                done_runs, rc = until_mod.add_rounds(
                    until_decisive, conf_path, pins, sides, machine, names, record, budget_from, done_runs, rc, run_round,
                    lambda: load.run_meta(raw_dir, machine, started), out)
    except KeyboardInterrupt as e:
        # every process the batch started has been ended (mbaphases.processes) before this line
        why = f" by {e}" if isinstance(e, processes.Interrupted) else ""
        # on a line of its own: asv's last line may have had no end
        print(f"\ninterrupted{why}: every completed run is kept under {raw_dir / machine}; no process of the batch "
              "is left", file=out)
        record["interrupted"] = str(e) if isinstance(e, processes.Interrupted) else "SIGINT"
        print(resume_hint, file=out)
        rc = 130
    finally:
        progress_file.unlink(missing_ok=True)
    return _finish_batch(record, raw_dir / machine, started, names, done_runs, runs_by_side, rc, out, resume_hint)


def _local_repo(conf: dict, suite_dir: Path) -> Path | None:
    """The target repository on this machine (None: a URL asv clones)."""
    repo = conf["repo"]
    repo_path = (suite_dir / repo) if not re.match(r"^\w+://", repo) else None
    if repo_path is not None and not repo_path.exists():
        raise UsageError(f"target repository {repo_path} not found (make it with: mbaphases demo-repo)")
    return repo_path


def _batch_env(pins: dict, machine: str, raw_dir: Path, batch: str, progress_file: Path,
               allow_other_hardware: bool, profile_functions: bool) -> dict:
    """What every entry run of the batch is told: profile, machine, pins, cases, where raw runs go,
    the batch, the live progress file; and whether to append to other hardware or profile."""
    return {**os.environ, "MBAPHASES_PROFILE": pins["active_profile"]["name"], "MBAPHASES_MACHINE": machine,
            "MBAPHASES_PINS": pins["path"], "MBAPHASES_CASES": ",".join(pins["cases"]),
            "MBAPHASES_RAW_DIR": str(raw_dir), "MBAPHASES_BATCH": batch,
            "MBAPHASES_PROGRESS": str(progress_file),
            **({"MBAPHASES_ALLOW_OTHER_HARDWARE": "1"} if allow_other_hardware else {}),
            **({"MBAPHASES_PROFILE_FUNCTIONS": "1", "MBAPHASES_PYSPY": pyspy_path()} if profile_functions else {})}


def _finish_batch(record: dict, machine_dir: Path, started: float, names: dict, done_runs: int,
                  runs_by_side: dict, rc: int, out, resume_hint: str) -> int:
    """The batch's end: failures and flagged runs said, the batch record written, the exit status."""
    metas = [m for m in load.run_meta(machine_dir.parent, machine_dir.name, started, out)
             if m.get("batch") == record["batch"]]
    failures, warnings = summarize(metas, names)
    for line in warnings + failures:
        print(line, file=out)
    entry_s = sum(m.get("ended", 0) - m.get("started", 0) for m in metas)
    ended = time.time()
    record["attempts"][-1].update(ended=ended, **({"interrupted": record["interrupted"]} if "interrupted" in record else {}))
    # a resumed batch's wall time is its attempts', not the pause between them
    wall_s = sum(a["ended"] - a["started"] for a in record["attempts"])
    # before the first run: asv's start and, the first time, the environment's build (once per
    # environment, so the estimate leaves it out)
    record["setup_seconds"] = min(m["started"] for m in metas) - started if metas else None
    expected = sum(runs_by_side.values())
    # a batch whose planned runs were not all recorded (a full disk) can be resumed, as an interrupted one
    state = "interrupted" if "interrupted" in record else "incomplete" if len(metas) < expected else "finished"
    record.update(ended=ended, runs_per_side=done_runs, runs_by_side=runs_by_side, entry_seconds=entry_s,
                  wall_seconds=wall_s, entry_share=entry_s / wall_s if wall_s else None, recorded_runs=len(metas),
                  state=state)
    if state == "incomplete":
        print((_no_room([machine_dir, Path(record["config"]).parent]) or
               f"{expected - len(metas)} planned runs left no record (see above)") + f"; {resume_hint}", file=out)
    try:
        _write_record(machine_dir, record)
    except OSError as e:
        # the record of its start stays: --resume finds the batch
        print(f"the batch record could not be written under {machine_dir / 'batches'} ({e.strerror or e})", file=out)
        rc = rc or 1
    print(f"{len(metas)} of {expected} runs recorded under {machine_dir}; "
          f"{len(failures)} failed case-runs; asv exit {rc}", file=out)
    print(f"entry time {entry_s:.0f} s of {wall_s:.0f} s wall ({entry_s / wall_s:.0%} inside the entry processes)"
          if wall_s else "", file=out)
    if rc == 130:
        return rc
    # a failed case or run is a verdict on the run (1), never asv's own exit code (2 reads as bad input)
    return 1 if failures or len(metas) < expected or rc else 0


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


def _no_room(folders: list[Path]) -> str | None:
    """A line naming the first of ``folders`` whose file system is full, if one is."""
    for folder in folders:
        try:
            free = shutil.disk_usage(folder).free
        except OSError:
            continue
        if free < 1 << 20:
            return (f"no space left on the file system of {folder} ({free // 1024} KiB free): the runs after that "
                    "could not be written; make room")
    return None


def _write_record(machine_dir: Path, record: dict) -> None:
    """The batch's record, replaced whole: at its start (its plan, ``running``) and at its end."""
    batches = machine_dir / "batches"
    batches.mkdir(parents=True, exist_ok=True)
    staging.write_text_atomic(batches / f"{record['batch']}.json", json.dumps(record, indent=2) + "\n")


def _how_it_ended(record: dict) -> str:
    if record.get("interrupted"):
        return f"interrupted by {record['interrupted']}"
    if record.get("state") == "incomplete":
        return f"{record.get('recorded_runs', 0)} of its planned runs recorded"
    return "its command ended without recording its end (killed, or its disk full)"


def recorded_batch(pins_path: Path) -> dict | None:
    """The newest batch record that ran ``pins_path`` (batch records of every machine, under the
    working directory's raw-runs/ and the pins' folder's) whose asv config still exists."""
    pins_path = Path(pins_path).resolve()
    found = [r for root in {Path.cwd().resolve(), pins_path.parent} for r in load.batch_records(root / "raw-runs")
             if r.get("pins") == str(pins_path) and r.get("config") and Path(r["config"]).is_file()]
    return max(found, key=lambda r: (r.get("started", 0), r.get("batch", ""))) if found else None


def recorded_config(pins_path: Path) -> Path | None:
    """The asv config of the newest batch that ran ``pins_path``, if it still exists."""
    record = recorded_batch(pins_path)
    return Path(record["config"]) if record else None


def publish(conf_path: Path) -> int:
    return subprocess.run([sys.executable, "-m", "asv", "publish", "--config", str(conf_path)],
                          cwd=Path(conf_path).resolve().parent, check=False).returncode
