#!/usr/bin/env bash
# sketch.sh: sketches and similarities through the command (format/sketch.md):
# build keeps them by default for JSON Lines (stats, inspect, verify say so);
# query, pairs, clusters and dedup print the estimated similarity with
# --similarity and filter with --min-similarity J exactly as a brute-force
# reference over the sketches `fingerprint --sketch` prints (sketch_ref.py);
# the existing columns stay byte-identical without the new options; stores
# without sketches answer "unknown" and refuse --min-similarity; inputs
# without texts are refused by a store that keeps sketches.
source "$(dirname "$0")/lib.sh"

REF="python3 $(dirname "$0")/sketch_ref.py"
$REF gen 160 5 >"$T/c.jsonl"
K=6

# ---- build, stats, inspect, verify ------------------------------------------
# minhash64 here (the default, minhash256, is the near-duplicate setting's:
# its own section below).
run build "$T/s" --k $K -q --sketch minhash64 "$T/c.jsonl"
expect_status 0
run stats "$T/s"
expect_out_has "sketch: minhash64 (1-bit one-permutation MinHash, 512 bins: 64 bytes per document)"
run stats "$T/s" --json
if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["sketch"]=="minhash64" and d["sketch_bytes_per_document"]==64' "$T/out"; then ok; else fail "stats --json: sketch"; fi
run inspect "$T/s" --brief
expect_out_has "sketch: minhash64"
run inspect "$T/s" --json --brief
if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["sketch"]=="minhash64" and d["sketch_bytes_per_document"]==64' "$T/out"; then ok; else fail "inspect --json: sketch"; fi
run verify "$T/s"
expect_status 0
# The kinds, and their bytes.
for kind in minhash16 minhash32; do
    run build "$T/s-$kind" --k $K -q --sketch $kind "$T/c.jsonl"
    expect_status 0
    run stats "$T/s-$kind"
    expect_out_has "sketch: $kind"
done
"$SIMSTORE" fingerprint --jsonl --sketch minhash64 "$T/c.jsonl" >"$T/fps"
if [ "$(cut -f3 "$T/fps" | awk '{ print length($0) }' | sort -u)" = 128 ]; then ok; else fail "fingerprint --sketch minhash64: not 64 bytes a line"; fi
# The fingerprint column is the one without --sketch.
"$SIMSTORE" fingerprint --jsonl "$T/c.jsonl" >"$T/fps-plain"
if cut -f1,2 "$T/fps" | cmp -s - "$T/fps-plain"; then ok; else fail "fingerprint --sketch changes the fingerprints"; fi

# ---- pairs ------------------------------------------------------------------
for j in 0 0.8 0.9 0.96; do
    $REF pairs $K $j "$T/fps" >"$T/want"
    run pairs "$T/s" --k $K --similarity --min-similarity $j
    expect_status 0
    if cmp -s "$T/out" "$T/want"; then ok; else fail "pairs --min-similarity $j differs from the reference"; diff "$T/out" "$T/want" | head -5 >&2; fi
done
# The larger kinds (flag bit 6 in their records): stats, and pairs against
# the reference.
for kind in minhash128 minhash256; do
    run build "$T/s-$kind" --k $K -q --sketch $kind "$T/c.jsonl"
    expect_status 0
    run stats "$T/s-$kind" --json
    bytes=${kind#minhash}
    if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["sketch"]==sys.argv[2] and d["sketch_bytes_per_document"]==int(sys.argv[3])' "$T/out" $kind $bytes; then ok; else fail "stats --json: $kind"; fi
    "$SIMSTORE" fingerprint --jsonl --sketch $kind "$T/c.jsonl" >"$T/fps-$kind"
    $REF pairs $K 0.9 "$T/fps-$kind" >"$T/want"
    run pairs "$T/s-$kind" --k $K --similarity --min-similarity 0.9
    expect_status 0
    if cmp -s "$T/out" "$T/want"; then ok; else fail "$kind: pairs --min-similarity 0.9 differs from the reference"; fi
    run verify "$T/s-$kind"
    expect_status 0
done
# Both sides of J are populated, or the test proves little.
$REF pairs $K 0 "$T/fps" | awk -F'\t' '$4 < 0.9 { lo++ } $4 >= 0.9 { hi++ } END { exit !(lo > 20 && hi > 20) }' && ok || fail "the corpus has too few pairs on one side of 0.9"
# Without the new options: the old columns, byte for byte.
run pairs "$T/s"
cp "$T/out" "$T/plain"
run pairs "$T/s" --similarity
if cut -f1-3 "$T/out" | cmp -s - "$T/plain"; then ok; else fail "pairs --similarity changed the first three columns"; fi
run pairs "$T/s" --json --similarity --min-similarity 0.9
expect_status 0
if python3 -c 'import json,sys
for l in open(sys.argv[1]):
    d = json.loads(l); assert d["similarity"] >= 0.9 and set(d) == {"a", "b", "distance", "similarity"}' "$T/out"; then ok; else fail "pairs --json --similarity"; fi
run pairs "$T/s" --by-fingerprint --min-similarity 0.9
expect_status 2
expect_err_has "not with --by-fingerprint"

# ---- query ------------------------------------------------------------------
for j in 0 0.9; do
    $REF query $K $j "$T/fps" >"$T/want"
    for strategy in auto one-by-one; do
        run query "$T/s" --queries "$T/c.jsonl" --similarity --min-similarity $j --strategy $strategy
        expect_status 0
        if cmp -s "$T/out" "$T/want"; then ok; else fail "query --min-similarity $j ($strategy) differs from the reference"; diff "$T/out" "$T/want" | head -5 >&2; fi
    done
done
run query "$T/s" --queries "$T/c.jsonl"
cp "$T/out" "$T/plain"
run query "$T/s" --queries "$T/c.jsonl" --similarity
if cut -f1-4 "$T/out" | cmp -s - "$T/plain"; then ok; else fail "query --similarity changed the first four columns"; fi
# One text: identical text, similarity 1; JSON.
text=$(head -1 "$T/c.jsonl" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["text"])')
id=$(head -1 "$T/fps" | cut -f2)
run query "$T/s" --text "$text" --similarity --k 0
expect_out_has "$(printf -- '-\t%s\t' "$id")"
if awk -F'\t' -v id="$id" '$2 == id && $5 == "1" { found = 1 } END { exit !found }' "$T/out"; then ok; else fail "an identical text is not at similarity 1"; fi
run query "$T/s" --text "$text" --json --similarity --k 0
expect_out_has "\"id\":\"$id\","
expect_out_has '"distance":0,"similarity":1}'
run query "$T/s" --text "$text" --json --k 0
if grep -q similarity "$T/out"; then fail "query --json shows the similarity unasked"; else ok; fi
run query "$T/s" --queries "$T/c.jsonl" --json --end-marker --similarity --k 0
expect_status 0
if python3 -c 'import json,sys
for l in open(sys.argv[1]):
    d = json.loads(l); assert all(m["similarity"] is not None for m in d["matches"])' "$T/out"; then ok; else fail "query --json --end-marker --similarity"; fi
# By fingerprint: unknown; --min-similarity needs texts.
fp=$(head -1 "$T/fps" | cut -f1)
run query "$T/s" --fp "$fp" --similarity --k 0
expect_status 0
expect_out_has "$(printf '\t%s\t0\t-' "$fp")"
run query "$T/s" --fp "$fp" --json --similarity --k 0
expect_out_has '"similarity":null'
run query "$T/s" --fp "$fp" --min-similarity 0.9
expect_status 2
expect_err_has "needs the query's text"
cut -f1,2 "$T/fps" >"$T/q.fp"
run query "$T/s" --queries "$T/q.fp" --min-similarity 0.9
expect_status 2
expect_err_has "TSV and fingerprint-line queries have none"
run query "$T/s" --queries "$T/c.jsonl" --min-similarity 1.5
expect_status 2
expect_err_has "--min-similarity takes a number from 0 to 1"

# ---- clusters ---------------------------------------------------------------
for j in 0.5 0.9 0.97; do
    $REF clusters $K $j "$T/fps" >"$T/want"
    run clusters "$T/s" --k $K --similarity --min-similarity $j
    expect_status 0
    if cmp -s "$T/out" "$T/want"; then ok; else fail "clusters --min-similarity $j differs from the reference"; diff "$T/out" "$T/want" | head -5 >&2; fi
done
run clusters "$T/s"
cp "$T/out" "$T/plain"
run clusters "$T/s" --similarity
if cut -f1-4 "$T/out" | cmp -s - "$T/plain"; then ok; else fail "clusters --similarity changed the first four columns"; fi

# ---- dedup ------------------------------------------------------------------
for j in 0.8 0.93; do
    $REF dedup $K $j "$T/c.jsonl" "$T/fps" "$T/want.out" "$T/want.removed"
    for threads in 1 2; do
        run dedup --k $K --min-similarity $j --sketch minhash64 --similarity --removed "$T/got.removed" --threads $threads "$T/c.jsonl"
        expect_status 0
        if cmp -s "$T/out" "$T/want.out"; then ok; else fail "dedup --min-similarity $j: kept records differ"; fi
        if cmp -s "$T/got.removed" "$T/want.removed"; then ok; else fail "dedup --min-similarity $j: --removed differs"; diff "$T/got.removed" "$T/want.removed" | head -5 >&2; fi
    done
done
# --sketch without a store: the kind records are sketched and judged with
# (minhash256 is also the default: the defaults' section below).
"$SIMSTORE" fingerprint --jsonl --sketch minhash256 "$T/c.jsonl" >"$T/fps256"
$REF dedup $K 0.93 "$T/c.jsonl" "$T/fps256" "$T/want.out" "$T/want.removed"
run dedup --k $K --min-similarity 0.93 --sketch minhash256 --similarity --removed "$T/got.removed" "$T/c.jsonl"
expect_status 0
if cmp -s "$T/out" "$T/want.out"; then ok; else fail "dedup --sketch minhash256: kept records differ"; fi
if cmp -s "$T/got.removed" "$T/want.removed"; then ok; else fail "dedup --sketch minhash256: --removed differs"; fi
cp "$T/got.removed" "$T/removed256"
run dedup --k $K --min-similarity 0.93 --sketch minhash64 --similarity --removed "$T/got.removed" "$T/c.jsonl"
if cmp -s "$T/got.removed" "$T/removed256"; then fail "--sketch minhash256 changed nothing"; else ok; fi
run dedup --k 3 --sketch minhash256 "$T/c.jsonl"
expect_status 2; expect_err_has "give one of them"
run dedup --sketch none --min-similarity 0.5 "$T/c.jsonl"
expect_status 2; expect_err_has "--sketch none"
run dedup --sketch minhash256 --min-similarity 0.5 --store "$T/s" "$T/c.jsonl"
expect_status 2; expect_err_has "with its kind"
# Without the new options the --removed columns are the old three.
run dedup --k $K --removed "$T/got.removed" "$T/c.jsonl"
if awk -F'\t' 'NF != 3 { exit 1 }' "$T/got.removed"; then ok; else fail "dedup --removed grew a column unasked"; fi
run dedup --similarity "$T/c.jsonl"
expect_status 2
# Against a store that keeps sketches, and --add keeps them too.
head -n 100 "$T/c.jsonl" >"$T/first.jsonl"
tail -n +101 "$T/c.jsonl" >"$T/rest.jsonl"
run build "$T/d" --k $K -q "$T/first.jsonl"
run dedup --store "$T/d" --add --min-similarity 0.9 "$T/rest.jsonl"
expect_status 0
run pairs "$T/d" --similarity
if awk -F'\t' '$4 == "-" { exit 1 }' "$T/out"; then ok; else fail "documents added by dedup --add lack sketches"; fi
run verify "$T/d"
expect_status 0

# ---- the near-duplicate setting: what the scans do by default -----------------
# A store built with the defaults keeps minhash256 sketches of bigram texts;
# pairs, clusters and dedup without --k and --min-similarity are then the
# reference's at k = 7 and similarity 0.9; --k alone is a distance alone,
# --min-similarity alone filters candidates within 7, and 0 is the store's
# k unfiltered.
run build "$T/nd" -q "$T/c.jsonl"
expect_status 0
run stats "$T/nd"
expect_out_has "sketch: minhash256 (1-bit one-permutation MinHash, 2048 bins: 256 bytes per document)"
expect_out_has "--cjk bigram"
$REF pairs 7 0.9 "$T/fps256" >"$T/want-near"
$REF pairs 3 0 "$T/fps256" >"$T/want-k3"
$REF pairs 7 0 "$T/fps256" >"$T/want-k7"
# The three differ on this corpus, or the checks below prove little.
if ! cmp -s "$T/want-near" "$T/want-k3" && ! cmp -s "$T/want-near" "$T/want-k7"; then ok; else fail "the corpus does not tell the near-duplicate setting from k = 3 or 7 alone"; fi
run pairs "$T/nd" --similarity
expect_status 0
if cmp -s "$T/out" "$T/want-near"; then ok; else fail "pairs with the defaults differs from the reference at k = 7, J >= 0.9"; diff "$T/out" "$T/want-near" | head -5 >&2; fi
run pairs "$T/nd" --k 3 --similarity
if cmp -s "$T/out" "$T/want-k3"; then ok; else fail "pairs --k 3 alone is not a distance alone"; fi
run pairs "$T/nd" --min-similarity 0 --similarity
if cmp -s "$T/out" "$T/want-k3"; then ok; else fail "pairs --min-similarity 0 is not the store's k unfiltered"; fi
$REF pairs 7 0.8 "$T/fps256" >"$T/want"
run pairs "$T/nd" --min-similarity 0.8 --similarity
if cmp -s "$T/out" "$T/want"; then ok; else fail "pairs --min-similarity 0.8 alone is not filtered from k = 7"; fi
run pairs "$T/nd" --by-fingerprint
expect_status 0
"$SIMSTORE" pairs "$T/nd" --by-fingerprint --k 3 >"$T/want"
if cmp -s "$T/out" "$T/want"; then ok; else fail "pairs --by-fingerprint by default is not the store's k"; fi
$REF clusters 7 0.9 "$T/fps256" >"$T/want"
run clusters "$T/nd" --similarity
expect_status 0
if cmp -s "$T/out" "$T/want"; then ok; else fail "clusters with the defaults differs from the reference at k = 7, J >= 0.9"; diff "$T/out" "$T/want" | head -5 >&2; fi
$REF dedup 7 0.9 "$T/c.jsonl" "$T/fps256" "$T/want.out" "$T/want.removed"
$REF dedup 3 0 "$T/c.jsonl" "$T/fps256" "$T/want3.out" "$T/want3.removed"
if ! cmp -s "$T/want.out" "$T/want3.out"; then ok; else fail "the corpus does not tell dedup's defaults from k = 3"; fi
run dedup --similarity --removed "$T/got.removed" "$T/c.jsonl"
expect_status 0
if cmp -s "$T/out" "$T/want.out"; then ok; else fail "dedup with the defaults: kept records differ from k = 7, J >= 0.9"; fi
if cmp -s "$T/got.removed" "$T/want.removed"; then ok; else fail "dedup with the defaults: --removed differs"; fi
# A store without sketches: the store's k, no filter.
run build "$T/n0" --k $K -q --sketch none "$T/c.jsonl"
run pairs "$T/n0"
cp "$T/out" "$T/got"
$REF pairs $K 0 "$T/fps" | cut -f1-3 >"$T/want"
if cmp -s "$T/got" "$T/want"; then ok; else fail "pairs of a store without sketches is not at the store's k by default"; fi
run pairs "$T/n0" --k $K
if cmp -s "$T/got" "$T/out"; then ok; else fail "pairs of a store without sketches is not at the store's k by default"; fi

# ---- add ----------------------------------------------------------------------
run add "$T/s-minhash16" -q "$T/first.jsonl" 2>/dev/null
expect_status 1
run add "$T/s-minhash16" -q --skip-existing "$T/rest.jsonl"
expect_status 0
cut -f1,2 "$T/fps" | head -3 | awk -F'\t' '{ print "new-" $2 "\t" $1 }' >"$T/more.tsv"
run add "$T/s-minhash16" -q "$T/more.tsv"
expect_status 1
expect_err_has "gives fingerprints without their texts"

# ---- stores without sketches ----------------------------------------------------
run build "$T/n" --k $K -q --sketch none "$T/c.jsonl"
expect_status 0
run stats "$T/n"
expect_out_has "sketch: none"
run pairs "$T/n" --similarity
expect_status 0
if awk -F'\t' '$4 != "-" { exit 1 }' "$T/out"; then ok; else fail "a store without sketches gave a similarity"; fi
run pairs "$T/n" --min-similarity 0.9
expect_status 1
expect_err_has "keeps no sketches"
run clusters "$T/n" --min-similarity 0.9
expect_status 1
expect_err_has "keeps no sketches"
run query "$T/n" --text "$text" --min-similarity 0.9
expect_status 1
expect_err_has "keeps no sketches"
run query "$T/n" --text "$text" --similarity --k 0
expect_status 0
expect_out_has "$(printf '\t0\t-')"
run dedup --store "$T/n" --min-similarity 0.9 "$T/rest.jsonl"
expect_status 1
expect_err_has "keeps no sketches"
# Fingerprints without texts: no sketches by default; asking for them fails.
cut -f1,2 "$T/fps" >"$T/c.fp"
run build "$T/f" -q "$T/c.fp"
expect_status 0
run stats "$T/f"
expect_out_has "sketch: none"
run build "$T/f2" -q --sketch minhash64 "$T/c.fp"
expect_status 1
expect_err_has "or build with --sketch none"
run build "$T/f3" -q --fingerprint-only --sketch minhash64 "$T/c.fp"
expect_status 2
run build "$T/f3" --sketch minhash8 "$T/c.jsonl"
expect_status 2
expect_err_has "--sketch takes none, minhash16, minhash32, minhash64, minhash128 or minhash256"
run fingerprint --sketch minhash64 --paragraphs "$T/c.jsonl"
expect_status 2

finish
