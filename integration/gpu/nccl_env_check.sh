#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# NCCL's buffer variables as NCCL itself reads them: the shim's NCCL
# backend (1 rank, hvd_gpu_smoke) exports NCCL_BUFFSIZE, and under memory
# pressure NCCL_MAX_NCHANNELS, before ncclCommInitRank unless the user set
# them. Four cases, each checked from collguard's own log line (exported,
# or "from the environment kept") and from NCCL's ("NCCL_X set by
# environment to V", NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ENV,INIT):
#   default                NCCL_BUFFSIZE exported, NCCL reads that value
#   NCCL_BUFFSIZE=2097152  kept and logged, NCCL reads 2097152
#   pressure warn          (CG_PRESSURE_WARN=100%) NCCL_MAX_NCHANNELS 4
#   + NCCL_MAX_NCHANNELS=8 kept and logged, NCCL reads 8
# Exit 0: all four hold; 77: no CUDA device; else the failures' count.
# usage: integration/gpu/nccl_env_check.sh [BUILD_DIR]   (default build-gpu)
set -u
build=${1:-build-gpu}
smoke=$build/integration/gpu/hvd_gpu_smoke
[ -x "$smoke" ] || { echo "$0: $smoke not built" >&2; exit 1; }
nvidia-smi -L >/dev/null 2>&1 || { echo "no CUDA device: skipped"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
failed=0

# case NAME VAR=VALUE...: one 1-rank NCCL run, its log in $tmp/NAME.
case_run() {
    local name=$1
    shift
    env -u NCCL_BUFFSIZE -u NCCL_MAX_NCHANNELS -u NCCL_MAX_CTAS \
        HOROVOD_GPU_OPERATIONS=NCCL CG_LOG_LEVEL=info NCCL_DEBUG=INFO \
        NCCL_DEBUG_SUBSYS=ENV,INIT CG_TRANSPORT=socket CG_SOCKET_IFNAME=lo \
        "$@" "$smoke" 1 >"$tmp/$name" 2>&1 ||
        { echo "!! $name: exit $?"; tail -20 "$tmp/$name"; failed=$((failed + 1)); return 1; }
}
# want NAME PATTERN WHAT: PATTERN (grep -E) in NAME's log, else a failure.
want() {
    if grep -Eq "$2" "$tmp/$1"; then
        echo "ok   $1: $3"
    else
        echo "FAIL $1: $3 (no line matching '$2')"
        grep -E 'NCCL_BUFFSIZE|NCCL_MAX_NCHANNELS' "$tmp/$1" | head -5
        failed=$((failed + 1))
    fi
}

if case_run default; then
    v=$(grep -Eo 'NCCL_BUFFSIZE [0-9]+ exported for NCCL' "$tmp/default" |
        head -1 | awk '{print $2}')
    if [ -z "$v" ]; then
        echo "FAIL default: no 'NCCL_BUFFSIZE N exported for NCCL' line"
        failed=$((failed + 1))
    else
        want default "NCCL_BUFFSIZE set by environment to $v\b" \
             "collguard exported NCCL_BUFFSIZE=$v and NCCL read it"
    fi
fi
if case_run user NCCL_BUFFSIZE=2097152; then
    want user 'NCCL_BUFFSIZE 2097152 from the environment kept' \
         "the user's NCCL_BUFFSIZE kept, and logged"
    want user 'NCCL_BUFFSIZE set by environment to 2097152\b' \
         "NCCL read the user's 2097152"
fi
if case_run warn CG_PRESSURE_WARN=100% CG_PRESSURE_CRITICAL=0; then
    want warn 'NCCL_MAX_NCHANNELS 4 exported for NCCL' \
         "pressure warn: collguard exported NCCL_MAX_NCHANNELS=4"
    want warn 'NCCL_MAX_NCHANNELS set by environment to 4\b' \
         "NCCL read NCCL_MAX_NCHANNELS=4"
fi
if case_run warn-user CG_PRESSURE_WARN=100% CG_PRESSURE_CRITICAL=0 \
        NCCL_MAX_NCHANNELS=8; then
    want warn-user 'NCCL_MAX_NCHANNELS 8 from the environment kept' \
         "pressure warn: the user's NCCL_MAX_NCHANNELS kept, and logged"
    want warn-user 'NCCL_MAX_NCHANNELS set by environment to 8\b' \
         "NCCL read the user's 8"
fi
echo "== nccl_env_check: $failed failure(s)"
exit $failed
