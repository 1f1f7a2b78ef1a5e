#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# AllReduce results do not depend on memory pressure: runs cg_allreduce_perf
# on random f32 data (sums that round) with hashes (-H) twice with the ring
# (CG_ALGO=ring), unpressured and with a small chunk plus CG_FAULT_ALLOC=3
# (the governor shrinks the chunk further), and requires identical hashes
# on every rank and in both runs, and recovered allocation failures in the
# second. A third run through shared memory (CG_ALGO=shm, small slots, so
# many rounds) must give the ring's hashes too.
# usage: pressure_same_result.sh <collguard-run> <cg_allreduce_perf>
set -u
run=$1 perf=$2
args=(-np 3 "$perf" -t socket -R -H -c 0 -n 2 -w 0 -d f32 -b 3M -e 3M)
dir=$(mktemp -d) || exit 2
trap 'rm -rf "$dir"' EXIT

export CG_ALGO=ring
env -u CG_FAULT_ALLOC -u CG_CHUNK_SIZE "$run" "${args[@]}" >"$dir/a" 2>&1 ||
    { cat "$dir/a"; echo "FAIL: unpressured run"; exit 1; }
CG_CHUNK_SIZE=96K CG_CHUNK_MIN=4K CG_FAULT_ALLOC=3 \
    "$run" "${args[@]}" >"$dir/b" 2>&1 ||
    { cat "$dir/b"; echo "FAIL: pressured run"; exit 1; }
env -u CG_FAULT_ALLOC -u CG_CHUNK_SIZE CG_ALGO=shm CG_SHM_SLOT=64K \
    "$run" "${args[@]}" >"$dir/c" 2>&1 ||
    { cat "$dir/c"; echo "FAIL: shared-memory run"; exit 1; }
hashes() { grep -o '# hash .*' "$1" | sed 's/ rank [0-9]*:/:/' | sort -u; }
na=$(hashes "$dir/a" | wc -l)
if [ "$na" -ne 2 ]; then
    cat "$dir/a"; echo "FAIL: ranks disagree (want one hash per column)"; exit 1
fi
if ! diff <(hashes "$dir/a") <(hashes "$dir/b"); then
    cat "$dir/a" "$dir/b"; echo "FAIL: pressure changed the result"; exit 1
fi
if ! diff <(hashes "$dir/a") <(hashes "$dir/c"); then
    cat "$dir/a" "$dir/c"; echo "FAIL: shared memory differs from the ring"
    exit 1
fi
fails=$(sed -n 's/.* \([0-9]*\) allocation failures recovered/\1/p' "$dir/b")
chunk=$(sed -n 's/.*chunk \([0-9]*\) bytes now.*/\1/p' "$dir/b")
if [ -z "$fails" ] || [ "$fails" -eq 0 ]; then
    cat "$dir/b"; echo "FAIL: no allocation failure was injected"; exit 1
fi
hashes "$dir/a"
echo "ok: identical under pressure ($fails failures recovered, chunk $chunk)"
echo "ok: shared memory gives the ring's bits"
