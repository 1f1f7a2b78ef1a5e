#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Runs the GPU correctness suite (integration/gpu/gpu_check, issue 14) from
# an existing build (builds nothing): 1 rank NCCL (when built with NCCL),
# 2 and 4 ranks COLLGUARD (host-staged, rank i on GPU i % GPUs, so they
# may share one), 2 ranks MPI under mpirun (when built with MPI and
# mpirun is there); each plain, with every 3rd buffer allocation failing
# (CG_FAULT_ALLOC=3), with the two-slot staging pipeline off
# (CG_GPU_STAGE_PIPELINE=0) and with a CG_CHUNK_SIZE of its own on each
# rank (4MiB, 1MiB, 2MiB, 512KiB through rank_env.sh: the staged
# collectives must cut at the chunk the ranks agree on). The variants of
# one backend and rank count must print the same digest of every output.
# The host-staged backends also run once with rank 1's staging slots
# refused (CG_FAULT_STAGING=1 there): every rank's staged collectives must
# fail naming rank 1 and the job go on. Prints each run's table, then one
# summary row per run.
# Exit 0: every run right; 77: no CUDA device; else the failures' count.
# usage: gpu_check.sh BUILD_DIR   (GPU_CHECK_CONFIGS="NCCL/1 COLLGUARD/2"
#        runs only those)
set -u
build=${1:?usage: $0 BUILD_DIR}
check=$build/integration/gpu/gpu_check
launch=$build/transport/collguard-run
info=$build/plugin/collguard-info
rank_env=$(dirname "$0")/rank_env.sh
for p in "$check" "$launch" "$info" "$rank_env"; do
    [ -x "$p" ] || { echo "$0: $p not built" >&2; exit 1; }
done
export CG_TRANSPORT=${CG_TRANSPORT:-socket}
export CG_SOCKET_IFNAME=${CG_SOCKET_IFNAME:-lo}
export CG_LOG_LEVEL=${CG_LOG_LEVEL:-warn} CG_TIMEOUT=${CG_TIMEOUT:-60s}
built=$("$info" | grep '^built with:')
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
failed=0
summary=""
declare -A digest # backend/ranks -> the first variant's digest
wrap=()           # run's command before gpu_check (rank_env.sh ... --)

# run BACKEND NP LAUNCHER VARIANT VAR=VALUE...: one run of the suite,
# LAUNCHER one of direct, cgrun, mpirun. A no-slot-* variant runs other
# cases: its digest is compared with no other run's.
run() {
    local be=$1 np=$2 how=$3 variant=$4 log rc line d key verdict
    shift 4
    key="$be/$np"
    [[ $variant == no-slot* ]] && key="$be/$np/$variant"
    log=$logs/${be}_${np}_$variant.txt
    echo "== $be, $np rank(s), $variant"
    case $how in
    direct)
        env HOROVOD_GPU_OPERATIONS="$be" "$@" "${wrap[@]}" "$check" ;;
    cgrun)
        env HOROVOD_GPU_OPERATIONS="$be" "$@" \
            "$launch" -np "$np" --timeout 300s -- "${wrap[@]}" "$check" ;;
    mpirun)
        local xs=() kv
        for kv in HOROVOD_GPU_OPERATIONS CG_TRANSPORT CG_SOCKET_IFNAME \
                  CG_LOG_LEVEL CG_TIMEOUT "$@"; do
            xs+=(-x "${kv%%=*}")
        done
        env HOROVOD_GPU_OPERATIONS="$be" "$@" mpirun --allow-run-as-root \
            --oversubscribe -np "$np" "${xs[@]}" "${wrap[@]}" "$check" ;;
    esac >"$log" 2>&1
    rc=$?
    cat "$log"
    [ $rc = 77 ] && { echo "no CUDA device: skipped"; exit 77; }
    # collguard-run prefixes each line with "[rank] "
    line=$(sed 's/^\[[0-9]*\] //' "$log" | grep -m1 '^gpu_check: [0-9]* cases')
    d=$(sed 's/^\[[0-9]*\] //' "$log" | grep -m1 '^gpu_check digest:')
    verdict=ok
    if [ $rc != 0 ] || [ -z "$line" ]; then
        verdict="FAIL($rc)"
    elif [ -z "${digest[$key]:-}" ]; then
        digest[$key]=$d
    elif [ "${digest[$key]}" != "$d" ]; then
        verdict="DIGEST-DIFFERS"
        echo "!! $be $np ranks $variant: $d, first variant: ${digest[$key]}"
    fi
    [ "$verdict" = ok ] || failed=$((failed + 1))
    summary+=$(printf '%-10s %3s  %-14s %-15s %s' "$be" "$np" "$variant" \
        "$verdict" "${line#gpu_check: }")$'\n'
}

# variants BACKEND NP LAUNCHER: the runs of one configuration.
variants() {
    run "$@" plain
    run "$@" fault-alloc-3 CG_FAULT_ALLOC=3
    run "$@" pipeline-off CG_GPU_STAGE_PIPELINE=0
    wrap=("$rank_env" CG_CHUNK_SIZE=4MiB,1MiB,2MiB,512KiB --)
    run "$@" chunk-per-rank
    if [ "$1" != NCCL ] && [ "$2" -gt 1 ]; then
        wrap=("$rank_env" CG_FAULT_STAGING=0,1 --)
        run "$@" no-slot
    fi
    wrap=()
}

# GPU_CHECK_CONFIGS narrows the runs (backend/ranks words).
configs=" ${GPU_CHECK_CONFIGS:-NCCL/1 COLLGUARD/2 COLLGUARD/4 MPI/2} "
want() { [[ $configs == *" $1 "* ]]; }
if want NCCL/1; then
    case $built in
    *"NCCL yes"*) variants NCCL 1 direct ;;
    *) echo "== NCCL: not built, skipped" ;;
    esac
fi
want COLLGUARD/2 && variants COLLGUARD 2 cgrun
want COLLGUARD/4 && variants COLLGUARD 4 cgrun
if want MPI/2; then
    case $built in
    *"MPI yes"*)
        if command -v mpirun >/dev/null; then
            variants MPI 2 mpirun
        else
            echo "== MPI: no mpirun, skipped"
        fi ;;
    *) echo "== MPI: not built, skipped" ;;
    esac
fi
echo "== summary"
printf '%-10s %3s  %-14s %-15s %s\n' backend np variant run cases
printf '%s' "$summary"
echo "== $failed run(s) failed"
exit $failed
