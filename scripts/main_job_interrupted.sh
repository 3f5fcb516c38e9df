#!/usr/bin/env bash
# The main job from a fresh clone of this checkout in /tmp/mj (its .venv kept from an earlier
# try), Ctrl-C'd (SIGINT to its process group) during its A/B run after 6 duet runs, then run
# again: the second attempt must resume the batch and end with the report (docs/faults.md).
set -u
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mv /tmp/mj/.venv /tmp/mj-venv 2>/dev/null; rm -rf /tmp/mj && git clone -q "$src" /tmp/mj && mv /tmp/mj-venv /tmp/mj/.venv 2>/dev/null
cd /tmp/mj
export MBAPHASES_LOCK=/tmp/mj/formal.lock
t0=$(date +%s)
# a terminal's foreground job: its own group, SIGINT not ignored (a script's background job ignores it)
python3 -c "import os, signal; signal.signal(signal.SIGINT, signal.SIG_DFL); os.setsid(); os.execvp('bash', ['bash', 'scripts/main_job.sh'])" > /tmp/mj-1.log 2>&1 &
pid=$!
while [ "$(ls raw-runs/*-duet/*/run*.meta.json 2>/dev/null | wc -l)" -lt 6 ]; do sleep 2; kill -0 $pid 2>/dev/null || break; done
t1=$(date +%s)
kill -INT -- -$pid
wait $pid; echo "first attempt exit $? after $((t1 - t0)) s (Ctrl-C sent then)"
sleep 3
echo "processes of the first attempt left: $(grep -l "MBAPHASES_RAW_DIR=/tmp/mj/raw-runs" /proc/[0-9]*/environ 2>/dev/null | wc -l)"
t2=$(date +%s)
bash scripts/main_job.sh > /tmp/mj-2.log 2>&1; echo "second attempt exit $? in $(( $(date +%s) - t2 )) s"
