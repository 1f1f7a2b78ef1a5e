#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ctest's check of net_plugin_perf's paired mode: runs it (it exits
# non-zero on a failed call, a wrong receive size or wrong received bytes)
# and requires a bw line per size and round, a lat line per round and a
# median line per size and for lat8, each with positive figures and ratio.
# Usage: net_plugin_paired_check.sh PERF LIB|control MIN MAX ITERS LAT ROUNDS
set -euo pipefail
perf=$1 lib=$2 min=$3 max=$4 iters=$5 lat=$6 rounds=$7
out=$("$perf" paired "$lib" "$min" "$max" "$iters" "$lat" "$rounds")
echo "$out"
nsz=0; for ((s = min; s <= max; s *= 4)); do nsz=$((nsz + 1)); done
echo "$out" | awk -v nsz=$nsz -v rounds=$rounds '
  # A positive number (ratios in %g: a stall on a loaded machine, 788 us
  # against 0.37, once printed a ratio of 0.000 with %.3f).
  function pos(x) { return x ~ /^[0-9.]+([eE][-+]?[0-9]+)?$/ && x + 0 > 0 }
  $1 == "bw" && NF == 6 && pos($4) && pos($5) && pos($6) { bw++ }
  $1 == "lat" && NF == 6 && pos($4) && pos($5) && pos($6) { lat++ }
  $1 == "median" && NF == 5 && pos($3) && pos($4) && pos($5) {
    if ($2 == "lat8") ml++; else ms++ }
  END {
    ok = bw == nsz * rounds && lat == rounds && ms == nsz && ml == 1
    if (!ok) printf "expected %d bw, %d lat, %d+1 median lines; got %d, %d, %d+%d\n",
      nsz * rounds, rounds, nsz, bw, lat, ms, ml
    exit !ok }'
