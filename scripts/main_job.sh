#!/usr/bin/env bash
# The main job: installs what it needs, then runs the reference collector over
# the seven cases at the demo size and prints the throughput/phase table.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
exec python -m reflab.bench --cases default --all --num-envs 256 --warmup-steps 5 --measure-steps 40 \
    --out-json reports/reflab-direct/results.json --out-csv reports/reflab-direct/results.csv "$@"
