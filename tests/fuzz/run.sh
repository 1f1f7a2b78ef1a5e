#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in build-fuzz/ and runs each for
# the given number of seconds (default 20), keeping the corpus between runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-20}
cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DCG_WITH_CUDA=OFF >build-fuzz.configure.log 2>&1 || { cat build-fuzz.configure.log; exit 1; }
ninja -C build-fuzz fuzz_handshake >build-fuzz.build.log 2>&1 || { tail -40 build-fuzz.build.log; exit 1; }
mkdir -p build-fuzz/corpus/handshake
rc=0
build-fuzz/tests/fuzz/fuzz_handshake -max_total_time="$secs" -print_final_stats=1 \
    build-fuzz/corpus/handshake >build-fuzz/fuzz.log 2>&1 || rc=$?
grep -E "^stat::(number_of_executed_units|new_units_added)|ERROR|SUMMARY" build-fuzz/fuzz.log || true
if [ $rc -ne 0 ]; then tail -60 build-fuzz/fuzz.log; echo "fuzz_handshake FAILED (exit $rc)"; exit 1; fi
echo "fuzz_handshake: no crash in ${secs}s"
