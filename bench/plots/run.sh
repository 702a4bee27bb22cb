#!/usr/bin/env bash
# run.sh: rerun the benchmarks behind the README's charts and redraw them:
# bench_faiss (query latency, simstore beside FAISS), bench_codec (bits per
# fingerprint), build_scaling.py (build time and memory) and, when given,
# the quality benchmark's results.tsv; data in DATA_DIR, charts (PNG) in
# bench/plots/ by default.
# Usage: bench/plots/run.sh BUILD_DIR DATA_DIR [QUALITY_RESULTS_TSV] [OUT_DIR]
#   BUILD_DIR: a Release build with the benchmarks (and bench_faiss: Debian
#   libfaiss-dev); DATA_DIR: where the data files and the stores go (about
#   10 GB free for 2^26). SIZES (default 20,23,26) and QUERIES (default
#   20000) override the query sizes. About 30 minutes on 2 cores.
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR DATA_DIR [QUALITY_RESULTS_TSV] [OUT_DIR]}
data=${2:?usage: run.sh BUILD_DIR DATA_DIR [QUALITY_RESULTS_TSV] [OUT_DIR]}
quality=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
out=${4:-$here}
sizes=${SIZES:-20,23,26}
queries=${QUERIES:-20000}
mkdir -p "$data"
[ -x "$build/bench/bench_faiss" ] || { echo "run.sh: $build/bench/bench_faiss is missing (configure with -DSIMSTORE_BENCH=ON; libfaiss-dev)" >&2; exit 1; }

rm -f "$data/query.tsv"
for lg in ${sizes//,/ }; do
    # FAISS's IndexBinaryHash probes 697 buckets a query: fewer queries above 2^23.
    q=$queries
    [ "$lg" -le 23 ] || q=$((queries / 10))
    "$build/bench/bench_faiss" --sizes "$lg" --queries "$q" --dir "$data" --data "$data/query.tsv"
done
"$build/bench/bench_codec" 24 | tee "$data/codec.txt"
python3 "$here/build_scaling.py" "$build" "$data" --sizes 20,22,24,26 --data "$data/build.tsv"
[ -z "$quality" ] || cp "$quality" "$data/quality.tsv"
bash "$here/plot.sh" "$data" "$out"
