#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The multi-GPU runs (issue 17), one table per run, each also written to
# OUTDIR/<run>.md (rank logs under OUTDIR/logs/):
#   net     NCCL's AllReduce (nccl_perf, one process per rank) over the
#           network: NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1, NCCL's own
#           socket transport (NCCL_NET=Socket) against the collguard net
#           plugin (NCCL_NET_PLUGIN=collguard NCCL_NET=collguard) over its
#           sockets and, where built, UCX; busbw 8 B .. 1 GiB and ratios,
#           and NCCL's INFO lines naming the network it chose
#   tuner   the same through the plugin's sockets, NCCL_TUNER_PLUGIN=
#           collguard or none, with all memory free and with a ballast
#           leaving MULTIGPU_LEAVE (default 1536M) free (WARN, and CRITICAL
#           by a raised threshold), beside NCCL's own NCCL_ALGO, NCCL_PROTO
#           and NCCL_MAX_NCHANNELS as references: NCCL's device memory, the
#           algorithms it connected, busbw
#   shim    the Horovod shim on every GPU: training equivalence
#           (collguard.torch, CUDA tensors) through NCCL and COLLGUARD with
#           a rank per GPU, the CUDA context check (rank i touches only
#           GPU i), gpu_check through NCCL, the 1000-tensor step against
#           1000 ncclAllReduce calls (gpu_step_bench), the memory-guard
#           benchmark with a rank per GPU through NCCL and COLLGUARD
#           (memguard/run.sh, MEMGUARD_RANKS)
#   nodes   two "nodes" (NCCL_HOSTID per half of the GPUs, NVLink/P2P
#           within one): NCCL's lines show which peers go through
#           NET/collguard; busbw against NCCL_NET=Socket (2+ GPUs)
# Ranks: MULTIGPU_RANKS, default the GPU count, at least 2. On a machine
# with fewer GPUs than ranks the ranks share GPUs, each with an
# NCCL_HOSTID of its own: NCCL then takes them for separate hosts and must
# move their bytes over the network (P2P and shared memory do not cross
# hosts), so net, tuner and the shim's NCCL runs are real network traffic
# even on one GPU; nodes needs one GPU per rank.
# usage: integration/gpu/multigpu.sh OUTDIR BUILD_DIR [PYTHON]
#   MULTIGPU_RUNS="net tuner shim nodes" narrows it; MULTIGPU_MAX=1G.
# Exit 0: every run completed with exact results; 77: no GPU; else the
# count of failed runs.
set -u
out=${1:?usage: $0 OUTDIR BUILD_DIR [PYTHON]}
build=$(cd "${2:?usage: $0 OUTDIR BUILD_DIR [PYTHON]}" && pwd)
py=${3:-$(command -v python3)}
root=$(cd "$(dirname "$0")/../.." && pwd)
perf=$build/integration/gpu/nccl_perf
plugdir=$build/plugin/nccl
nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU: skipped"; exit 77; }
[ -x "$perf" ] || { echo "$0: $perf not built (needs NCCL)"; exit 1; }
ngpu=$(nvidia-smi -L | grep -c '^GPU')
np=${MULTIGPU_RANKS:-$((ngpu < 2 ? 2 : ngpu))}
max=${MULTIGPU_MAX:-1G}
runs=" ${MULTIGPU_RUNS:-net tuner shim nodes} "
mkdir -p "$out/logs"
export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
export CG_SOCKET_IFNAME=${CG_SOCKET_IFNAME:-lo} CG_LOG_LEVEL=${CG_LOG_LEVEL:-warn}
export LD_LIBRARY_PATH="$plugdir:${LD_LIBRARY_PATH:-}"
shared=$([ "$np" -gt "$ngpu" ] && echo yes || echo no)
failed=0
echo "# multigpu: $ngpu GPU(s), $np ranks$([ $shared = yes ] && echo ", sharing GPUs, an NCCL_HOSTID per rank")"

# hostid RANK MODE: the NCCL_HOSTID a rank gets ("" = the real host's).
hostid() {
    case $2 in
    nodes) echo "cg-node-$(($1 < np / 2 ? 0 : 1))" ;;
    *) [ $shared = yes ] && echo "cg-host-$1" || echo "" ;;
    esac
}

# perf_run TAG MODE ARGS... -- VAR=VALUE...: nccl_perf on np ranks; rank
# 0's output in OUTDIR/logs/TAG.0.txt. Returns non-zero on any failure.
perf_run() {
    local tag=$1 mode=$2 args=() envs=() pids=() rc=0 dir r h
    shift 2
    while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    envs=("$@")
    dir=$(mktemp -d)
    for r in $(seq 0 $((np - 1))); do
        h=$(hostid "$r" "$mode")
        env "${envs[@]}" ${h:+NCCL_HOSTID=$h} timeout 300 "$perf" -r "$r" \
            -n "$np" -u "$dir" "${args[@]}" >"$out/logs/$tag.$r.txt" 2>&1 &
        pids+=($!)
    done
    for r in "${pids[@]}"; do wait "$r" || rc=1; done
    rm -rf "$dir"
    grep -q '^# result: exact' "$out/logs/$tag.0.txt" || rc=1
    [ $rc = 0 ] || { echo "!! $tag failed:"; tail -n 5 "$out/logs/$tag".*.txt; }
    return $rc
}

# rows TAG: "size busbw" of rank 0's table.
rows() { awk '$1 ~ /^[0-9]+$/ && NF == 6 {print $1, $5}' "$out/logs/$1.0.txt"; }
# netline TAG: what NCCL says it uses for the network, and a channel line.
netline() {
    grep -hoE 'Using network [A-Za-z0-9_]+|NET/Plugin: Loaded net plugin [^ ]+ \(v[0-9]+\)' \
        "$out/logs/$1".0.txt | sort -u | tr '\n' ';'
    grep -hoE 'via NET/[A-Za-z0-9_]+/[0-9]+' "$out/logs/$1".*.txt | sort | uniq -c |
        awk '{printf " %s x%d;", $2" "$3, $1}'
    echo
}
# AWK_HUMAN: an awk function h(bytes) -> 8, 4K, 16M, 1G.
AWK_HUMAN='function h(b) { return b >= 1073741824 ? b/1073741824 "G" : b >= 1048576 ? b/1048576 "M" : b >= 1024 ? b/1024 "K" : b }'
mem() { grep -oE 'creation -?[0-9.]+ MiB, after every size -?[0-9.]+ MiB' "$out/logs/$1.0.txt" |
    awk '{print $2" / "$7}'; }

net_env=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_DEBUG=INFO
         NCCL_DEBUG_SUBSYS=INIT,NET)
plug=(NCCL_NET_PLUGIN=collguard NCCL_NET=collguard)
ucx_built=no
"$build/plugin/collguard-info" 2>/dev/null | grep -q 'UCX yes' && ucx_built=yes

if [[ $runs == *" net "* ]]; then
    echo "== net: NCCL over the network, $np ranks, 8 B .. $max"
    ok=1
    perf_run net-socket net -e "$max" -- "${net_env[@]}" NCCL_NET=Socket \
        NCCL_NET_PLUGIN=none || ok=0
    perf_run net-cg-socket net -e "$max" -- "${net_env[@]}" "${plug[@]}" \
        CG_TRANSPORT=socket || ok=0
    kinds="socket"
    if [ $ucx_built = yes ]; then
        perf_run net-cg-ucx net -e "$max" -- "${net_env[@]}" "${plug[@]}" \
            CG_TRANSPORT=ucx || ok=0
        kinds="socket ucx"
    fi
    {
        echo "| size | NCCL Socket busbw GB/s | collguard (sockets) | ratio |$([ $ucx_built = yes ] && echo " collguard (UCX) | ratio |")"
        echo "|---|---|---|---|$([ $ucx_built = yes ] && echo "---|---|")"
        rows net-socket >"$out/logs/a"; rows net-cg-socket >"$out/logs/b"
        if [ $ucx_built = yes ]; then rows net-cg-ucx >"$out/logs/c"; else : >"$out/logs/c"; fi
        awk "$AWK_HUMAN"'
             FILENAME ~ /\/a$/ {a[$1]=$2; o[++n]=$1} FILENAME ~ /\/b$/ {b[$1]=$2}
             FILENAME ~ /\/c$/ {c[$1]=$2}
             END { for (i = 1; i <= n; i++) { s = o[i];
                 line = sprintf("| %s | %.3f | %.3f | %.2f |", h(s), a[s], b[s], a[s] > 0 ? b[s]/a[s] : 0);
                 if (s in c) line = line sprintf(" %.3f | %.2f |", c[s], a[s] > 0 ? c[s]/a[s] : 0);
                 print line } }' "$out/logs/a" "$out/logs/b" "$out/logs/c"
        echo
        for t in net-socket net-cg-socket $([ $ucx_built = yes ] && echo net-cg-ucx); do
            echo "- $t: $(netline $t)"
        done
    } | tee "$out/net.md"
    [ $ok = 1 ] || failed=$((failed + 1))
fi

# The tuner's cases: label, free before NCCL (all or a size), tuner,
# further VAR=VALUE (a CRITICAL threshold above the free size; NCCL's own
# knobs as references for what each restriction can save).
tuner_cases=(
    "all free|all|none"
    "all free|all|collguard"
    "WARN|${MULTIGPU_LEAVE:-1536M}|none"
    "WARN|${MULTIGPU_LEAVE:-1536M}|collguard"
    "CRITICAL|${MULTIGPU_LEAVE:-1536M}|collguard|CG_PRESSURE_CRITICAL=2G|CG_PRESSURE_WARN=3G"
    "ref NCCL_ALGO=Ring|all|none|NCCL_ALGO=Ring"
    "ref NCCL_PROTO=Simple|all|none|NCCL_PROTO=Simple"
    "ref NCCL_ALGO=Ring NCCL_PROTO=Simple|all|none|NCCL_ALGO=Ring|NCCL_PROTO=Simple"
    "ref NCCL_MAX_NCHANNELS=2|all|none|NCCL_MAX_NCHANNELS=2"
)
if [[ $runs == *" tuner "* ]]; then
    echo "== tuner: NCCL through the plugin's sockets, tuner on and off, with and without a ballast"
    ok=1
    {
        echo "| case | free before NCCL | tuner | NCCL memory MiB: creation / after every size | algorithms connected | busbw GB/s 4K | 1M | 16M | 256M | 1G |"
        echo "|---|---|---|---|---|---|---|---|---|---|"
    } >"$out/tuner.md"
    i=0
    for c in "${tuner_cases[@]}"; do
        IFS='|' read -r -a f <<<"$c"
        label=${f[0]} leave=${f[1]} tuner=${f[2]}
        extra=("${f[@]:3}")
        i=$((i + 1)); tag=tuner-$i
        fa=(); [ "$leave" = all ] || fa=(-F "$leave")
        if perf_run "$tag" net -b 64 -e "$max" -f 4 "${fa[@]}" -- \
            "${net_env[@]}" "${plug[@]}" CG_TRANSPORT=socket \
            NCCL_TUNER_PLUGIN=$tuner NCCL_DEBUG_SUBSYS=INIT,NET,TUNING \
            "${extra[@]}"; then
            bw=$(rows "$tag" | awk '{b[$1]=$2} END {printf "%.3f | %.3f | %.3f | %.3f | %.3f", b[4096], b[1048576], b[16777216], b[268435456], b[1073741824]}')
            algos=$(grep -hoE 'Connected all [a-zA-Z]+' "$out/logs/$tag.0.txt" | awk '{print $3}' | sort -u | tr '\n' ' ')
            echo "| $label | $leave | $tuner | $(mem "$tag") | ${algos:-?} | $bw |" >>"$out/tuner.md"
        else
            echo "| $label | $leave | $tuner | failed: $(grep -hm1 -iE 'error|out of memory|failed' "$out/logs/$tag".*.txt | head -1 | cut -c1-120) | | - | - | - | - | - |" >>"$out/tuner.md"
            # An out-of-memory without the tuner is a finding, not a failure.
            [ "$tuner" = none ] || ok=0
        fi
    done
    { echo; grep -h 'tuner plugin collguard' "$out/logs/"tuner-*.0.txt | sed 's/^.*NCCL INFO //' | sort | uniq -c | head -20; } >>"$out/tuner.md"
    cat "$out/tuner.md"
    [ $ok = 1 ] || failed=$((failed + 1))
fi

if [[ $runs == *" shim "* ]]; then
    echo "== shim: the Horovod shim on $np ranks"
    ok=1
    mod=$(ls "$build"/integration/python/mpi_lib_v2/mpi_lib_v2*.so 2>/dev/null | head -1)
    launch=$build/transport/collguard-run
    # Each rank its own NCCL_HOSTID where ranks share a GPU.
    wrap=(sh -c 'if [ "$0" = yes ]; then export NCCL_HOSTID=cg-host-$CG_RUN_RANK; fi; shift; exec "$@"' "$shared" _)
    : >"$out/shim.md"
    shim1() { # NAME CMD...: one row
        local name=$1 log=$out/logs/shim-${1// /_}.txt
        shift
        if "$@" >"$log" 2>&1; then r=ok; else r="FAILED ($?)"; ok=0; fi
        echo "| $name | $r | $(grep -hE '^(\[[0-9]+\] )?(gpu_check: [0-9]+ cases|[0-9]+ passed|shim fused step|[0-9]+ x ncclAllReduce|shim, 1 tensor|shim beyond|# results|targets: )|passed in' "$log" | sed 's/^\[[0-9]*\] //' | sort -u | head -8 | tr -s ' ' | tr '\n' ';') |" >>"$out/shim.md"
    }
    echo "| run | result | detail |" >>"$out/shim.md"
    echo "|---|---|---|" >>"$out/shim.md"
    if [ -n "$mod" ]; then
        for be in NCCL COLLGUARD; do
            shim1 "training equivalence, $be, $np ranks" env PYTHONPATH="$root/integration/python" \
                COLLGUARD_LIB="$mod" CG_TEST_DEVICE=cuda HOROVOD_GPU_OPERATIONS=$be \
                "$launch" -np "$np" --timeout 300s -- "${wrap[@]}" "$py" -m pytest -q -x \
                -p no:cacheprovider "$root/tests/integration/python/test_training.py"
        done
    else
        echo "| training equivalence | not built (-DCG_PYTHON=) | |" >>"$out/shim.md"
    fi
    shim1 "gpu_check, NCCL, $np ranks" env HOROVOD_GPU_OPERATIONS=NCCL CG_TRANSPORT=socket \
        "$launch" -np "$np" --timeout 300s -- "${wrap[@]}" "$build/integration/gpu/gpu_check"
    for o in "" -o; do
        shim1 "step of 1000 x 4 KiB${o:+ out of place}, NCCL, $np ranks" env HOROVOD_GPU_OPERATIONS=NCCL \
            CG_TRANSPORT=socket "$launch" -np "$np" --timeout 300s -- "${wrap[@]}" \
            "$build/integration/gpu/gpu_step_bench" $o
    done
    if [ $shared = no ]; then
        shim1 "CUDA contexts: rank i only on GPU i, NCCL" env HOROVOD_GPU_OPERATIONS=NCCL \
            "$launch" -np "$np" --timeout 120s -- "$build/integration/gpu/cuda_context_check"
        # The memory-guard benchmark with a rank per GPU, each GPU squeezed
        # to F (its table in OUTDIR/memguard).
        if [ -n "$mod" ]; then
            shim1 "memory guard, a rank per GPU, NCCL" env MEMGUARD_RANKS="$np" \
                HOROVOD_GPU_OPERATIONS=NCCL bash "$root/integration/gpu/memguard/run.sh" \
                "$out/memguard-nccl" "$build" "$py"
            # The defaults' reproductions do not use the shim: collguard's
            # cases only, host-staged.
            shim1 "memory guard, a rank per GPU, COLLGUARD" env MEMGUARD_RANKS="$np" \
                MEMGUARD_MODES="collguard grow" HOROVOD_GPU_OPERATIONS=COLLGUARD \
                bash "$root/integration/gpu/memguard/run.sh" \
                "$out/memguard-collguard" "$build" "$py"
        fi
    else
        echo "| CUDA contexts: rank i only on GPU i | needs a GPU per rank | |" >>"$out/shim.md"
        echo "| memory guard, a rank per GPU | needs a GPU per rank | |" >>"$out/shim.md"
    fi
    cat "$out/shim.md"
    [ $ok = 1 ] || failed=$((failed + 1))
fi

if [[ $runs == *" nodes "* ]]; then
    echo "== nodes: two NCCL_HOSTID groups of GPUs"
    if [ "$np" -gt "$ngpu" ] || [ "$np" -lt 2 ]; then
        echo "needs a GPU per rank and 2+ GPUs ($ngpu here): not run" | tee "$out/nodes.md"
    else
        ok=1
        perf_run nodes-socket nodes -e "$max" -- NCCL_DEBUG=INFO \
            NCCL_DEBUG_SUBSYS=INIT,NET NCCL_NET=Socket NCCL_NET_PLUGIN=none || ok=0
        perf_run nodes-cg nodes -e "$max" -- NCCL_DEBUG=INFO \
            NCCL_DEBUG_SUBSYS=INIT,NET "${plug[@]}" CG_TRANSPORT=socket || ok=0
        {
            echo "| size | NCCL Socket between nodes busbw GB/s | collguard | ratio |"
            echo "|---|---|---|---|"
            rows nodes-socket >"$out/logs/a"; rows nodes-cg >"$out/logs/b"
            awk "$AWK_HUMAN"'
                 FILENAME ~ /\/a$/ {a[$1]=$2; o[++n]=$1} FILENAME ~ /\/b$/ {b[$1]=$2}
                 END { for (i = 1; i <= n; i++) { s = o[i];
                     printf "| %s | %.3f | %.3f | %.2f |\n", h(s), a[s], b[s], a[s] > 0 ? b[s]/a[s] : 0 } }' \
                "$out/logs/a" "$out/logs/b"
            echo
            for t in nodes-socket nodes-cg; do echo "- $t: $(netline $t)"; done
            echo "- nodes-cg, channels within a node: $(grep -hoE 'via (P2P|SHM)/[A-Za-z0-9_/]+' "$out/logs/"nodes-cg.*.txt | sort | uniq -c | awk '{printf "%s x%d; ", $2" "$3, $1}')"
        } | tee "$out/nodes.md"
        [ $ok = 1 ] || failed=$((failed + 1))
    fi
fi
echo "== $failed run(s) failed"
exit $failed
