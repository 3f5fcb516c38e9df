"""One machine as a fleet of one node (mbaphases.run.executors.local_node): on two one-CPU slots, a
star's pairs (every one holding the baseline) run at once, each block in a staging store of its own,
gathered into the machine's store; an interrupted batch leaves no process and no staging store, and
--resume completes it. Real asv, real physics, the demo target."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_duet import aa_suite

from mbaphases import processes

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow(seconds=150), pytest.mark.two_cpus]  # real asv runs: minutes; two one-CPU slots

ROUNDS = 2


def star_suite(tmp):
    """main against two commits of its own tree (``aa``, ``ab``): a star of three sides (two pairs of
    a round hold main); a one-thread profile, so two CPUs are two slots."""
    suite = aa_suite(tmp)
    repo = suite / "demo-target"
    for args in (["checkout", "-q", "-b", "ab", "aa"],
                 ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "again"],
                 ["checkout", "-q", "main"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    pins = suite / "pins.toml"
    text = pins.read_text().replace('[candidate]\nref = "aa"\nlabel = "main again"\n',
                                    '[[candidates]]\nref = "aa"\nlabel = "main again"\n\n'
                                    '[[candidates]]\nref = "ab"\nlabel = "main once more"\n')
    assert "ref = \"ab\"" in text
    pins.write_text(text + '\n[profiles.star]\nnum_envs = 8\nwarmup_steps = 1\nmeasure_steps = 10\n'
                    'replay_capacity_steps = 4\ntorch_threads = 1\noverrides = ["sim.nthread=1"]\n')
    return suite


def start(suite, machine: str, *extra: str) -> subprocess.Popen:
    """The batch on the first two CPUs, started as a terminal would start it: its own foreground group,
    SIGINT as default (a shell's background job starts with SIGINT ignored, and the tests started
    from one would pass that on: the batch would never see the Ctrl-C)."""
    cpus = ",".join(map(str, sorted(os.sched_getaffinity(0))[:2]))
    return subprocess.Popen(["taskset", "-c", cpus, sys.executable, "-m", "mbaphases.cli", "run", "--design", "turns",
                             "--profile", "star", "--runs", str(ROUNDS), "--machine", machine, *extra],
                            cwd=suite, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "MBAPHASES_LOCK": str(suite / "formal.lock")},
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def metas_of(suite, machine: str) -> list[dict]:
    return [json.loads(m.read_text()) for m in (suite / "raw-runs" / machine).glob("*/run*.meta.json")]


def left_behind(suite) -> list:
    """What of the batch is left: a block's folder (its staging store inside), a process of the batch."""
    folders = sorted(p.name for p in (suite / ".asv" / "blocks").iterdir())
    return folders + processes.with_env(f"MBAPHASES_PINS={suite / 'pins.toml'}")


def block_names(record: dict) -> list[str]:
    return sorted(f"r{k + 1}p{i + 1}" for k in range(ROUNDS) for i in range(len(record["duet"]["pairs"])))


@pytest.fixture(scope="module")
def star(tmp_path_factory):
    return star_suite(tmp_path_factory.mktemp("star"))


def test_a_stars_pairs_share_the_baseline_and_run_at_once_on_two_slots(star):
    p = start(star, "starbox")
    out, err = p.communicate(timeout=900)
    assert p.returncode == 0, out[-3000:] + err[-3000:]
    record = json.loads(next((star / "raw-runs" / "starbox" / "batches").glob("*.json")).read_text())
    blocks = record["node"]["blocks"]
    assert sorted(b["block"] for b in blocks) == block_names(record)
    assert "fleet" not in record and all(b["machine"] == "starbox" for b in blocks)
    # each block on one CPU, and the two slots both used: the pairs share main, and still overlap
    assert all(len(b["cpus"]) == 1 for b in blocks) and len({b["cpus"][0] for b in blocks}) == 2
    spans = sorted((b["began"], b["ended"]) for b in blocks)
    assert any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:])), spans
    use = record["node"]["occupancy"]
    assert use["slots"] == 2 and 0 < use["occupancy"] <= 1
    assert use["block_s"] == pytest.approx(sum(e - b for b, e in spans), abs=0.01)
    # every run gathered into the machine's store, numbered there, each pair's two sides recorded
    metas = metas_of(star, "starbox")
    assert len(metas) == 2 * len(blocks) and all(not m["failed_cases"] for m in metas)
    main = [m for m in metas if m["commit"] == record["sides"][0]["sha"]]
    with_main = sum("main direct" in pair for pair in record["duet"]["pairs"])
    assert with_main >= 2 and sorted(m["run"] for m in main) == list(range(1, ROUNDS * with_main + 1))
    assert "fleet" not in main[0] and left_behind(star) == []
    # the same measure from the stored runs alone (the script that reads batches from before the record kept it)
    t = subprocess.run([sys.executable, str(ROOT / "scripts" / "slot_occupancy.py"), str(star / "raw-runs" / "starbox")],
                       capture_output=True, text=True, timeout=60)
    assert t.returncode == 0, t.stderr
    # its two tables: the slots' occupancy, then where a block's wall went (medians over the blocks)
    occupancy, cost = [line.split(" | ") for line in t.stdout.splitlines() if line.startswith(f"| {record['batch']} ")]
    assert int(occupancy[1]) == len(blocks) and int(occupancy[2]) == 2 and 0 < float(occupancy[5]) <= 1
    assert float(occupancy[6].rstrip(" |")) == use["occupancy"]
    block, before, entries, timed, after = map(float, cost[2:6] + [cost[6].rstrip(" |")])
    assert int(cost[1]) == len(blocks) and 0 < timed < entries < block and before > 0 and after > 0


def test_an_interrupted_star_leaves_nothing_running_and_resume_completes_it(star):
    p = start(star, "starstop")
    # interrupted once both slots have a block running (a block's staging store exists)
    deadline = time.time() + 300
    while time.time() < deadline and len(list((star / ".asv" / "blocks").glob("*/mbaphases-block-*"))) < 2:
        time.sleep(0.2)
    assert p.poll() is None
    time.sleep(3)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 130, out[-3000:] + err[-3000:]
    assert "interrupted" in out and "--resume" in out
    assert left_behind(star) == []
    kept = metas_of(star, "starstop")
    assert len(kept) % 2 == 0  # a block comes back whole or not at all
    p = start(star, "starstop", "--resume")
    out, err = p.communicate(timeout=900)
    assert p.returncode == 0, out[-3000:] + err[-3000:]
    assert "resuming batch" in out
    metas = metas_of(star, "starstop")
    # every pair of the batch once, both its sides, whichever attempt ran it
    pairs = [m["duet"]["pair"].split("/", 1)[1].split(".")[0] for m in metas]
    record = json.loads(next((star / "raw-runs" / "starstop" / "batches").glob("*.json")).read_text())
    assert sorted(pairs) == sorted(block_names(record) * 2), pairs
    assert left_behind(star) == []
