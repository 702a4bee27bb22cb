#!/usr/bin/env bash
# docfile_store.sh: stores whose documents are in a document file (what a
# build writes; format/store.md, "Document files") answer every read byte
# for byte as the same store with its documents in LMDB (built empty and
# the same input added without compaction: changes_store): single and
# batch queries at k = 0..7 (with metadata and similarities), get, export in both orders, pairs, clusters (with
# singletons), on the sample (sketches, metadata, JSON-integer ids) and on
# fingerprint sets that are random, clustered, duplicate-heavy and
# adversarial. Also: verify passes and finds damage in the file, stats
# counts its bytes, and a damaged byte in the file gives an error
# or the right answer, never a wrong one. And after adds, deletes, re-adds
# and compactions (docs then holds the changes: the documents added and
# tombstones of the file's), every read still equals the LMDB store's.
. "$(dirname "$0")/lib.sh"

SAMPLE=$SRC/tests/data/sample.jsonl

# A TSV of fingerprints: random, near copies of a few centres, one
# fingerprint under many ids, and the extremes.
awk 'BEGIN {
    srand(7);
    h = "0123456789abcdef";
    for (i = 0; i < 300; i++) {
        s = ""; for (j = 0; j < 16; j++) s = s substr(h, int(rand() * 16) + 1, 1);
        printf "r%d\t%s\n", i, s;
        if (i < 20) centre[i] = s;
    }
    for (i = 0; i < 400; i++) {
        s = centre[i % 20];
        for (f = 0; f < 1 + i % 4; f++) {
            p = int(rand() * 16) + 1; c = substr(s, p, 1);
            v = index(h, c) - 1; b = 2 ^ int(rand() * 4); v = int(v / b) % 2 ? v - b : v + b;
            s = substr(s, 1, p - 1) substr(h, v + 1, 1) substr(s, p + 1);
        }
        printf "c%03d\t%s\n", i, s;
    }
    for (i = 0; i < 150; i++) printf "dup%d\t%s\n", i, centre[3];
    printf "zero\t0000000000000000\nones\tffffffffffffffff\nhigh\t8000000000000000\n";
    printf "low\t0000000000000001\n";
}' >"$T/fps.tsv"

# build NAME INPUT [FORMAT ARGS...]: NAME.lmdb and NAME.doc from the same input.
build_both() {
    local name=$1
    shift
    changes_store "$T/$name.lmdb" "$@" || fail "build $name in LMDB"
    "$SIMSTORE" build "$T/$name.doc" -q "$@" >/dev/null ||
        fail "build $name with a document file"
    if [ -f "$T/$name.doc/s0000000001.doc" ]; then ok; else fail "$name: no document file"; fi
}

# same NAME ARGS...: the command on both stores prints the same bytes and
# exits the same way.
same() {
    local name=$1
    shift
    local a b
    "$SIMSTORE" "$1" "$T/$name.lmdb" "${@:2}" >"$T/a.out" 2>"$T/a.err"
    a=$?
    "$SIMSTORE" "$1" "$T/$name.doc" "${@:2}" >"$T/b.out" 2>"$T/b.err"
    b=$?
    sed -i "s#$T/$name.lmdb#STORE#g" "$T/a.out" "$T/a.err"
    sed -i "s#$T/$name.doc#STORE#g" "$T/b.out" "$T/b.err"
    if [ "$a" = "$b" ] && cmp -s "$T/a.out" "$T/b.out" && cmp -s "$T/a.err" "$T/b.err"; then
        ok
    else
        fail "$name: '$*' differs (exit $a / $b): $(diff "$T/a.out" "$T/b.out" | head -5)"
    fi
}

build_both sample "$SAMPLE"
build_both fps "$T/fps.tsv"
"$SIMSTORE" export "$T/sample.lmdb" >"$T/sample.q"
awk 'BEGIN { srand(11); h = "0123456789abcdef";
    for (i = 0; i < 50; i++) { s = ""; for (j = 0; j < 16; j++) s = s substr(h, int(rand() * 16) + 1, 1);
        printf "q%d\t%s\n", i, s } }' >>"$T/sample.q"
cat "$T/fps.tsv" "$T/sample.q" >"$T/fps.q"

# Sampled (the sanitizer pass): three of the distances; the damage sweep
# below at a wider stride.
ks="0 1 2 3 4 5 6 7"
sampled && ks="0 3 7"
for name in sample fps; do
    for k in $ks; do
        same $name query --k $k --queries "$T/$name.q" --format tsv --json --meta
        same $name query --k $k --queries "$T/$name.q" --format tsv --threads 2
    done
    same $name query --k 3 --fp "$(head -1 "$T/$name.q" | cut -f2)" --json --meta
    same $name query --k 7 --fp 0000000000000000
    same $name get --json $(cut -f1 "$T/$name.q" | head -60) nosuch
    same $name get $(cut -f1 "$T/$name.q" | head -20)
    same $name export
    same $name export --json
    same $name export --json --order insertion
    same $name export --order insertion --memory 16M
    same $name pairs --k 3
    same $name pairs --k 7 --threads 2
    same $name clusters
    same $name clusters --json --singletons
    same $name clusters --k 5 --mode star --singletons --threads 2
done
same sample query --k 3 --queries "$T/sample.q" --format tsv --json --similarity
same sample clusters --similarity --singletons

# verify, stats and inspect see the document file.
run verify "$T/fps.doc"
expect_status 0
expect_out_has "OK: 0 errors, 0 warnings"
expect_out_has "$(wc -l <"$T/fps.tsv") documents"
run stats "$T/fps.doc"
expect_status 0
expect_out_has "document file"
run stats "$T/fps.doc" --json
expect_out_has '"document_file":'
run inspect "$T/fps.doc"
expect_status 0
expect_out_has "document file: s0000000001.doc, $(wc -l <"$T/fps.tsv") documents, "
run inspect "$T/fps.doc" --json
expect_out_has '"document_file":{"documents":'"$(wc -l <"$T/fps.tsv")"',"bytes":'
run inspect "$T/fps.lmdb"
if grep -q "document file" "$T/out"; then fail "inspect of a store in LMDB names a document file"; else ok; fi

# reads NAME [moved]: every read of both stores compared (moved: the second
# was compacted alone, so its segment ids and generation differ).
reads() {
    local name=$1 moved=${2:-}
    for k in 0 3 7; do
        same $name query --k $k --queries "$T/$name.q" --format tsv --json --meta
    done
    same $name query --k 5 --queries "$T/$name.q" --format tsv --threads 2
    if [ -z "$moved" ]; then
        same $name get --json $(cut -f1 "$T/$name.q" | head -40) nosuch new1 new2 new3 r1 r2 c007
    fi
    same $name export --json
    same $name export --order insertion
    same $name pairs --k 4
    same $name clusters --json --singletons
    same $name clusters --k 6 --mode star --threads 2
    # (Not the generation: the store in LMDB took one commit more.)
    local lines=3
    [ -z "$moved" ] || lines=2
    for s in "$T/$name.lmdb" "$T/$name.doc"; do
        "$SIMSTORE" stats "$s" | grep -E '^(documents|fingerprints|segments):' | head -n $lines
    done >"$T/counts"
    local half=$(($(wc -l <"$T/counts") / 2))
    if [ "$(head -n $half "$T/counts")" = "$(tail -n $half "$T/counts")" ]; then ok; else
        fail "$name: stats counts differ: $(cat "$T/counts")"
    fi
    for s in "$T/$name.lmdb" "$T/$name.doc"; do
        run verify "$s"
        expect_status 0
    done
}

# Writers: adds (a new fingerprint, one a file document has, one new to the
# file), deletes (the file's documents, an added one, a missing one), an id
# deleted from the file and added again, a clash, a compaction; after each,
# every read as the store in LMDB. The file stays until the compaction
# writes the next one; docs then holds nothing.
both() {
    local a b
    "$SIMSTORE" "$1" "$T/fps.lmdb" "${@:2}" >"$T/a.out" 2>&1
    a=$?
    "$SIMSTORE" "$1" "$T/fps.doc" "${@:2}" >"$T/b.out" 2>&1
    b=$?
    sed -i "s#$T/fps.lmdb#STORE#g" "$T/a.out"
    sed -i "s#$T/fps.doc#STORE#g" "$T/b.out"
    if [ "$a" = "$b" ] && cmp -s "$T/a.out" "$T/b.out"; then
        ok
    else
        fail "'$*' differs (exit $a / $b): $(diff "$T/a.out" "$T/b.out" | head -5)"
    fi
}
printf 'new1\t0123456789abcdef\nnew2\t%s\nnew3\t%s\n' "$(sed -n 3p "$T/fps.tsv" | cut -f2)" \
    "$(grep '^dup7	' "$T/fps.tsv" | cut -f2)" >"$T/new.tsv"
both add --no-auto-compact "$T/new.tsv"
reads fps
both delete --no-auto-compact r1 dup3 c007 new1 nosuch zero
reads fps
grep -E '^(r1|zero)	' "$T/fps.tsv" >"$T/again.tsv"
both add --no-auto-compact "$T/again.tsv"
reads fps
both add --no-auto-compact "$T/again.tsv"
both delete --no-auto-compact new2 r1 dup4
reads fps
run stats "$T/fps.doc"
expect_out_has "document file"
both compact
reads fps
if [ -f "$T/fps.doc/s0000000001.doc" ]; then fail "the old document file stayed"; else ok; fi
if ls "$T/fps.doc"/*.doc >/dev/null 2>&1; then ok; else fail "no document file after compaction"; fi
run stats "$T/fps.doc"
expect_out_has "LMDB records 0.00, mapping 0.00"
both delete --no-auto-compact dup5
both add --no-auto-compact "$T/new.tsv"
reads fps

# A compaction of a store whose documents are in LMDB moves them into a
# document file, answering the same.
changes_store "$T/conv.lmdb" "$T/fps.tsv" || fail "changes_store conv"
cp -r "$T/conv.lmdb" "$T/conv.doc"
cp "$T/fps.q" "$T/conv.q"
"$SIMSTORE" compact "$T/conv.doc" >/dev/null || fail "compact conv"
if ls "$T/conv.doc"/*.doc >/dev/null 2>&1; then ok; else fail "compact wrote no document file"; fi
reads conv moved
for id in $(cut -f1 "$T/conv.q" | head -60) nosuch; do
    echo "$id"
done >"$T/conv.ids"
"$SIMSTORE" get "$T/conv.lmdb" --json $(cat "$T/conv.ids") 2>&1 | sed 's/,"segment":[0-9]*//' >"$T/a.out"
"$SIMSTORE" get "$T/conv.doc" --json $(cat "$T/conv.ids") 2>&1 | sed 's/,"segment":[0-9]*//' >"$T/b.out"
sed -i "s#$T/conv.lmdb#STORE#g" "$T/a.out"
sed -i "s#$T/conv.doc#STORE#g" "$T/b.out"
cmp -s "$T/a.out" "$T/b.out" && ok || fail "conv: get differs: $(diff "$T/a.out" "$T/b.out" | head -4)"

# A document file left by no committed state is a leftover (a warning).
cp -r "$T/fps.lmdb" "$T/left"
cp "$T"/fps.doc/*.doc "$T/left/s0000000009.doc"
run verify "$T/left"
expect_status 0
expect_out_has "document file of segment 9"

# Damage: every 97th byte of the file flipped. Verify fails; a query
# fails or answers exactly as the undamaged store.
DOC=$(ls "$T"/sample.doc/*.doc)
size=$(stat -c %s "$DOC")
"$SIMSTORE" query "$T/sample.lmdb" --k 3 --queries "$T/sample.q" --format tsv --json --meta >"$T/good"
cp "$DOC" "$T/doc.orig"
bad=0
stride=97
sampled && stride=389
for ((off = 5; off < size; off += stride)); do
    cp "$T/doc.orig" "$DOC"
    printf '%s' "$(printf '\\%03o' $(( ($(od -An -tu1 -j $off -N1 "$DOC") ^ 0x10) )))" |
        dd of="$DOC" bs=1 seek=$off conv=notrunc status=none
    if "$SIMSTORE" verify "$T/sample.doc" >/dev/null 2>&1; then
        fail "verify passed with byte $off flipped"
    fi
    if "$SIMSTORE" query "$T/sample.doc" --k 3 --queries "$T/sample.q" --format tsv --json --meta \
        >"$T/got" 2>/dev/null && ! cmp -s "$T/got" "$T/good"; then
        bad=$((bad + 1))
        echo "byte $off: a wrong answer" >&2
    fi
done
cp "$T/doc.orig" "$DOC"
[ "$bad" = 0 ] && ok || fail "$bad damaged files gave wrong answers"
run verify "$T/sample.doc"
expect_status 0

finish
