#!/usr/bin/env bash
# collguard-info --estimate end to end: hand-computed rows for a count and
# for a file of shapes, the configuration's caps followed, and every bad
# argument an exit status 2 with a message that names it.
# Usage: estimate_check.sh COLLGUARD_INFO
set -euo pipefail
info=$1
tmp=$(mktemp -d /tmp/cg_estimate.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
unset CG_FUSION_THRESHOLD HOROVOD_FUSION_THRESHOLD NCCL_BUFFSIZE CG_MEM_RESERVE

# 7e9 fp32 Adam on 8 ranks, 141 GiB free: 16 bytes per parameter,
# 104.31 GiB of model state, 128 MiB + 256 MiB + 580 MiB beside it; no
# reserve by default, so 141 - 105.25 GiB are left.
out=$("$info" --estimate 7B --ranks 8 --free 141G)
echo "$out"
grep -qE '^  model state +104.31 GiB  16.00 bytes per parameter$' <<<"$out" ||
    fail "model state row"
grep -qE '^  NCCL buffers +256 MiB  64 x NCCL_BUFFSIZE 4 MiB$' <<<"$out" ||
    fail "NCCL buffers row"
grep -qE '^  total on the device +105.25 GiB' <<<"$out" || fail "total row"
grep -q 'free 141 GiB of 141 GiB, reserve 0 B (CG_MEM_RESERVE)' <<<"$out" ||
    fail "default reserve"
grep -q 'verdict: fits, 35.75 GiB left' <<<"$out" || fail "verdict"
# A reserve as a share of total: 5% of 141 GiB = 7.05 GiB less.
out=$(CG_MEM_RESERVE=5% "$info" --estimate 7B --ranks 8 --free 141G)
grep -q 'reserve 7.05 GiB (CG_MEM_RESERVE)' <<<"$out" ||
    { echo "$out"; fail "share reserve"; }
grep -q 'verdict: fits, 28.70 GiB left' <<<"$out" || fail "share verdict"

# Shapes: 4096x4096 + 4096 + (2,3) = 16781318 parameters; mixed bf16 adam.
printf '# a layer\n4096x4096\n4096\n(2, 3)\n\n' >"$tmp/shapes"
out=$("$info" --estimate --shapes "$tmp/shapes" --mixed bf16 --free 1G \
      --backend collguard)
echo "$out"
grep -q '^memory per rank: 16781318 parameters' <<<"$out" || fail "count"
grep -qE '^  fp32 master weights +64.02 MiB' <<<"$out" || fail "master"
grep -qE '^  staging \(host, pinned\) +128 MiB' <<<"$out" || fail "staging"
grep -q 'NCCL_BUFFSIZE that fits: not used by backend collguard' <<<"$out" ||
    fail "no NCCL for collguard"

# Tight: 1e9 fp32 sgd, 2 ranks, 8e9 + 580 MiB + 73 MiB free, no reserve.
free=$((8000000000 + (580 + 73) * 1048576))
out=$(CG_MEM_RESERVE=0 "$info" --estimate 1e9 --optimizer sgd --ranks 2 \
      --free "$free")
grep -q 'largest CG_FUSION_THRESHOLD that fits: 8 MiB' <<<"$out" ||
    { echo "$out"; fail "fusion fit"; }
grep -q 'largest NCCL_BUFFSIZE that fits: 1 MiB' <<<"$out" || fail "buffsize"
grep -q 'verdict: does not fit, short by 311 MiB' <<<"$out" || fail "short"
# The caps come from the configuration.
out=$(CG_MEM_RESERVE=0 CG_FUSION_THRESHOLD=4M "$info" --estimate 1e9 \
      --optimizer sgd --ranks 2 --free "$free")
grep -q 'largest CG_FUSION_THRESHOLD that fits: 4 MiB' <<<"$out" ||
    fail "CG_FUSION_THRESHOLD cap"

bad() {
    local want=$1; shift
    set +e; err=$("$info" --estimate "$@" 2>&1 >/dev/null); rc=$?; set -e
    [ $rc -eq 2 ] || fail "--estimate $*: exit $rc, want 2"
    grep -qF -- "$want" <<<"$err" || fail "--estimate $*: '$err' lacks '$want'"
}
bad "parameter count '7X'" 7X
bad "parameter count '0'" 0
bad "give either a parameter count or --shapes FILE"
bad "give either a parameter count or --shapes FILE" 5 --shapes "$tmp/shapes"
bad "--optimizer 'lion'" 5 --optimizer lion
bad "--dtype 'int8'" 5 --dtype int8
bad "--mixed 'fp8'" 5 --mixed fp8
bad "--backend 'gloo'" 5 --backend gloo
bad "--ranks '0'" 5 --ranks 0
bad "--free 'lots'" 5 --free lots
bad "--ranks needs a value" 5 --ranks
bad "unknown option '--params'" --params 5
bad "keeps fp32 master weights" 5 --mixed fp16 --dtype fp16
bad "cannot open --shapes file $tmp/none" --shapes "$tmp/none"
printf '4096x0\n' >"$tmp/bad"
bad "$tmp/bad:1: not a shape" --shapes "$tmp/bad"
echo "estimate: hand-computed rows match; 15 bad arguments refused"
