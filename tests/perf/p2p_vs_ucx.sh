#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs cg_p2p_perf and ucx_perftest (tag_bw, tag_lat; server and client on
# localhost) over the same sizes in one run and prints a table:
#   size, bandwidth ours / ucx_perftest (MiB/s) and ratio (ours/ucx, higher
#   is better), one-way latency ours / ucx_perftest (usec) and ratio
#   (ours/ucx, lower is better).
# Usage: tests/perf/p2p_vs_ucx.sh [build_dir]
# Environment (defaults): CG_P2P_TRANSPORT=socket (or ucx),
#   CG_P2P_UCX_TLS=tcp (UCX_TLS of the anchor and, over UCX, of ours; e.g.
#   posix,sysv,cma,self for shared memory), MIN=8 MAX=256M FACTOR=4
#   WINDOW=32 NSOCKS=1 (sockets per connection of the socket transport)
#   BUDGET=256M (bytes per size and test), LAT_ITERS=2000, REPEAT=3 (each
#   measurement, ours and the anchor's, is repeated and the best kept:
#   shared machines are noisy), BASE= (another build dir, e.g. of the previous commit: its
#   cg_p2p_perf runs alternately with ours and gets its own columns),
#   ANCHOR_ARGS= (extra ucx_perftest arguments, e.g. -e for its peer error
#   handling), CPUS= (e.g. 2,10: both processes of ours and of the anchor
#   run under taskset -c CPUS; core placement alone moves shared-memory
#   latency by 2x and more).
set -euo pipefail

build=${1:-build}
perf=$build/tests/perf/cg_p2p_perf
transport=${CG_P2P_TRANSPORT:-socket}
tls=${CG_P2P_UCX_TLS:-tcp}
min=${MIN:-8} max=${MAX:-256M} factor=${FACTOR:-4} window=${WINDOW:-32}
nsocks=${NSOCKS:-1}
budget=${BUDGET:-256M} lat_iters=${LAT_ITERS:-2000} repeat=${REPEAT:-3}
base=${BASE:-} anchor_args=${ANCHOR_ARGS:-}
pin=()
[ -z "${CPUS:-}" ] || pin=(taskset -c "$CPUS")

command -v ucx_perftest >/dev/null || { echo "ucx_perftest not found" >&2; exit 1; }
[ -x "$perf" ] || { echo "$perf not built" >&2; exit 1; }
[ -z "$base" ] || [ -x "$base/tests/perf/cg_p2p_perf" ] ||
    { echo "$base/tests/perf/cg_p2p_perf not built" >&2; exit 1; }

to_bytes() { numfmt --from=iec "$1"; }
budget_b=$(to_bytes "$budget")
port=$((20000 + RANDOM % 20000))

# ucx_run <test> <size> <iters> <warmup>: prints ucx_perftest's CSV row.
ucx_run() {
    port=$((port + 1))
    UCX_TLS=$tls "${pin[@]}" ucx_perftest -p "$port" >/dev/null 2>&1 &
    local srv=$!
    local row=""
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        sleep 0.2
        # shellcheck disable=SC2086 # anchor_args: several words
        row=$(UCX_TLS=$tls timeout 300 "${pin[@]}" ucx_perftest 127.0.0.1 \
              -p "$port" -t "$1" -s "$2" -n "$3" -w "$4" -O "$window" -f -v \
              $anchor_args 2>/dev/null | tail -1) && [ -n "$row" ] && break
    done
    wait "$srv" 2>/dev/null || true
    echo "$row"
}

ours=$(mktemp)
trap 'rm -f "$ours" "$ours".*' EXIT
# Over UCX ours runs with the anchor's UCX_TLS too.
run_perf() { # <binary> <output>
    UCX_TLS=$tls "${pin[@]}" "$1" -t "$transport" -s "$nsocks" -b "$min" \
        -e "$max" \
        -f "$factor" -w "$window" -B "$budget" -l "$lat_iters" >"$2"
}
for r in $(seq "$repeat"); do
    run_perf "$perf" "$ours.$r"
    [ -z "$base" ] || run_perf "$base/tests/perf/cg_p2p_perf" "$ours.b$r"
done
# Best of the repeats per size: highest bandwidth, lowest latency.
best_of() { # <files...>: "size x bw lat" rows
    cat "$@" | grep -v '^#' | grep -v bytes | awk '
        { if (!($1 in bw) || $3 > bw[$1]) bw[$1] = $3
          if (!($1 in lat) || $4 < lat[$1]) lat[$1] = $4 }
        END { for (s in bw) printf "%d x %s %s\n", s, bw[s], lat[s] }' |
        sort -n
}
head -2 "$ours.1" >"$ours"
best_of "$ours".[0-9]* >>"$ours"
if [ -n "$base" ]; then
    best_of "$ours".b[0-9]* >"$ours.base"
else
    awk '!/^#/ && $1 != "bytes" { print $1, "x", 0, 0 }' "$ours" >"$ours.base"
fi

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

echo "# $(head -1 "$ours" | sed 's/^# //'); anchor ucx_perftest" \
     "UCX_TLS=$tls $anchor_args${base:+; base $base}${CPUS:+; cpus $CPUS}"
if [ -n "$base" ]; then
    printf "%10s %10s %10s %10s %6s %6s %8s %8s %8s %6s %6s\n" size \
           ours_MiBps base_MiBps ucx_MiBps bw_x b_bw_x ours_lat base_lat \
           ucx_lat lat_x b_lat_x
else
    printf "%12s %12s %12s %8s %10s %10s %8s\n" size ours_MiBps ucx_MiBps \
           bw_ratio ours_lat ucx_lat lat_ratio
fi
grep -v '^#' "$ours" | tail -n +2 | paste -d' ' - "$ours.base" |
while read -r size _ ours_bw ours_lat _ _ base_bw base_lat; do
    n=$((budget_b / size)); [ $n -lt 8 ] && n=8; [ $n -gt 200000 ] && n=200000
    ln=$lat_iters; [ $((size * ln)) -gt "$budget_b" ] && ln=$((budget_b / size + 3))
    ucx_bw=$(best_ucx tag_bw "$size" "$n" $((n / 10 + 1)) 6 max)
    ucx_lat=$(best_ucx tag_lat "$size" "$ln" $((ln / 10 + 1)) 4 min)
    awk -v s="$size" -v ob="$ours_bw" -v ub="${ucx_bw:-0}" -v ol="$ours_lat" \
        -v ul="${ucx_lat:-0}" -v bb="$base_bw" -v bl="$base_lat" \
        -v with_base="${base:+1}" 'BEGIN {
        r = (ub > 0 ? ob / ub : 0); lr = (ul > 0 ? ol / ul : 0)
        if (with_base)
            printf "%10d %10.1f %10.1f %10.1f %6.2f %6.2f %8.2f %8.2f %8.2f" \
                   " %6.2f %6.2f\n", s, ob, bb, ub, r, (ub > 0 ? bb / ub : 0),
                   ol, bl, ul, lr, (ul > 0 ? bl / ul : 0)
        else
            printf "%12d %12.1f %12.1f %8.2f %10.2f %10.2f %8.2f\n", s, ob,
                   ub, r, ol, ul, lr }'
done
