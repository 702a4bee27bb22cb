#!/usr/bin/env bash
# sample.sh: the shipped sample corpus: fingerprint tests/data/sample.jsonl,
# then `pairs --k 3` must report exactly the planted near-duplicate pairs of
# tests/data/sample.pairs, nothing else, with friso and with bigrams; and the
# README's quick start (build, clusters) must cluster exactly those pairs.
. "$(dirname "$0")/lib.sh"

docs=$(grep -c . "$SRC/tests/data/sample.jsonl")
# friso with fingerprint version 2 (the default when this was written), and
# the bigram fallback with version 1; versions 2 and 3 (now the default)
# with bigrams below.
for cjk in auto bigram; do
    version=2
    [ "$cjk" = bigram ] && version=1
    run fingerprint --cjk "$cjk" --fp-version $version --jsonl "$SRC/tests/data/sample.jsonl"
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
# Versions 2 and 3 with bigrams (CJK shingle 2): one planted Chinese edit
# lands 6 bits from its original (measured; the CJK shingle width's default
# comes from friso's measurements), so k = 3 finds the planted pairs but
# that one; at k = 10 exactly the planted pairs, nothing else.
for version in 2 3; do
    run fingerprint --cjk bigram --fp-version $version --jsonl "$SRC/tests/data/sample.jsonl"
    cp "$T/out" "$T/sample.fp"
    run pairs --k 3 "$T/sample.fp"
    cut -f1,2 "$T/out" | LC_ALL=C sort | comm -23 - "$SRC/tests/data/sample.pairs" >"$T/extra"
    [ -s "$T/extra" ] && fail "version $version bigrams: unplanted pairs at k = 3: $(cat "$T/extra")" || ok
    [ "$(wc -l <"$T/out")" -ge $(($(wc -l <"$SRC/tests/data/sample.pairs") - 2)) ] && ok ||
        fail "version $version bigrams: only $(wc -l <"$T/out") pairs at k = 3"
    run pairs --k 10 "$T/sample.fp"
    cut -f1,2 "$T/out" | LC_ALL=C sort | cmp -s - "$SRC/tests/data/sample.pairs" && ok ||
        fail "version $version bigrams: pairs --k 10 differs from the planted pairs"
done
# The quick start exactly as the README writes it (paths relative to the
# tree): build with the defaults, then `clusters` with the defaults (the
# near-duplicate setting: k = 7 and similarity 0.9 on a store that keeps
# sketches). Its clusters are exactly the connected components of the
# planted pairs, and it says so on stderr as the README does.
(cd "$SRC" && "$SIMSTORE" build "$T/q.store" --replace tests/data/sample.jsonl >"$T/q.built" &&
    "$SIMSTORE" clusters "$T/q.store" >"$T/q.clusters" 2>"$T/q.err")
status=$?
expect_status 0
grep -q "^built $T/q.store: 92 documents, " "$T/q.built" && ok || fail "quick start build: $(cat "$T/q.built")"
[ "$(cat "$T/q.err")" = "clusters: 31 documents in 11 clusters, 20 to drop, largest cluster 4 documents" ] &&
    ok || fail "quick start summary: $(cat "$T/q.err")"
if python3 - "$T/q.clusters" "$SRC/tests/data/sample.pairs" <<'PY'; then ok; else fail "quick start clusters are not the planted pairs' components"; fi
import sys
parent = {}
def find(x):
    parent.setdefault(x, x)
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x
for line in open(sys.argv[2]):
    a, b = line.split()
    parent[find(a)] = find(b)
want = {}
for x in list(parent):
    want.setdefault(find(x), set()).add(x)
got = {}
for line in open(sys.argv[1]):
    cluster, doc, kept, dist = line.rstrip("\n").split("\t")
    got.setdefault(cluster, set()).add(doc)
    assert (kept == "1") == (doc == cluster), line
sys.exit(0 if sorted(map(sorted, got.values())) == sorted(map(sorted, want.values())) else 1)
PY
finish
