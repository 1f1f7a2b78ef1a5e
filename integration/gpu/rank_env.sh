#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Runs a command with variables whose value depends on the rank, for jobs
# whose ranks must differ (gpu_check.sh gives each rank its own
# CG_CHUNK_SIZE, or refuses one rank's staging slots):
#   rank_env.sh NAME=v0,v1,... [NAME=...] -- command [args]
# Rank r gets the value at index r modulo the list's length; an empty
# value leaves the variable unset on that rank. The rank comes from
# collguard-run (CG_RUN_RANK), mpirun (OMPI_COMM_WORLD_RANK, PMI_RANK),
# Horovod or torchrun (HOROVOD_RANK, RANK); 0 when none is set.
set -eu
rank=${CG_RUN_RANK:-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${HOROVOD_RANK:-${RANK:-0}}}}}
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    case $1 in
    [A-Za-z_]*=*) ;;
    *) echo "$0: expected NAME=v0,v1,... or --, got '$1'" >&2; exit 2 ;;
    esac
    name=${1%%=*}
    IFS=, read -r -a vals <<<"${1#*=},"
    [ ${#vals[@]} -gt 0 ] || { echo "$0: $name: no values" >&2; exit 2; }
    v=${vals[$((rank % ${#vals[@]}))]}
    if [ -n "$v" ]; then export "$name=$v"; else unset "$name"; fi
    shift
done
[ $# -gt 1 ] || { echo "usage: $0 NAME=v0,v1,... -- command [args]" >&2; exit 2; }
shift
exec "$@"
