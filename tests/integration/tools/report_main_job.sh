#!/usr/bin/env bash
# The main job (collguard-train-demo, briefly, with counters every 1 ms)
# writes a timeline and rank 0's metrics file; report_main_job.py then
# holds integration/tools/timeline_report.py's numbers to both.
# Usage: report_main_job.sh COLLGUARD_RUN DEMO TOOL
set -euo pipefail
run=$1 demo=$2 tool=$3
out=$(mktemp -d /tmp/cg_tl_report_job.XXXXXX)
trap 'rm -rf "$out"' EXIT
unset CG_METRICS_FILE HOROVOD_TIMELINE CG_TIMELINE
if ! CG_TIMELINE_COUNTER_PERIOD=1ms "$run" -np 3 --timeout 100s "$demo" \
       --steps 6 --layers 1 --hidden 64 --compute-ms 0 --out "$out" \
       >"$out/log" 2>&1; then
    cat "$out/log"; echo "FAIL: the main job exited non-zero"; exit 1
fi
/usr/bin/python3 "$(dirname "$0")/report_main_job.py" "$tool" "$out"
