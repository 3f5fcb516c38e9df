#!/usr/bin/env bash
# The main job from a fresh clone of this checkout (in DIR/clone; DIR defaults to a new temporary
# folder), Ctrl-C'd (SIGINT to its process group) during its A/B run after 6 runs, then run again:
# the second attempt must resume the batch and end with the report (docs/faults.md).
#   bash scripts/main_job_interrupted.sh [DIR]
set -u
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${1:-$(mktemp -d -t mbaphases-main-job-XXXXXX)}"
clone="$work/clone"
if [ -e "$clone" ]; then
    echo "error: $clone exists; valid: a DIR without clone/ in it (this script removes nothing it did not make)" >&2
    exit 2
fi
mkdir -p "$work" && git clone -q "$src" "$clone" && cd "$clone" || exit 2
export MBAPHASES_LOCK="$clone/formal.lock"
t0=$(date +%s)
# a terminal's foreground job: its own group, SIGINT not ignored (a script's background job ignores it)
python3 -c "import os, signal; signal.signal(signal.SIGINT, signal.SIG_DFL); os.setsid(); os.execvp('bash', ['bash', 'scripts/main_job.sh'])" > "$work/attempt-1.log" 2>&1 &
pid=$!
while [ "$(ls raw-runs/*/*/run*.meta.json 2>/dev/null | wc -l)" -lt 6 ]; do sleep 2; kill -0 $pid 2>/dev/null || break; done
t1=$(date +%s)
kill -INT -- -$pid
wait $pid; echo "first attempt exit $? after $((t1 - t0)) s (Ctrl-C sent then)"
sleep 3
echo "processes of the first attempt left: $(grep -l "MBAPHASES_PINS=$clone/pins.toml" /proc/[0-9]*/environ 2>/dev/null | wc -l)"
echo "block folders left: $(ls .asv/blocks 2>/dev/null | wc -l)"
t2=$(date +%s)
bash scripts/main_job.sh > "$work/attempt-2.log" 2>&1; echo "second attempt exit $? in $(( $(date +%s) - t2 )) s"
echo "logs: $work/attempt-1.log, $work/attempt-2.log"
