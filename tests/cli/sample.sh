#!/usr/bin/env bash
# sample.sh: the README's quick start on the shipped sample corpus: fingerprint
# tests/data/sample.jsonl, then `pairs --k 3` must report exactly the planted
# near-duplicate pairs of tests/data/sample.pairs, nothing else, with friso
# and with the bigram fallback.
. "$(dirname "$0")/lib.sh"

docs=$(grep -c . "$SRC/tests/data/sample.jsonl")
for cjk in auto bigram; do
    run fingerprint --cjk "$cjk" --jsonl "$SRC/tests/data/sample.jsonl"
    expect_status 0; expect_err_empty; expect_out_lines "$docs"
    cp "$T/out" "$T/sample.fp"
    run pairs --k 3 "$T/sample.fp"
    expect_status 0; expect_err_empty
    cut -f1,2 "$T/out" | LC_ALL=C sort >"$T/found"
    if cmp -s "$T/found" "$SRC/tests/data/sample.pairs"; then
        ok
    else
        fail "--cjk $cjk: pairs --k 3 differs from the planted pairs:
$(diff "$T/found" "$SRC/tests/data/sample.pairs")"
    fi
    # Nothing else comes close: at k = 10 the planted pairs are still all.
    run pairs --k 10 "$T/sample.fp"
    cut -f1,2 "$T/out" | LC_ALL=C sort | cmp -s - "$SRC/tests/data/sample.pairs" && ok ||
        fail "--cjk $cjk: unplanted pairs within distance 10"
done
# The quick start exactly as the README writes it (paths relative to the tree).
(cd "$SRC" && "$SIMSTORE" fingerprint --jsonl tests/data/sample.jsonl >"$T/q.fp" &&
    "$SIMSTORE" pairs --k 3 "$T/q.fp" >"$T/q.pairs")
status=$?
expect_status 0
[ "$(wc -l <"$T/q.pairs")" = "$(wc -l <"$SRC/tests/data/sample.pairs")" ] && ok ||
    fail "quick start printed $(wc -l <"$T/q.pairs") pairs"
finish
