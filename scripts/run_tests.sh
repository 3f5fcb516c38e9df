#!/usr/bin/env bash
# The test command: installs what it needs (the .venv, Debian's chromium for the
# report-page test, Debian's slurm-wlm and munge for the Slurm fleet's test), then
# lints (ruff) and runs the whole suite.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v slurmctld >/dev/null 2>&1 || missing+=(slurm-wlm)
command -v munged >/dev/null 2>&1 || missing+=(munge)
if [ ${#missing[@]} -gt 0 ]; then
    echo "[setup] installing Debian's ${missing[*]} (headless page test, a single-node Slurm)" >&2
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >&2
fi
# lint first: configured in pyproject.toml ([tool.ruff])
ruff check .
# The tests as one-CPU streams, one a CPU (pytest-xdist's workers, each pinned: tests/conftest.py), a
# file's tests in one stream, in the order the streams are given them (the longest files first);
# then, alone, the tests that need two CPUs at once (marked two_cpus).
# Exit 5 (no test selected) fails only when neither part selected one.
streams=0 pairs=0
# the streams' order is theirs (longest files first, tests/conftest.py): random order is a check of its
# own (scripts/random_order.sh)
python -m pytest -p no:randomly -n "$(nproc)" --dist loadfile --no-loadscope-reorder "$@" || streams=$?
python -m pytest -p no:randomly --two-cpus-only "$@" || pairs=$?
if [ "$streams" -eq 5 ] && [ "$pairs" -eq 5 ]; then exit 5; fi
for status in "$streams" "$pairs"; do
    if [ "$status" -ne 0 ] && [ "$status" -ne 5 ]; then exit "$status"; fi
done
