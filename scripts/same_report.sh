#!/usr/bin/env bash
# The same stored runs through two commits of the suite: are the report files the same, byte for
# byte? For a change meant to keep behaviour (a refactor). Both reports are made in the same
# folder (paths appear in them) with SOURCE_DATE_EPOCH fixed (the report's date).
#   bash scripts/same_report.sh BEFORE AFTER [MACHINE]     (MACHINE: default vm-demo-slots, the committed example)
# Exit 0: identical; 1: they differ (the differing lines are printed); 2: bad input.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
if [ $# -lt 2 ]; then echo "error: give BEFORE and AFTER (commits of this repository)" >&2; exit 2; fi
BEFORE=$1; AFTER=$2; MACHINE=${3:-vm-demo-slots}
for rev in "$BEFORE" "$AFTER"; do
    git -C "$ROOT" rev-parse -q --verify "$rev^{commit}" >/dev/null || { echo "error: $rev is not a commit of $ROOT" >&2; exit 2; }
done
[ -d "$ROOT/results/$MACHINE" ] || { echo "error: no stored results for machine $MACHINE under $ROOT/results" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'git -C "$ROOT" worktree remove --force "$WORK/suite" 2>/dev/null || true; rm -rf "$WORK"' EXIT
for side in before after; do
    rev=$BEFORE; [ $side = after ] && rev=$AFTER
    git -C "$ROOT" worktree add -q --detach "$WORK/suite" "$rev"
    # the stored runs under test are the working tree's, whatever the two commits hold
    rm -rf "$WORK/suite/results" "$WORK/suite/raw-runs"
    mkdir -p "$WORK/suite/results" "$WORK/suite/raw-runs"
    cp -r "$ROOT/results/$MACHINE" "$WORK/suite/results/"
    cp "$ROOT/results/benchmarks.json" "$WORK/suite/results/" 2>/dev/null || true
    [ ! -d "$ROOT/raw-runs/$MACHINE" ] || cp -r "$ROOT/raw-runs/$MACHINE" "$WORK/suite/raw-runs/"
    (cd "$WORK/suite" && python -m mbaphases.cli demo-repo >/dev/null)
    rc=0
    (cd "$WORK/suite" && SOURCE_DATE_EPOCH=1796000000 python -m mbaphases.cli report --machine "$MACHINE" \
        --out "$WORK/$side/report" --html "$WORK/$side/html" --quiet) || rc=$?
    [ $rc -le 1 ] || { echo "error: the report at $rev exited $rc" >&2; exit 2; }
    git -C "$ROOT" worktree remove --force "$WORK/suite"
done
if diff -r "$WORK/before" "$WORK/after"; then
    echo "identical: $(find "$WORK/after" -type f | wc -l) files, byte for byte"
else
    exit 1
fi
