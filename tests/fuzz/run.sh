#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in build-fuzz/ and runs each for
# its share of the given seconds (default 32, split evenly), starting from
# the seed corpus kept in tests/fuzz/corpus/<target>/ and keeping what it
# finds in build-fuzz/corpus/<target>/. One target alone:
#   bash tests/fuzz/run.sh 60 rendezvous
# A crash leaves build-fuzz/crash-<target>-*: fix it, then copy the file
# into tests/fuzz/corpus/<target>/ (the fuzz_replay_<target> ctest
# replays it from then on).
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-32}; shift || true
targets=("$@")
((${#targets[@]})) || targets=(handshake rendezvous negotiate config)
per=$(( secs / ${#targets[@]} )); ((per > 0)) || per=1
cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DCG_WITH_CUDA=OFF >build-fuzz.configure.log 2>&1 || { cat build-fuzz.configure.log; exit 1; }
ninja -C build-fuzz "${targets[@]/#/fuzz_}" >build-fuzz.build.log 2>&1 ||
  { tail -40 build-fuzz.build.log; exit 1; }
failed=0
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t"
  rc=0
  build-fuzz/tests/fuzz/fuzz_"$t" -max_total_time="$per" -timeout=10 -print_final_stats=1 \
      -artifact_prefix="build-fuzz/crash-$t-" \
      "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" >"build-fuzz/fuzz-$t.log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "build-fuzz/fuzz-$t.log")
  cov=$(grep -oE "cov: [0-9]+" "build-fuzz/fuzz-$t.log" | tail -1 || true)
  if [ $rc -ne 0 ]; then
    tail -60 "build-fuzz/fuzz-$t.log"
    echo "fuzz_$t FAILED (exit $rc); the input is in build-fuzz/crash-$t-*"
    failed=1
  else
    echo "fuzz_$t: no crash in ${per}s (${execs:-?} inputs, ${cov:-cov: ?})"
  fi
done
exit $failed
