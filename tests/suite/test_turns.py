"""Two entries sharing one CPU in turns (mbaphases run --duet-share-cpu): the suite's token
protocol (mbaphases/turns.py), run by real processes pinned to one CPU, each doing real work per
step; and the reference target's entry taking turns with real physics. No framework needed: the protocol is standard-library code."""
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# one side: for each case, meet the partner, then `steps` steps of about `work_ms` of CPU work each,
# handing the token over between steps; every step's start and end and the turns' record printed
SIDE = r"""
import json, sys, time
from mbaphases.turns import Turns
folder, role, cases, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
work_ms, skip = float(sys.argv[5]), sys.argv[6]
turns = Turns(folder, role, 20.0)
out = []
for case in range(cases):
    if str(case) in skip.split(","):
        continue  # this side's case failed before its loop: it never arrives
    turns.begin(case)
    spans = []
    try:
        for _ in range(steps):
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < work_ms / 1000.0:
                pass
            spans.append((time.time() - (time.perf_counter() - t0), time.time()))
            turns.between_steps()
    finally:
        record = turns.end()
    out.append({"case": case, "spans": spans, "turns": record, "after_end": time.time()})
print(json.dumps(out))
"""


def run_pair(folder, cases=1, steps=40, work_ms=4.0, skip=("", ""), cpu=None):
    cpu = cpu if cpu is not None else sorted(os.sched_getaffinity(0))[0]
    procs = [subprocess.Popen([sys.executable, "-c", SIDE, str(folder), str(role), str(cases), str(steps),
                               str(work_ms), skip[role]], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                              preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
             for role in (0, 1)]
    outs = []
    for role, p in enumerate(procs):
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        (folder / f"ended.{role}").write_text("")
        outs.append(json.loads(out))
    return outs


def test_two_sides_on_one_cpu_take_turns_and_never_run_at_once(tmp_path):
    a, b = run_pair(tmp_path)
    ta, tb = a[0]["turns"], b[0]["turns"]
    assert ta["partner_met"] and tb["partner_met"]
    # 40 steps of 4 ms in turns of 20 ms: each side hands over several times
    assert ta["handovers"] >= 4 and tb["handovers"] >= 4, (ta, tb)
    # no step of one side overlaps a step of the other: one runs while the other waits
    spans = sorted([(s, e, 0) for s, e in a[0]["spans"]] + [(s, e, 1) for s, e in b[0]["spans"]])
    overlaps = sum(1 for (s1, e1, r1), (s2, e2, r2) in zip(spans, spans[1:]) if r1 != r2 and s2 < e1 - 0.001)
    assert overlaps == 0, overlaps
    # the sides alternate in runs of steps, not one after the other
    order = [r for _, _, r in spans]
    switches = sum(1 for x, y in zip(order, order[1:]) if x != y)
    assert switches >= 8, switches
    # each side waited about as long as the other worked
    assert ta["waited_s"] > 0.05 and tb["waited_s"] > 0.05


def test_a_side_whose_partner_skips_a_case_runs_it_alone_and_both_go_on(tmp_path):
    """Role 1's case 0 fails before its loop: role 0 must not wait for it. The harness marks a
    side's arrival at its next case (case<k>.<role>); here the side marks it itself."""
    marker = tmp_path / "case1.1"
    # the arrival at case 1 of the side that skipped case 0, as the harness's case barrier writes it
    marker.write_text(str(time.time()))
    a, b = run_pair(tmp_path, cases=2, steps=10, skip=("", "0"))
    assert not a[0]["turns"]["partner_met"] and a[0]["turns"]["handovers"] == 0
    assert [c["case"] for c in b] == [1]
    assert a[1]["turns"]["partner_met"] and b[0]["turns"]["partner_met"]


def test_a_side_that_ends_its_loop_early_frees_its_partner(tmp_path):
    """Role 1 measures 3 steps, role 0 forty: after role 1 leaves, role 0 runs on alone."""
    cpu = sorted(os.sched_getaffinity(0))[0]
    procs = []
    for role, steps in ((0, 40), (1, 3)):
        procs.append(subprocess.Popen([sys.executable, "-c", SIDE, str(tmp_path), str(role), "1", str(steps), "4", ""],
                                      cwd=ROOT, stdout=subprocess.PIPE, text=True,
                                      preexec_fn=lambda: os.sched_setaffinity(0, {cpu})))
    outs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert len(outs[0][0]["spans"]) == 40 and len(outs[1][0]["spans"]) == 3
    # and role 1 does nothing more on the shared CPU (its summary, its next case) until role 0's
    # loop has ended: that work would land inside role 0's timed steps
    assert outs[1][0]["after_end"] >= outs[0][0]["spans"][-1][1]
    assert outs[1][0]["turns"]["waited_partner_end_s"] > 0.05  # role 0's 37 steps of 4 ms alone
    assert outs[0][0]["turns"]["waited_partner_end_s"] < 0.05  # the partner had ended: no wait


def test_the_reference_entry_takes_turns_when_the_harness_names_the_protocol(tmp_path):
    """The demo target's entry (reflab.bench), two of it on one CPU as a shared-CPU duet runs them:
    each loads the protocol from the path the harness gives, meets its partner at each case's loop
    and hands the CPU over between steps; the JSON says so per case and in its provenance."""
    cpu = sorted(os.sched_getaffinity(0))[0]
    folder = tmp_path / "pair"
    procs = []
    for role in (0, 1):
        env = {**os.environ, "MBAPHASES_TURNS_MODULE": os.path.join(ROOT, "mbaphases", "turns.py"),
               "MBAPHASES_TURNS_DIR": str(folder), "MBAPHASES_TURNS_ROLE": str(role), "MBAPHASES_TURN_MS": "2",
               "UNILAB_COLLECTOR_TORCH_THREADS": "1"}
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "reflab.bench", "--cases", "sac/g1_walk_flat/mujoco,sac/g1_walk_flat/motrix",
             "--num-envs", "8", "--warmup-steps", "2", "--measure-steps", "30", "--replay-capacity-steps", "4",
             "--override", "sim.nthread=1", "--out-json", str(tmp_path / f"r{role}.json")],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=lambda: os.sched_setaffinity(0, {cpu})))
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
    for role in (0, 1):
        doc = json.loads((tmp_path / f"r{role}.json").read_text())
        assert doc["provenance"]["turns"] == {"role": role, "turn_ms": 2.0}
        assert len(doc["results"]) == 2
        for r in doc["results"]:
            t = r["turns"]
            assert t["role"] == role and t["partner_met"], t
            assert t["handovers"] >= 3 and t["waited_s"] > 0, t  # 32 steps in turns of 2 ms: several handovers


def test_the_reference_entry_runs_alone_without_the_protocol(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MBAPHASES_TURN")}
    p = subprocess.run([sys.executable, "-m", "reflab.bench", "--cases", "sac/g1_walk_flat/mujoco", "--num-envs", "8",
                        "--warmup-steps", "1", "--measure-steps", "3", "--replay-capacity-steps", "4",
                        "--out-json", str(tmp_path / "r.json")], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["provenance"]["turns"] is None and doc["results"][0]["turns"] is None
