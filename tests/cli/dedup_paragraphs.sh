#!/usr/bin/env bash
# dedup_paragraphs.sh: `simstore dedup --paragraphs` against the brute-force
# reference (dedup_ref.py pref: a record is dropped when at least F of its
# paragraphs have a paragraph within K in one kept record or STORE
# document): kept records byte for byte and the --removed lines, on a
# generated corpus of partial copies, for k = 0, 3, 7, F = 0.3, 0.5, 1,
# minimum words 1 and 8, --threads 1, 2, 3; with --store (a store built
# with --paragraphs) and --add (the store then answers as if the kept
# records had been added); the sample corpus; errors and usage.
source "$(dirname "$0")/lib.sh"

REF="python3 $(dirname "$0")/dedup_ref.py"
$REF pgen 500 5 >"$T/gen.jsonl"
head -150 "$T/gen.jsonl" | sed 's/"id": "p/"id": "s/; s/"id": 1\([0-9]*\)/"id": 9\1/' >"$T/st.jsonl"
"$SIMSTORE" fingerprint --paragraphs --jsonl "$T/gen.jsonl" >"$T/gen.pfps" 2>/dev/null
"$SIMSTORE" fingerprint --paragraphs --jsonl "$T/st.jsonl" >"$T/st.pfps" 2>/dev/null

# check NAME K F MINW STORE_INPUT STORE_PFPS THREADS [OPTIONS...]
check() {
    local name=$1 k=$2 f=$3 minw=$4 sin=$5 spf=$6 threads=$7
    shift 7
    $REF pref "$k" "$f" "$minw" "$T/gen.jsonl" "$T/gen.pfps" "$sin" "$spf" "$T/want.out" "$T/want.removed"
    run dedup --paragraphs --k "$k" --min-fraction "$f" --threads "$threads" --removed "$T/got.removed" "$@" "$T/gen.jsonl"
    expect_status 0
    if cmp -s "$T/out" "$T/want.out"; then ok; else fail "$name k=$k F=$f threads=$threads: output differs from the reference"; fi
    if cmp -s "$T/got.removed" "$T/want.removed"; then ok; else
        fail "$name k=$k F=$f threads=$threads: --removed differs"; diff "$T/got.removed" "$T/want.removed" | head -5 >&2; fi
}

for k in 0 3 7; do
    for f in 0.3 0.5 1; do
        check plain $k $f 8 - - 2
    done
done
for threads in 1 3; do
    check plain 3 0.5 8 - - $threads
    check min-words-1 3 0.5 1 - - $threads --paragraph-min-words 1
done
# The test proves little unless both happen.
check plain 3 0.5 8 - - 2
kept=$(wc -l <"$T/out"); dropped=$(wc -l <"$T/got.removed")
if [ "$kept" -gt 100 ] && [ "$dropped" -gt 40 ]; then ok; else fail "kept $kept, dropped $dropped"; fi
if awk -F'\t' '$5 < 1' "$T/got.removed" | grep -q .; then ok; else fail "no partial copy was dropped"; fi

# ---- --store and --add ---------------------------------------------------------
run build "$T/s" --paragraphs --k 7 -q "$T/st.jsonl"
expect_status 0
for k in 3 7; do
    for f in 0.3 1; do
        check store $k $f 8 "$T/st.jsonl" "$T/st.pfps" 2 --store "$T/s"
    done
done
if awk -F'\t' '$2 ~ /^s|^9/' "$T/got.removed" | grep -q .; then ok; else fail "no record dropped for a STORE document"; fi
cp -r "$T/s" "$T/s2"
check store-add 3 0.5 8 "$T/st.jsonl" "$T/st.pfps" 2 --store "$T/s" --add
cp "$T/out" "$T/kept.jsonl"
# The store now answers as one the kept records were added to.
run add "$T/s2" -q "$T/kept.jsonl"
expect_status 0
run query "$T/s" --paragraphs --queries "$T/gen.jsonl" --min-fraction 0.5
cp "$T/out" "$T/q1"
run query "$T/s2" --paragraphs --queries "$T/gen.jsonl" --min-fraction 0.5
if cmp -s "$T/out" "$T/q1"; then ok; else fail "--add: paragraph answers differ from add's"; fi
# A second run keeps nothing: every record is in STORE now.
run dedup --paragraphs --store "$T/s" --min-fraction 0.5 "$T/kept.jsonl"
expect_status 1
expect_err_has "is already in STORE"

# ---- the sample ----------------------------------------------------------------
run dedup --paragraphs --removed "$T/r" "$SRC/tests/data/sample.jsonl"
expect_status 0
if grep -q $'^lossless-compression-explainer\tlossless-compression-explainer-word-changed\t6\t7\t0.8571$' "$T/r"; then ok; else fail "sample: the edited explainer"; fi

# ---- errors and usage --------------------------------------------------------
run build "$T/plain" -q "$T/st.jsonl"
run dedup --paragraphs --store "$T/plain" "$T/gen.jsonl"
expect_status 1
expect_err_has "has no paragraph index (build it with --paragraphs)"
run dedup --min-fraction 0.5 "$T/gen.jsonl"
expect_status 2
expect_err_has "--min-fraction goes with --paragraphs"
run dedup --paragraph-min-words 3 "$T/gen.jsonl"
expect_status 2
expect_err_has "--paragraph-min-words goes with --paragraphs"
run dedup --paragraphs --paragraph-min-words 3 --store "$T/s" "$T/gen.jsonl"
expect_status 2
expect_err_has "the store's minimum"
run dedup --paragraphs --min-similarity 0.9 "$T/gen.jsonl"
expect_status 2
expect_err_has "not with --min-similarity"
run dedup --paragraphs --min-fraction 1.5 "$T/gen.jsonl"
expect_status 2
run dedup --paragraphs --paragraph-min-words 0 "$T/gen.jsonl"
expect_status 2
run dedup --help
expect_out_has "--paragraphs"
finish
