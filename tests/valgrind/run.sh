#!/usr/bin/env bash
# Runs one command under valgrind's memcheck for the ctests labelled
# valgrind: any memory error or definitely lost block fails it (exit 1);
# exit 77 (skipped) where valgrind is not installed. No suppressions: none
# was needed, Open MPI's and UCX's included (a third-party one would go in
# a file here, each entry with its reason).
#   bash tests/valgrind/run.sh build/tests/plugin/hvd_cycles 100
set -euo pipefail
command -v valgrind >/dev/null || { echo "valgrind not installed: skipped"; exit 77; }
exec valgrind --quiet --leak-check=full --errors-for-leak-kinds=definite \
     --error-exitcode=1 --track-fds=no --num-callers=30 "$@"
