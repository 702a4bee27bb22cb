#!/usr/bin/env bash
# scale_run.sh: the out-of-core build at scale: generate N uniform (or
# clustered) fingerprints, pipe them into a fingerprint-only build with T
# tables and a memory budget, and report wall time, peak RSS, bytes on disk
# and bits per fingerprint per table beside the floor 64 - log2 N + 1.443.
#
# Usage: bench/scale_run.sh BUILD_DIR STORE_DIR [LOG2N=30] [TABLES=4] [MEMORY=4G] [SHAPE=uniform]
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR STORE_DIR [LOG2N] [TABLES] [MEMORY] [SHAPE]}
store=${2:?usage: $0 BUILD_DIR STORE_DIR [LOG2N] [TABLES] [MEMORY] [SHAPE]}
log2n=${3:-30}
tables=${4:-4}
memory=${5:-4G}
shape=${6:-uniform}
# The command as the benchmarks build it (bench/simstore, tuned with
# SIMSTORE_BENCH_MARCH) when the build has it.
simstore=$build/simstore
[ -x "$build/bench/simstore" ] && simstore=$build/bench/simstore
[ -x "$build/bench/gen_fingerprints" ] || {
    echo "$0: no $build/bench/gen_fingerprints: configure with -DSIMSTORE_BENCH=ON and build" >&2
    exit 1
}
rm -rf "$store"
echo "scale run: 2^$log2n $shape fingerprints, $tables tables, --memory $memory, $(nproc) cores"
start=$(date +%s.%N)
"$build/bench/gen_fingerprints" --count "2^$log2n" --shape "$shape" --format u64 |
    "$simstore" build "$store" --fingerprint-only --format u64 --tables "$tables" \
        --memory "$memory" --verbose --quiet -
end=$(date +%s.%N)
echo "wall time (generator + build): $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s"
"$simstore" stats "$store"
echo "bytes on disk: $(du -sb "$store" | cut -f1) ($(du -sh "$store" | cut -f1))"
n=$("$simstore" stats "$store" --json | sed 's/.*"fingerprints":\([0-9]*\).*/\1/')
for f in "$store"/*.tbl; do
    bytes=$(stat -c %s "$f")
    awk -v f="$(basename "$f")" -v b="$bytes" -v n="$n" 'BEGIN {
        printf "%s: %.0f bytes, %.3f bits/fp; floor %.3f bits/fp\n", f, b, b * 8 / n, 64 - log(n) / log(2) + 1.443 }'

done
