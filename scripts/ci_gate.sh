#!/usr/bin/env bash
# The pull-request gate, as a CI job runs it (docs/ci.md; the workflow docs/ci/collector-ab.yml runs
# exactly this): an A/B of BASE and HEAD with `mbaphases ab`, pairs in turns on the CPUs the job has
# (one on a one-CPU runner, said in the plan and on every verdict), ended by its deadline before the
# job's cap, then a short Markdown summary (reports/ci-gate-summary.md, and the job's page when
# $GITHUB_STEP_SUMMARY is set).
#
#   bash scripts/ci_gate.sh BASE HEAD --repo PATH [mbaphases ab options]   # commits of a checkout
#   bash scripts/ci_gate.sh 'unilab[mujoco,motrix]==1.4.0' --swap unisim-core==2.2.0 [options]
#
# With --repo the demo profile runs unless --profile (or MBAPHASES_PROFILE) names another.
#
# MBAPHASES_CI_DEADLINE_MIN (default 10): the runs' deadline, the job's cap less the suite's
# install and the report. Exit: 0 PASS, 1 not PASS, 2 bad input (as mbaphases ab).
set -euo pipefail
if [ $# -lt 2 ]; then
    echo "error: ci_gate.sh needs BASE and HEAD (refs with --repo PATH, or requirements), got $# argument(s)" >&2
    exit 2
fi
caller="$PWD"
args=()
repo=0
profile=0
while [ $# -gt 0 ]; do
    # a repository named relative to the caller's folder: the suite runs from its own
    if [ "$1" = "--repo" ] && [ $# -ge 2 ]; then
        args+=("--repo" "$(cd "$caller" && realpath -m "$2")"); shift 2; repo=1
    else
        case "$1" in --profile|--profile=*) profile=1 ;; esac
        args+=("$1"); shift
    fi
done
# commits of a repository: the demo profile unless one is named (a field repository's pins default
# to the field's own size, 8192 envs, whose first run alone outlasts a one-CPU job's cap; the
# requirement forms' template already defaults to a small one)
if [ "$repo" -eq 1 ] && [ "$profile" -eq 0 ] && [ -z "${MBAPHASES_PROFILE:-}" ]; then
    args+=("--profile" "demo")
fi
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
for ((i = 0; i < ${#args[@]}; i++)); do
    # the suite's demo target, made where it is missing (the demo's own PR gate)
    if [ "${args[$i]}" = "--repo" ] && [ "${args[$((i + 1))]}" = "$ROOT/demo-target" ] && [ ! -d "$ROOT/demo-target/.git" ]; then
        mbaphases demo-repo --path demo-target
    fi
done
summary="$ROOT/reports/ci-gate-summary.md"
mkdir -p "$(dirname "$summary")"
set +e
mbaphases ab "${args[@]}" --deadline-min "${MBAPHASES_CI_DEADLINE_MIN:-10}" --summary "$summary"
status=$?
set -e
# the job's page: GitHub gives each step a summary file of its own, so a later step (the pull
# request's comment) reads the one under reports/
if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -f "$summary" ]; then
    cat "$summary" >> "$GITHUB_STEP_SUMMARY"
fi
echo "[ci gate] summary: $summary; exit $status" >&2
exit "$status"
