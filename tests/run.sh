#!/usr/bin/env bash
# run.sh: the whole test suite, as the README and CI run it:
#  1. a -Werror build and every ctest, and a Release -Werror build (compiled
#     only: the optimiser's warnings);
#  2. a second -Werror build under AddressSanitizer + UndefinedBehaviorSanitizer,
#     and every ctest again, the long sweeps sampled (SIMSTORE_DENSE=1: all);
#  3. a -Werror build under ThreadSanitizer of what the tests labelled
#     "threads" run, and those tests, sampled (SIMSTORE_DENSE=1: all);
#  4. with clang, the libFuzzer targets built and each run briefly from its
#     committed corpus (their corpora also replay as ordinary ctests above).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

step() { printf '\n==== %s\n' "$*"; }

step "build (-Werror) in build/"
cmake -S . -B build -DSIMSTORE_WERROR=ON -DSIMSTORE_BENCH=ON >/dev/null
cmake --build build -j "$jobs"
step "tests"
ctest --test-dir build --output-on-failure -j "$jobs"

step "compile check: Release (optimised, -Werror) in build-release/"
# Optimised builds see more (maybe-uninitialized and friends): compile only.
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DSIMSTORE_WERROR=ON -DSIMSTORE_BENCH=ON \
  -DBUILD_TESTING=OFF >/dev/null
cmake --build build-release -j "$jobs"

step "build (-Werror, ASan+UBSan) in build-asan/"
cmake -S . -B build-asan -DSIMSTORE_WERROR=ON -DSIMSTORE_SANITIZE=ON -DSIMSTORE_BENCH=OFF >/dev/null
cmake --build build-asan -j "$jobs"
# Every test runs again under the sanitizers, each long sweep taking a
# sample of its cases (SIMSTORE_SAMPLED, tests/CMakeLists.txt);
# SIMSTORE_DENSE=1 runs everything at full size in both.
step "tests under ASan+UBSan"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs"

# The threaded tests (label "threads", tests/CMakeLists.txt) again under
# ThreadSanitizer, where the compiler has it (gcc's libtsan2), sampled as
# above. Every process writes its reports to build-tsan/tsan/ as well, so a
# race in a process whose exit status a test does not check (a server, a
# pipeline) still fails the step.
if echo 'int main(void) { return 0; }' |
  ${CC:-cc} -x c -fsanitize=thread -o /dev/null - >/dev/null 2>&1; then
  step "build (-Werror, TSan) in build-tsan/"
  cmake -S . -B build-tsan -DSIMSTORE_WERROR=ON -DSIMSTORE_TSAN=ON -DSIMSTORE_BENCH=OFF \
    -DSIMSTORE_PYTHON=OFF -DSIMSTORE_MPI=OFF >/dev/null
  cmake --build build-tsan -j "$jobs" --target simstore_threads_tests
  step "threaded tests under TSan"
  rm -rf build-tsan/tsan && mkdir -p build-tsan/tsan
  tsan_status=0
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:log_path=$PWD/build-tsan/tsan/report" \
    ctest --test-dir build-tsan -L threads -j "$jobs" --output-on-failure || tsan_status=$?
  if compgen -G 'build-tsan/tsan/report.*' >/dev/null; then
    cat build-tsan/tsan/report.*
    echo "ThreadSanitizer reported the above (build-tsan/tsan/)" >&2
    tsan_status=1
  fi
  [ "$tsan_status" = 0 ] || exit "$tsan_status"
else
  step "ThreadSanitizer pass skipped: ${CC:-cc} cannot link -fsanitize=thread (Debian: libtsan2)"
fi

if command -v clang >/dev/null 2>&1 && [ -d tests/fuzz ]; then
  step "libFuzzer targets (clang, ASan+UBSan) in build-fuzz/"
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -DSIMSTORE_FUZZ=ON -DSIMSTORE_BENCH=OFF \
    -DBUILD_TESTING=OFF >/dev/null
  cmake --build build-fuzz -j "$jobs"
  # Each target briefly (its corpus also replays as a ctest in both passes);
  # SIMSTORE_FUZZ_SECONDS for longer runs.
  fuzz_seconds=${SIMSTORE_FUZZ_SECONDS:-10}
  for t in build-fuzz/fuzz/fuzz_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    corpus=tests/fuzz/corpus/${name#fuzz_}
    work=$(mktemp -d)
    step "fuzz $name for $fuzz_seconds s"
    "$t" -max_total_time="$fuzz_seconds" -print_final_stats=1 "$work" "$corpus" 2>&1 | tail -n 12
    rm -rf "$work"
  done
fi
step "all tests passed"
