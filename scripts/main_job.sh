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
step "A/B run (asv; duets run from the suite's environment, solo runs build asv's first, a few minutes)"
set +e
# 4 runs a side, then (2 planned looks at 95% each) one more round for the sides still open, or
# one replacement round for runs another process disturbed (the budget counts from the batch's
# start, so it must outlast the pinned rounds); one profiled run per side and case, outside the
# measured runs, for the function table. Duet rounds, each pair's two sides on one CPU with their
# collector loops taking turns (between steps, outside the timed parts), so a slowdown of that CPU
# hits both alike; every side once a round (round-robin), pairs without a side in common at once,
# one per CPU (docs/noise.md). --resume: after an interrupted job, the run goes on with its batch
# (its kept runs stay; only what they miss runs)
duet=(--duet --duet-share-cpu --duet-pairing round-robin)
mbaphases run --resume --profile-functions --until-decisive --max-runs 5 --budget-min 30 "${duet[@]}" "$@"
run_status=$?
set -e
if [ "$run_status" -eq 130 ]; then
    # interrupted (Ctrl-C, SIGTERM, SIGHUP): the runs it completed are kept and no process of it
    # is left; a report now would lack sides, so stop here
    step "interrupted during the A/B run (its completed runs are kept, counted above); run the main job again to resume its batch"
    exit 130
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
