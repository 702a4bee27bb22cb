#!/usr/bin/env bash
# boilerplate_eval.sh: what boilerplate removal does on a generated corpus of
# templated pages (bench/templated_corpus.py): builds a store with and one
# without --boilerplate auto, and reports for each the build's wall time,
# the planted near-duplicate pairs `simstore pairs --k K` finds (recall) and
# the pairs it finds that were not planted (pages that look alike through
# their site's template).
#
# Usage: bench/boilerplate_eval.sh BUILD_DIR WORK_DIR [PAGES=20000] [SITES=5] [PAIRS=1000]
#        [EDITS=1] [K=3] [THREADS=2] [BODY_LINES=4]
set -euo pipefail
usage="usage: $0 BUILD_DIR WORK_DIR [PAGES] [SITES] [PAIRS] [EDITS] [K] [THREADS] [BODY_LINES]"
build=${1:?$usage}
work=${2:?$usage}
pages=${3:-20000}
sites=${4:-5}
pairs=${5:-1000}
edits=${6:-1}
k=${7:-3}
threads=${8:-2}
body_lines=${9:-4}
here=$(cd "$(dirname "$0")" && pwd)
simstore=$build/simstore
mkdir -p "$work"
python3 "$here/templated_corpus.py" "$work/corpus" "$pages" "$sites" "$pairs" "$edits" 10 \
    "$body_lines"
echo "corpus: $pages pages on $sites sites (10 template lines, $body_lines body lines), $pairs" \
    "planted pairs (a body on two sites, $edits words changed)"
for mode in none auto; do
    rm -rf "$work/store-$mode"
    start=$(date +%s.%N)
    "$simstore" build "$work/store-$mode" "$work/corpus.jsonl" --boilerplate "$mode" --quiet \
        --threads "$threads" >"$work/build-$mode.out"
    end=$(date +%s.%N)
    "$simstore" pairs "$work/store-$mode" --k "$k" | cut -f1,2 | LC_ALL=C sort >"$work/pairs-$mode"
    found=$(LC_ALL=C comm -12 "$work/pairs-$mode" "$work/corpus.pairs" | wc -l)
    extra=$(LC_ALL=C comm -23 "$work/pairs-$mode" "$work/corpus.pairs" | wc -l)
    printf 'boilerplate %-4s build %5.2f s; planted pairs found at k=%s: %d of %d (recall %.3f); other pairs: %d\n' \
        "$mode" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "$k" "$found" "$pairs" \
        "$(awk -v f="$found" -v p="$pairs" 'BEGIN { print f / p }')" "$extra"
done
grep -o 'boilerplate [0-9]* lines.*' "$work/build-auto.out" || true
