#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# collguard vs Open MPI on this host: cg_allreduce_perf (or
# cg_broadcast_perf with -x broadcast) under mpirun -np N, once with
# -B collguard and once with -B mpi (MPI_Allreduce / MPI_Bcast on the same
# buffers), size by size (interleaved, so both see the same machine load),
# with memcpy GB/s of the same size from reduce_bench. Prints busbw
# (GB/s) of both, out of place and in place, and their ratios; busbw and
# ratios come from the times (us), so 8-byte rows keep their precision.
# -r R repeats each measurement R times (collguard and MPI alternating) and
# prints the medians: on a shared or oversubscribed host single runs are
# bimodal (the same binary gives 1.4 or 4.5 GB/s at 1 MiB from run to run).
# -s best prints the best of the R runs instead (the fastest time of each
# side): on a host shared with other jobs, the run least disturbed.
# usage: vs_mpi.sh [-B builddir] [-n ranks] [-t ucx|socket] [-b 1K] [-e 256M]
#                  [-f 4] [-x allreduce|broadcast] [-r 1] [-s median|best]
set -u
build=${CG_BUILD:-$(dirname "$0")/../../build} np=2 tp=ucx lo=1K hi=256M f=4
coll=allreduce reps=1 stat=median
while getopts "B:n:t:b:e:f:x:r:s:" o; do
    case $o in
    B) build=$OPTARG ;; n) np=$OPTARG ;; t) tp=$OPTARG ;; b) lo=$OPTARG ;;
    e) hi=$OPTARG ;; f) f=$OPTARG ;; x) coll=$OPTARG ;; r) reps=$OPTARG ;;
    s) stat=$OPTARG ;;
    *) echo "usage: $0 [-B builddir] [-n ranks] [-t ucx|socket] [-b min]" \
            "[-e max] [-f factor] [-x allreduce|broadcast] [-r repeats]" \
            "[-s median|best]" >&2
       exit 1 ;;
    esac
done
perf=$build/tests/collective/cg_${coll}_perf
bench=$build/tests/perf/reduce_bench
for p in "$perf" "$bench"; do
    [ -x "$p" ] || { echo "$0: $p not built" >&2; exit 1; }
done
bytes() { # 1K, 64M, 256 -> bytes
    local v=${1%[KkMmGg]} u=${1: -1}
    case $u in K|k) v=$((v << 10)) ;; M|m) v=$((v << 20)) ;;
               G|g) v=$((v << 30)) ;; *) v=$1 ;; esac
    echo "$v"
}
mpi=(mpirun --allow-run-as-root --oversubscribe -np "$np" --bind-to none)
# times (us) of the out-of-place and in-place columns of one size's row
run() { # backend size iters warmup
    "${mpi[@]}" "$perf" -B "$1" -t "$tp" -b "$2" -e "$2" -n "$3" -w "$4" \
        -c 0 2>/dev/null | awk '!/^#/ && NF >= 13 { print $6, $10 }'
}
# medians (-s best: minima) of the two time columns of the input lines
# ("oop ip")
med() {
    local in
    in=$(cat)
    paste <(echo "$in" | awk '{ print $1 }' | sort -g) \
          <(echo "$in" | awk '{ print $2 }' | sort -g) |
        awk -v best="$([ "$stat" = best ] && echo 1 || echo 0)" '
             { a[NR] = $1; b[NR] = $2 }
             END { k = best ? 1 : int((NR + 1) / 2)
                   if (NR) print a[k], b[k] }'
}
memcpy_gbps() {
    "$bench" -b "$1" -e "$1" -d f32 -t 100 2>/dev/null |
        awk '!/^#/ && NF >= 3 && $1 ~ /^[0-9]/ { print $3 }'
}
printf "# %s, %d ranks, transport %s (collguard), Open MPI %s; busbw GB/s" \
    "$coll" "$np" "$tp" "$(mpirun --version 2>/dev/null | head -1 |
                            awk '{ print $NF }')"
printf " (%s of %d runs)\n" "$stat" "$reps"
printf "%10s %9s %9s %6s %9s %9s %6s %11s\n" size cg_oop mpi_oop ratio \
    cg_ip mpi_ip ratio memcpy_GBps
s=$(bytes "$lo") e=$(bytes "$hi")
# busbw factor: 2(n-1)/n for AllReduce (as nccl-tests), 1 for Broadcast
bus=$(awk -v n="$np" -v c="$coll" 'BEGIN {
    print c == "broadcast" ? 1 : (n > 1 ? 2 * (n - 1) / n : 0) }')
while [ "$s" -le "$e" ]; do
    it=$(( (1 << 30) / s )); it=$(( it < 5 ? 5 : it > 200 ? 200 : it ))
    w=$(( it / 10 + 1 ))
    cg_runs="" mp_runs=""
    for ((k = 0; k < reps; k++)); do
        cg_runs+=$(run collguard "$s" "$it" "$w")$'\n'
        mp_runs+=$(run mpi "$s" "$it" "$w")$'\n'
    done
    read -r cg_o cg_i < <(printf "%s" "$cg_runs" | grep . | med)
    read -r mp_o mp_i < <(printf "%s" "$mp_runs" | grep . | med)
    mc=$(memcpy_gbps "$s")
    awk -v s="$s" -v a="${cg_o:-0}" -v b="${mp_o:-0}" -v c="${cg_i:-0}" \
        -v d="${mp_i:-0}" -v m="${mc:-0}" -v bus="$bus" 'BEGIN {
        u = s; if (s >= 1024) u = sprintf("%dK", s / 1024)
        if (s >= 1048576) u = sprintf("%dM", s / 1048576)
        split(a " " b " " c " " d, t, " ")
        for (i = 1; i <= 4; i++) g[i] = t[i] > 0 ? s / t[i] / 1e3 * bus : 0
        r1 = g[2] > 0 ? g[1] / g[2] : 0; r2 = g[4] > 0 ? g[3] / g[4] : 0
        f = s < 65536 ? "%9.3g" : "%9.2f"
        printf "%10s " f " " f " %6.2f " f " " f " %6.2f %11.2f\n", u, g[1],
               g[2], r1, g[3], g[4], r2, m }'
    s=$((s * f))
done
