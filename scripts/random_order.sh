#!/usr/bin/env bash
# The tests in a random order (pytest-randomly: files, then the tests in each, shuffled by SEED), so
# that no test passes only after another left something behind. One process; further arguments go to
# pytest, e.g. `bash scripts/random_order.sh 1 -m "not slow"`. The seeds tried are in docs/log/measurements.md.
set -euo pipefail
if [ $# -lt 1 ] || ! [[ "$1" =~ ^[0-9]+$ ]]; then
    echo "error: random_order.sh needs a SEED (a whole number) first, got '${1:-}'" >&2
    exit 2
fi
seed="$1"; shift
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
python -m pytest --randomly-seed "$seed" "$@"
