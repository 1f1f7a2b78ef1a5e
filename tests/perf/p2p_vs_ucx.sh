#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs cg_p2p_perf and ucx_perftest (tag_bw, tag_lat; server and client on
# localhost) over the same sizes in one run and prints a table:
#   size, bandwidth ours / ucx_perftest (MiB/s) and ratio (ours/ucx, higher
#   is better), one-way latency ours / ucx_perftest (usec) and ratio
#   (ours/ucx, lower is better).
# Usage: tests/perf/p2p_vs_ucx.sh [build_dir]
# Environment (defaults): CG_P2P_TRANSPORT=socket (or ucx),
#   CG_P2P_UCX_TLS=tcp (the anchor's UCX_TLS; e.g. posix,sysv,cma,self for
#   shared memory), MIN=8 MAX=256M FACTOR=4 WINDOW=32 NSOCKS=1 (sockets per
#   connection of the socket transport) BUDGET=256M (bytes
#   per size and test), LAT_ITERS=2000, REPEAT=3 (each measurement, ours
#   and the anchor's, is repeated and the best kept: shared machines are
#   noisy).
set -euo pipefail

build=${1:-build}
perf=$build/tests/perf/cg_p2p_perf
transport=${CG_P2P_TRANSPORT:-socket}
tls=${CG_P2P_UCX_TLS:-tcp}
min=${MIN:-8} max=${MAX:-256M} factor=${FACTOR:-4} window=${WINDOW:-32}
nsocks=${NSOCKS:-1}
budget=${BUDGET:-256M} lat_iters=${LAT_ITERS:-2000} repeat=${REPEAT:-3}

command -v ucx_perftest >/dev/null || { echo "ucx_perftest not found" >&2; exit 1; }
[ -x "$perf" ] || { echo "$perf not built" >&2; exit 1; }

to_bytes() { numfmt --from=iec "$1"; }
budget_b=$(to_bytes "$budget")
port=$((20000 + RANDOM % 20000))

# ucx_run <test> <size> <iters> <warmup>: prints ucx_perftest's CSV row.
ucx_run() {
    port=$((port + 1))
    UCX_TLS=$tls ucx_perftest -p "$port" >/dev/null 2>&1 &
    local srv=$!
    local row=""
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        sleep 0.2
        row=$(UCX_TLS=$tls timeout 300 ucx_perftest 127.0.0.1 -p "$port" \
              -t "$1" -s "$2" -n "$3" -w "$4" -O "$window" -f -v \
              2>/dev/null | tail -1) && [ -n "$row" ] && break
    done
    wait "$srv" 2>/dev/null || true
    echo "$row"
}

ours=$(mktemp)
trap 'rm -f "$ours" "$ours".*' EXIT
for r in $(seq "$repeat"); do
    "$perf" -t "$transport" -s "$nsocks" -b "$min" -e "$max" -f "$factor" \
            -w "$window" -B "$budget" -l "$lat_iters" >"$ours.$r"
done
# Best of the repeats per size: highest bandwidth, lowest latency.
head -2 "$ours.1" >"$ours"
cat "$ours".[0-9]* | grep -v '^#' | grep -v bytes | awk '
    { if (!($1 in bw) || $3 > bw[$1]) bw[$1] = $3
      if (!($1 in lat) || $4 < lat[$1]) lat[$1] = $4 }
    END { for (s in bw) printf "%d x %s %s\n", s, bw[s], lat[s] }' |
    sort -n >>"$ours"

# best_ucx <test> <size> <iters> <warmup> <csv field> <max|min>
best_ucx() {
    local best=""
    for _ in $(seq "$repeat"); do
        v=$(ucx_run "$1" "$2" "$3" "$4" | cut -d, -f"$5")
        [ -z "$v" ] && continue
        best=$(awk -v a="$best" -v b="$v" -v m="$6" 'BEGIN {
            if (a == "") print b; else if (m == "max") print (b > a ? b : a);
            else print (b < a ? b : a) }')
    done
    echo "$best"
}

echo "# $(head -1 "$ours" | sed 's/^# //'); anchor ucx_perftest UCX_TLS=$tls"
printf "%12s %12s %12s %8s %10s %10s %8s\n" size ours_MiBps ucx_MiBps bw_ratio \
       ours_lat ucx_lat lat_ratio
grep -v '^#' "$ours" | tail -n +2 | while read -r size _ ours_bw ours_lat; do
    n=$((budget_b / size)); [ $n -lt 8 ] && n=8; [ $n -gt 200000 ] && n=200000
    ln=$lat_iters; [ $((size * ln)) -gt "$budget_b" ] && ln=$((budget_b / size + 3))
    ucx_bw=$(best_ucx tag_bw "$size" "$n" $((n / 10 + 1)) 6 max)
    ucx_lat=$(best_ucx tag_lat "$size" "$ln" $((ln / 10 + 1)) 4 min)
    awk -v s="$size" -v ob="$ours_bw" -v ub="${ucx_bw:-0}" -v ol="$ours_lat" \
        -v ul="${ucx_lat:-0}" 'BEGIN {
        printf "%12d %12.1f %12.1f %8.2f %10.2f %10.2f %8.2f\n", s, ob, ub,
               (ub > 0 ? ob / ub : 0), ol, ul, (ul > 0 ? ol / ul : 0) }'
done
