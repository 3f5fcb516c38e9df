#!/usr/bin/env bash
# The main job, from a fresh clone: installs what it needs, (re)generates the
# demo target repository, runs the pinned A/B with asv (>= 3 interleaved runs
# per side, raw runs and environment kept), publishes html/, and writes the
# report. Options go to `mbaphases run` (e.g. --runs 5); the profile comes from
# pins.toml or MBAPHASES_PROFILE (e.g. MBAPHASES_PROFILE=seed).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
step() { echo "[main job $(date +%H:%M:%S)] $*" >&2; }

step "demo target repository"
mbaphases demo-repo --path demo-target
step "A/B run (asv; pairs run from the suite's environment, a few minutes)"
set +e
# 3 runs a side, then a look after every round from the third (the error spent over the looks by
# the Lan-DeMets Pocock-type function, the levels printed in the plan) and one more round for the
# sides still open, up to 5, or one replacement round for runs another process disturbed (the budget
# counts from the batch's start, so it must outlast the pinned rounds); after the verdicts, one profiled
# run per case a candidate FAILs, of it and of the baseline, for the function table. Pairs in turns: each pair's two sides on one slot of the
# profile's CPUs (the demo's two, where the host has them; one on a one-CPU runner, said in the plan),
# their collector loops taking turns between steps, outside the timed parts, so a slowdown of those
# CPUs hits both alike; every side once a round (round-robin) (docs/log/noise.md). --resume: after an
# interrupted job, the run goes on with its batch (its kept runs stay; only what they miss runs)
mbaphases run --resume --profile-functions --runs 3 --until-decisive --max-runs 5 --budget-min 30 \
    --design turns --pairing round-robin "$@"
run_status=$?
set -e
if [ "$run_status" -eq 130 ]; then
    # interrupted (Ctrl-C, SIGTERM, SIGHUP): the runs it completed are kept and no process of it
    # is left; a report now would lack sides, so stop here
    step "interrupted during the A/B run (its completed runs are kept, counted above); run the main job again to resume its batch"
    exit 130
fi
if [ "$run_status" -ge 2 ]; then
    # refused or failed before its runs (its error line above): a report now would show other
    # batches' verdicts as if they were this job's
    step "the A/B run stopped (exit $run_status, its error above); nothing published or reported: mend what it names and run the main job again"
    exit "$run_status"
fi
step "asv publish -> html/"
mbaphases publish
step "report from the stored results"
set +e
mbaphases report --out reports/demo --html html/mbaphases
report_status=$?
set -e
step "report: $ROOT/reports/demo/report.md; page: $ROOT/html/mbaphases/index.html (asv preview, then /mbaphases/)"
if [ "$run_status" -ne 0 ]; then
    step "some runs failed (listed above): exit $run_status"
    exit "$run_status"
fi
# the verdict is a result, not an error: the job succeeds whatever it says
[ "$report_status" -le 1 ] || exit "$report_status"
