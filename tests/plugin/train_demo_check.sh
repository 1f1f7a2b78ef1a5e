#!/usr/bin/env bash
# collguard-train-demo end to end, briefly: every element of the broadcast
# and of each step's averaged gradients exact on every rank, the squeeze
# seen (warn and critical rows), one valid Prometheus file per rank with the
# shim's final counters, a timeline; and a spoiled element makes it fail.
# Usage: train_demo_check.sh LAUNCHER... -- DEMO PROM_CHECK
# (LAUNCHER: collguard-run, or mpirun with its options, without -np).
set -euo pipefail
launcher=()
while [ "$1" != "--" ]; do launcher+=("$1"); shift; done
demo=$2 check=$3
out=$(mktemp -d /tmp/cg_train_demo.XXXXXX)
trap 'rm -rf "$out"' EXIT
np=3 steps=6 layers=1
tensors=$((12 * layers + 3))
unset CG_METRICS_FILE HOROVOD_TIMELINE

small=(--hidden 64 --compute-ms 0 --out "$out")
if ! "${launcher[@]}" -np $np "$demo" --steps $steps --layers $layers \
       "${small[@]}" >"$out/log" 2>&1; then
    cat "$out/log"; echo "FAIL: the demo exited non-zero"; exit 1
fi
cat "$out/log"
grep -q "on every rank matched the reference" "$out/log" ||
    { echo "FAIL: no verdict line"; exit 1; }
rows=$(grep -cE ' exact$' "$out/log" || true)
[ "$rows" -eq $((steps + 1)) ] ||
    { echo "FAIL: $rows exact rows, want $((steps + 1))"; exit 1; }
grep -qE ' warn +[0-9]' "$out/log" &&
    grep -qE ' critical +[0-9]' "$out/log" ||
    { echo "FAIL: the squeeze did not show as warn and critical rows"; exit 1; }
expects=()
for ((r = 0; r < np; r++)); do
    # steps x tensors gradients, plus one verdict allreduce per step and
    # one after the broadcast.
    n=$((steps * tensors + steps + 1))
    expects+=("collguard_hvd_allreduce_tensors_total{rank=\"$r\"}=$n")
    expects+=("collguard_hvd_cycles_total{rank=\"$r\"}=>0")
    expects+=("collguard_governor_budget_bytes{rank=\"$r\"}=>0")
done
/usr/bin/python3 "$check" "$out"/metrics.rank*.prom --expect "${expects[@]}"
[ "$(ls "$out"/metrics.rank*.prom | wc -l)" -eq $np ] ||
    { echo "FAIL: want $np metrics files"; ls "$out"; exit 1; }
[ -s "$out/timeline.json" ] ||
    { echo "FAIL: no timeline at $out/timeline.json"; exit 1; }

# The check can fail: the last rank spoils one element of step 2.
if "${launcher[@]}" -np 2 "$demo" --steps 6 --layers 0 "${small[@]}" \
       --corrupt-step 2 >"$out/log2" 2>&1; then
    cat "$out/log2"; echo "FAIL: a spoiled element went unnoticed"; exit 1
fi
grep -q "1 wrong elements; first: step 2: gradient" "$out/log2" &&
    grep -qE '^\[0\] +2 .* WRONG$|^ +2 .* WRONG$' "$out/log2" ||
    { cat "$out/log2"; echo "FAIL: the spoiled element not reported"; exit 1; }
echo "train demo: exact on $np ranks, squeeze seen, metrics valid;" \
     "a spoiled element caught"
