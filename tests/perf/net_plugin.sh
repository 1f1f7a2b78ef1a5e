#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The NCCL net plugin's API against the transport directly and against raw
# ucx_perftest, in one run: bandwidth 4 KiB..64 MiB with 8 requests in
# flight (MiB/s) and 8-byte one-way latency (usec), with the ratios
# plugin/transport (targets: bandwidth >= 0.95, latency <= 1.1) and
# plugin/ucx_perftest. "transport" moves the traffic as the plugin's
# comms must, a connection per direction; "1-conn" is the transport over
# one two-way connection, for reference (np/1c: what NCCL's one-way comms
# cost on top of the plugin's own overhead). Each measurement is repeated
# REPEAT times (default 3), the three kinds alternating, and the best
# kept (STAT=median: the median, steadier where other work shares the
# host and a best of 5 is an outlier).
# Usage: tests/perf/net_plugin.sh [build_dir]
# Environment: CG_TRANSPORT=ucx|socket (default ucx), CG_SOCKET_IFNAME=lo,
#   UCX_TLS for ucx_perftest (default: UCX's choice), REPEAT=3,
#   STAT=best|median (default best).
set -euo pipefail
build=${1:-build}
perf=$build/tests/perf/net_plugin_perf
lib=$build/plugin/nccl/libnccl-net-collguard.so
export CG_TRANSPORT=${CG_TRANSPORT:-ucx} CG_SOCKET_IFNAME=${CG_SOCKET_IFNAME:-lo}
repeat=${REPEAT:-3}
stat=${STAT:-best}
case $stat in best|median) ;; *) echo "STAT=$stat: best or median" >&2; exit 1;; esac
[ -x "$perf" ] && [ -f "$lib" ] || { echo "build $perf and $lib first" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

best() { # file: best (max bw, min lat) or median of the runs, per key
  if [ "$stat" = median ]; then
    sort -k1,1 -k2,2g "$1" | awk '{ k[$1]++; v[$1, k[$1]] = $2 }
      END { for (x in k) print x, v[x, int((k[x] + 1) / 2)] }'
    return
  fi
  awk '{ if ($1=="lat8") { if (!($1 in v) || $2<v[$1]) v[$1]=$2 }
         else if (!($1 in v) || $2>v[$1]) v[$1]=$2 }
       END { for (k in v) print k, v[k] }' "$1"
}
for i in $(seq "$repeat"); do # alternate, so a noisy spell hits all three
  "$perf" transport 2>/dev/null | grep -E '^[0-9l]' >>"$tmp/tp.all"
  "$perf" plugin "$lib" 2>/dev/null | grep -E '^[0-9l]' >>"$tmp/np.all"
  "$perf" transport1 2>/dev/null | grep -E '^[0-9l]' >>"$tmp/t1.all"
done
best "$tmp/tp.all" >"$tmp/tp"; best "$tmp/np.all" >"$tmp/np"
best "$tmp/t1.all" >"$tmp/t1"

ucx() { # size: bandwidth MiB/s (tag_bw, 8 outstanding) or latency (tag_lat)
  local test=$1 size=$2 port=$((20000 + RANDOM % 20000)) out
  ucx_perftest -p "$port" >/dev/null 2>&1 & local srv=$!
  sleep 0.3
  out=$(ucx_perftest -p "$port" 127.0.0.1 -t "$test" -s "$size" -O 8 \
        -n $(( size >= 1048576 ? 200 : 2000 )) 2>/dev/null | grep -E '^ *Final' || true)
  wait "$srv" 2>/dev/null || true
  if [ "$test" = tag_lat ]; then echo "$out" | awk '{print $5}'; else echo "$out" | awk '{print $7}'; fi
}
have_ucx=0; command -v ucx_perftest >/dev/null && have_ucx=1

printf "%-10s %12s %12s %12s %12s %8s %8s %8s\n" size plugin transport 1-conn \
  ucx_perftest np/tp np/1c np/ucx
get() { awk -v k="$1" '$1==k {print $2}' "$2"; }
for s in 4096 16384 65536 262144 1048576 4194304 16777216 67108864; do
  a=$(get $s "$tmp/np"); b=$(get $s "$tmp/tp"); c=$(get $s "$tmp/t1")
  u=-; [ $have_ucx = 1 ] && u=$(ucx tag_bw $s); u=${u:--}
  awk -v s=$s -v a=$a -v b=$b -v c=$c -v u=$u 'BEGIN {
      printf "%-10s %12.1f %12.1f %12.1f %12s %8.2f %8.2f %8s\n",
      s, a, b, c, u, a/b, a/c, (u=="-"?"-":sprintf("%.2f", a/u)) }'
done
a=$(get lat8 "$tmp/np"); b=$(get lat8 "$tmp/tp"); c=$(get lat8 "$tmp/t1")
u=-; [ $have_ucx = 1 ] && u=$(ucx tag_lat 8); u=${u:--}
awk -v a=$a -v b=$b -v c=$c -v u=$u 'BEGIN {
    printf "%-10s %12.2f %12.2f %12.2f %12s %8.2f %8.2f %8s  (usec, lower is better)\n",
    "lat 8 B", a, b, c, u, a/b, a/c, (u=="-"?"-":sprintf("%.2f", a/u)) }'
