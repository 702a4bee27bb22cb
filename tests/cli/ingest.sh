#!/usr/bin/env bash
# ingest.sh: builds and adds at real sizes through the parallel ingest
# pipeline. For JSON Lines, TSV, fingerprint lines and bare fingerprints,
# at 75,000 records and at exact multiples (and +-1) of the pipeline's batch
# and ring sizes, `build` and `add` with --threads 1, 2, 3 and 8 must make
# byte-identical stores (every table's dump, LMDB's docs and fps records)
# that give identical answers. SIMSTORE_INGEST_N sets the large count (the
# sanitizer build uses a smaller one); the default is the smallest round
# count past the largest ring edge, 18 batches of 4096 lines + 1 at 8 threads.
source "$(dirname "$0")/lib.sh"

N=${SIMSTORE_INGEST_N:-75000}
THREADS="1 2 3 8"
# Sampled (the sanitizer pass): one thread, an odd count and more threads
# than cores.
sampled && THREADS="1 3 8"
# The pipeline's sizes (cmd/ingest.h): 4096 lines a batch, 2*threads+2 slots.
BATCH=4096
command -v mdb_dump >/dev/null || { echo "ingest.sh: mdb_dump (lmdb-utils) is needed" >&2; exit 1; }

# gen_jsonl COUNT [START]: documents with ids, texts of varying length drawn
# from a small vocabulary (so there are near-duplicates), an extra member
# and, every 7th, metadata; every 1000th document is long (3..40 KiB).
gen_jsonl() {
    awk -v n="$1" -v start="${2:-0}" 'BEGIN {
        srand(7);
        for (w = 0; w < 400; w++) { s = ""; l = 3 + int(rand() * 6);
            for (c = 0; c < l; c++) s = s sprintf("%c", 97 + int(rand() * 26)); voc[w] = s }
        for (i = start; i < start + n; i++) {
            srand(i * 7919 + 13);
            words = 5 + int(rand() * 40);
            if (i % 1000 == 999) words = 500 + int(rand() * 6000);
            t = voc[int(rand() * 400)];
            for (j = 1; j < words; j++) t = t " " voc[int(rand() * 400)];
            meta = (i % 7 == 0) ? sprintf(", \"meta\": {\"n\": %d}", i) : "";
            if (i % 5 == 0)
                printf "{\"id\": %d, \"url\": \"http://example.org/%d\", \"text\": \"%s\"%s}\n", i, i, t, meta;
            else
                printf "{\"id\": \"doc-%d\", \"text\": \"%s\"%s}\n", i, t, meta;
        }
    }'
}
# gen_tsv COUNT [START]: id<TAB>hex16 with clustered fingerprints.
gen_tsv() {
    awk -v n="$1" -v start="${2:-0}" 'BEGIN {
        for (i = start; i < start + n; i++) {
            srand(i * 104729 + 1);
            hi = int(rand() * 65536); if (i % 3 == 0) hi = 4242;
            printf "t-%d\t%04x%04x%04x%04x\n", i, hi, int(rand() * 65536), int(rand() * 65536), int(rand() * 65536);
        }
    }'
}

# snapshot STORE OUT: everything that must be identical across thread
# counts: table contents (the dump's first line names the file and the
# store's random tag), LMDB's document records, the document file, and the
# answers to queries.
snapshot() {
    local s=$1 out=$2 queries=$3 f
    : >"$out"
    for f in "$s"/*.tbl; do
        echo "== $(basename "$f")" >>"$out"
        "$SIMSTORE" dump "$f" | tail -n +2 >>"$out" || echo "dump failed: $f" >>"$out"
    done
    if [ "$4" != fp-only ]; then
        mdb_dump -s docs "$s" | tail -n +4 >>"$out"
        mdb_dump -s fps "$s" | tail -n +4 >>"$out"
        # The document file, byte for byte (format/store.md, "Document
        # files"): its checksum, as a dump of a 27 MB file took longer than
        # the build that wrote it.
        for f in "$s"/*.doc; do
            [ -e "$f" ] && sha256sum <"$f" >>"$out"
        done
    fi
    "$SIMSTORE" query "$s" --queries "$queries" --format tsv >>"$out" 2>&1 || echo "query failed" >>"$out"
}

# check_threads NAME FORMAT-ARGS... -- INPUTS...: build with every thread
# count, compare each snapshot with --threads 1's.
check_threads() {
    local name=$1 kind=$2
    shift 2
    local t ref="" base
    for t in $THREADS; do
        base="$T/$name-t$t"
        if ! "$SIMSTORE" build "$base.store" -q --threads "$t" "$@" <"${FEED:-/dev/null}" >"$T/out" 2>"$T/err"; then
            status=$?
            fail "$name: build --threads $t failed ($status)"
            continue
        fi
        ok
        snapshot "$base.store" "$base.snap" "$T/queries.tsv" "$kind"
        if [ -z "$ref" ]; then
            ref="$base.snap"
        elif cmp -s "$ref" "$base.snap"; then
            ok
        else
            fail "$name: --threads $t differs from --threads 1"
        fi
    done
    rm -rf "$T/$name"-t*.store
}

gen_tsv 300 9000000 | awk -F'\t' '{print "q" NR "\t" $2}' >"$T/queries.tsv"
gen_jsonl 200 | tail -n 100 | sed 's/"id": "doc-/"id": "q-/; s/"id": \([0-9]\)/"id": "q\1/' >"$T/queries.jsonl"

# 1. N records in each format, build with every thread count.
gen_jsonl "$N" >"$T/big.jsonl"
gen_tsv "$N" >"$T/big.tsv"
awk -F'\t' '{print $2 "\t" $1}' "$T/big.tsv" >"$T/big.fp"
cut -f2 "$T/big.tsv" >"$T/big.hex"
check_threads big-jsonl docs "$T/big.jsonl"
check_threads big-tsv docs "$T/big.tsv"
check_threads big-fp docs "$T/big.fp"
check_threads big-hex fp-only --fingerprint-only "$T/big.hex"
# Standard input (one thread and the most), and several inputs in one
# build (the JSON Lines part smaller: its formats are covered above).
THREADS="${THREADS%% *} ${THREADS##* }" FEED="$T/big.jsonl" check_threads big-stdin docs --format jsonl -
gen_tsv 5000 5000000 >"$T/extra.tsv"
head -n 10000 "$T/big.jsonl" >"$T/some.jsonl"
check_threads multi docs "$T/big.tsv" "$T/extra.tsv" "$T/some.jsonl"
run build "$T/count.store" -q "$T/big.jsonl"
expect_status 0
expect_out_has "built $T/count.store: $N documents"

# 2. At the edges of every batch and ring size: k*4096 +-1 lines for the
# ring of each thread count (2t+2 batches), and one batch +-1.
for t in $THREADS; do
    slots=$((2 * t + 2))
    for n in $((BATCH - 1)) $BATCH $((BATCH + 1)) $((slots * BATCH - 1)) $((slots * BATCH)) $((slots * BATCH + 1)); do
        [ "$n" -le "$N" ] || continue
        head -n "$n" "$T/big.tsv" >"$T/edge.tsv"
        run build "$T/edge.store" -q --threads "$t" "$T/edge.tsv"
        expect_status 0
        expect_out_has ": $n documents"
        snapshot "$T/edge.store" "$T/edge.snap" "$T/queries.tsv" docs
        rm -rf "$T/edge.store"
        # The reference for n lines: --threads 1, made once.
        if [ ! -e "$T/edge-ref-$n.snap" ]; then
            "$SIMSTORE" build "$T/edge-ref.store" -q --threads 1 "$T/edge.tsv" >/dev/null
            snapshot "$T/edge-ref.store" "$T/edge-ref-$n.snap" "$T/queries.tsv" docs
            rm -rf "$T/edge-ref.store"
        fi
        if cmp -s "$T/edge.snap" "$T/edge-ref-$n.snap"; then ok; else fail "edge $n lines, --threads $t differs"; fi
    done
done
# A file without a final newline, CRLF endings, and a batch cut by bytes
# (long lines) rather than by lines.
head -n 5000 "$T/big.jsonl" | sed 's/$/\r/' | head -c -2 >"$T/crlf.jsonl"
check_threads crlf docs "$T/crlf.jsonl"
# Written word by word: awk's string concatenation copies the whole text
# each time (minutes for 1 MB).
awk 'BEGIN { for (i = 0; i < 40; i++) { printf "{\"id\": \"long-%d\", \"text\": \"", i;
    for (j = 0; j < 9000 + i * 997; j++) printf "w%d ", j % 50; printf "\"}\n" } }' >"$T/long.jsonl"
check_threads long docs "$T/long.jsonl"

# 3. add: the first half built, the second half added, at every thread
# count; the same store whatever the count.
half=$((N / 2))
head -n "$half" "$T/big.jsonl" >"$T/first.jsonl"
tail -n +"$((half + 1))" "$T/big.jsonl" >"$T/second.jsonl"
ref=""
for t in $THREADS; do
    "$SIMSTORE" build "$T/add-$t.store" -q --threads "$t" "$T/first.jsonl" >/dev/null 2>"$T/err"
    run add "$T/add-$t.store" -q --threads "$t" "$T/second.jsonl"
    expect_status 0
    expect_out_has "added $((N - half)) documents"
    snapshot "$T/add-$t.store" "$T/add-$t.snap" "$T/queries.tsv" docs
    "$SIMSTORE" query "$T/add-$t.store" --queries "$T/queries.jsonl" --json >>"$T/add-$t.snap" 2>&1
    if [ -z "$ref" ]; then ref="$T/add-$t.snap"; elif cmp -s "$ref" "$T/add-$t.snap"; then ok; else fail "add --threads $t differs"; fi
    rm -rf "$T/add-$t.store"
done

# 4. Errors in order and all-or-nothing at any thread count: bad records
# scattered through a large input are reported in input order, the same
# lines whatever the count, and no store appears.
every=$((N / 12 + 1))
awk -v every="$every" 'NR % every == 0 { print "{\"id\": \"broken" NR "\", \"text\": " ; next } { print }' "$T/big.jsonl" >"$T/bad.jsonl"
ref=""
for t in $THREADS; do
    run build "$T/bad-$t.store" -q --threads "$t" --sketch none "$T/bad.jsonl"
    expect_status 1
    [ ! -e "$T/bad-$t.store" ] && ok || fail "a failed build left $T/bad-$t.store"
    grep -o 'bad.jsonl:[0-9]*' "$T/err" >"$T/bad-$t.lines"
    if [ -z "$ref" ]; then
        ref="$T/bad-$t.lines"
        [ "$(wc -l <"$ref")" -ge 5 ] && ok || fail "expected the bad lines reported"
    elif cmp -s "$ref" "$T/bad-$t.lines"; then ok; else fail "bad-record messages differ at --threads $t"; fi
done
# The 20-error limit stops reading early, at every thread count.
awk '{ if (NR % 50 == 0) print "not json"; else print }' "$T/big.jsonl" >"$T/many-bad.jsonl"
for t in $THREADS; do
    run build "$T/mb.store" -q --threads "$t" "$T/many-bad.jsonl"
    expect_status 1
    expect_err_has "stopping after 20 bad records"
    [ "$(grep -c 'many-bad.jsonl:' "$T/err")" = 20 ] && ok || fail "expected exactly 20 bad records reported"
done

finish
