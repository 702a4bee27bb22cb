#!/usr/bin/env bash
# compressed.sh: gzip and zstd input (told by the magic bytes) for every
# command that reads documents or fingerprints, each answer equal to the plain
# input's; truncated, corrupt and trailing-garbage input named as FILE:LINE;
# a FIFO opened once; build/add from compressed files all or nothing.
. "$(dirname "$0")/lib.sh"

sample="$SRC/tests/data/sample.jsonl"

# expect_err_line CMD FILE WHAT: stderr has "simstore CMD: FILE:LINE: WHAT".
expect_err_line() {
    local file_re
    file_re=$(printf '%s' "$2" | sed 's/[].*^$()+?{}|\\[]/\\&/g')
    if grep -qE "^simstore $1: $file_re:[0-9]+: $3" "$T/err"; then ok; else
        fail "stderr lacks 'simstore $1: $2:LINE: $3'"; fi
}
same_out() { # same_out FILE WHAT: stdout equals FILE
    if cmp -s "$T/out" "$1"; then ok; else fail "$2: output differs from the plain input's"; fi
}

# A corpus larger than the decompressor's ring (4 chunks of 256 KiB), so that
# chunk boundaries fall inside lines.
awk 'BEGIN {
    srand(7)
    split("alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega river stone cloud", w, " ")
    for (i = 1; i <= 6000; i++) {
        n = 20 + int(rand() * 60); t = ""
        for (j = 0; j < n; j++) t = t w[1 + int(rand() * 14)] " "
        printf "{\"id\": \"g%d\", \"text\": \"%s\"}\n", i, t
    }
}' >"$T/big.jsonl"
for f in "$sample" "$T/big.jsonl"; do
    b=$(basename "$f")
    gzip -c "$f" >"$T/$b.gz"
    zstd -q -c "$f" >"$T/$b.zst"
done

# ---- fingerprint --------------------------------------------------------------
printf 'The quick brown fox jumps over the lazy dog.' >"$T/fox.txt"
gzip -c "$T/fox.txt" >"$T/fox.txt.gz"
zstd -q -c "$T/fox.txt" >"$T/fox.txt.zst"
cp "$T/fox.txt.gz" "$T/fox-no-suffix"   # the bytes decide, not the name
run fingerprint "$T/fox.txt" "$T/fox.txt.gz" "$T/fox.txt.zst" "$T/fox-no-suffix"
expect_status 0; expect_err_empty
expect_out "5cc1c8efc0c9b905	$T/fox.txt
5cc1c8efc0c9b905	$T/fox.txt.gz
5cc1c8efc0c9b905	$T/fox.txt.zst
5cc1c8efc0c9b905	$T/fox-no-suffix"
run_in "$T/fox.txt.zst" fingerprint -
expect_status 0; expect_out "5cc1c8efc0c9b905	-"

for b in sample.jsonl big.jsonl; do
    src=$sample; [ "$b" = big.jsonl ] && src=$T/big.jsonl
    run fingerprint --jsonl "$src"
    expect_status 0
    cp "$T/out" "$T/$b.fp"
    for z in gz zst; do
        run fingerprint --jsonl "$T/$b.$z"
        expect_status 0; expect_err_empty
        same_out "$T/$b.fp" "fingerprint --jsonl $b.$z"
        run_in "$T/$b.$z" fingerprint --jsonl -
        expect_status 0; expect_err_empty
        same_out "$T/$b.fp" "fingerprint --jsonl - < $b.$z"
    done
done
[ "$(wc -l <"$T/big.jsonl.fp")" = 6000 ] && ok || fail "big corpus: expected 6000 fingerprints"

# Several gzip members (cat a.gz b.gz) and several zstd frames are one input.
head -40 "$sample" >"$T/a.jsonl"
tail -n +41 "$sample" >"$T/b.jsonl"
cat <(gzip -c "$T/a.jsonl") <(gzip -c "$T/b.jsonl") >"$T/multi.jsonl.gz"
cat <(zstd -q -c "$T/a.jsonl") <(zstd -q -c "$T/b.jsonl") >"$T/multi.jsonl.zst"
for z in gz zst; do
    run fingerprint --jsonl "$T/multi.jsonl.$z"
    expect_status 0; expect_err_empty
    same_out "$T/sample.jsonl.fp" "multi-member $z"
done
# An empty member between two (gzip of nothing) changes nothing either.
cat <(gzip -c "$T/a.jsonl") <(gzip -c </dev/null) <(gzip -c "$T/b.jsonl") >"$T/multi2.jsonl.gz"
run fingerprint --jsonl "$T/multi2.jsonl.gz"
expect_status 0; same_out "$T/sample.jsonl.fp" "gzip with an empty member"

# Lines longer than the line reader's buffer, CRLF endings and a last line
# without a newline: the record's text fingerprints as the same text alone.
awk 'BEGIN { for (i = 0; i < 40000; i++) printf "word%d ", i % 997 }' >"$T/long.txt"
run fingerprint "$T/long.txt"
hex=$(cut -f1 "$T/out")
{ printf '{"id": "short", "text": "a b c"}\r\n{"id": "long", "text": "'; cat "$T/long.txt"
  printf '"}\r\n{"id": "last", "text": "'; cat "$T/long.txt"; printf '"}'; } >"$T/long.jsonl"
gzip -c "$T/long.jsonl" >"$T/long.jsonl.gz"
for f in "$T/long.jsonl" "$T/long.jsonl.gz"; do
    run fingerprint --jsonl "$f"
    expect_status 0; expect_err_empty
    expect_out_lines 3
    expect_out_has "$hex	long"
    expect_out_has "$hex	last"
done

# ---- broken compressed input: FILE:LINE, exit 1, earlier lines kept -----------
size=$(stat -c %s "$T/big.jsonl.gz")
head -c $((size / 2)) "$T/big.jsonl.gz" >"$T/trunc.jsonl.gz"
run fingerprint --jsonl "$T/trunc.jsonl.gz"
expect_status 1
expect_err_line fingerprint "$T/trunc.jsonl.gz" "gzip data is truncated"
n=$(wc -l <"$T/out")
line=$(sed -n 's/.*trunc\.jsonl\.gz:\([0-9]*\): gzip data is truncated.*/\1/p' "$T/err")
[ "$n" -gt 100 ] && [ "$line" = $((n + 1)) ] && ok ||
    fail "truncated gzip: $n records before the break, reported at line '$line'"
head -n "$n" "$T/big.jsonl.fp" | cmp -s - "$T/out" && ok || fail "truncated gzip: the records before the break differ"

size=$(stat -c %s "$T/big.jsonl.zst")
head -c $((size / 2)) "$T/big.jsonl.zst" >"$T/trunc.jsonl.zst"
run fingerprint --jsonl "$T/trunc.jsonl.zst"
expect_status 1
expect_err_line fingerprint "$T/trunc.jsonl.zst" "zstd data is truncated"
n=$(wc -l <"$T/out")
head -n "$n" "$T/big.jsonl.fp" | cmp -s - "$T/out" && ok || fail "truncated zstd: the records before the break differ"

# Bytes flipped in the middle.
corrupt() { # corrupt IN OUT: OUT is IN with 16 bytes in the middle flipped
    cp "$1" "$2"
    local size
    size=$(stat -c %s "$1")
    printf '\xde\xad\xbe\xef\xde\xad\xbe\xef\xde\xad\xbe\xef\xde\xad\xbe\xef' |
        dd of="$2" bs=1 seek=$((size / 2)) conv=notrunc status=none
}
corrupt "$T/big.jsonl.gz" "$T/bad.jsonl.gz"
run fingerprint --jsonl "$T/bad.jsonl.gz"
expect_status 1
expect_err_line fingerprint "$T/bad.jsonl.gz" "gzip data is (corrupt: |truncated)"
corrupt "$T/big.jsonl.zst" "$T/bad.jsonl.zst"
run fingerprint --jsonl "$T/bad.jsonl.zst"
expect_status 1
expect_err_line fingerprint "$T/bad.jsonl.zst" "zstd data is corrupt: "
# The same through standard input.
run_in "$T/bad.jsonl.zst" fingerprint --jsonl -
expect_status 1
expect_err_line fingerprint "<stdin>" "zstd data is corrupt: "

# Trailing garbage after a complete gzip member is corrupt, after the data.
{ cat "$T/sample.jsonl.gz"; printf 'garbage\n'; } >"$T/trail.jsonl.gz"
run fingerprint --jsonl "$T/trail.jsonl.gz"
expect_status 1
expect_err_has "simstore fingerprint: $T/trail.jsonl.gz:93: gzip data is corrupt: trailing garbage after a gzip member"
same_out "$T/sample.jsonl.fp" "trailing garbage: the records before it"
# A plain document that breaks: the line where it broke.
head -c 20 "$T/fox.txt.gz" >"$T/fox-trunc.gz"
run fingerprint "$T/fox-trunc.gz"
expect_status 1
expect_err_has "simstore fingerprint: $T/fox-trunc.gz:1: gzip data is truncated"
# Only the magic bytes.
printf '\x1f\x8b' >"$T/magic.gz"
printf '\x28\xb5\x2f\xfd' >"$T/magic.zst"
run fingerprint "$T/magic.gz"; expect_status 1; expect_err_has "magic.gz:1: gzip data is truncated"
run fingerprint "$T/magic.zst"; expect_status 1; expect_err_has "magic.zst:1: zstd data is truncated"
# Short plain files that begin like a magic are plain.
printf '\x1f' >"$T/one-byte"
printf '\x28\xb5' >"$T/two-bytes"
run fingerprint "$T/one-byte" "$T/two-bytes" /dev/null
expect_status 0
expect_out_lines 3
run fingerprint "$T"
expect_status 1; expect_err_has "simstore fingerprint: $T: Is a directory"

# ---- a FIFO is opened once and read to the end ---------------------------------
fifo_run() { # fifo_run SOURCE ARGS...: simstore ARGS... FIFO, SOURCE written into the FIFO
    local src=$1
    shift
    rm -f "$T/fifo"
    mkfifo "$T/fifo"
    cat "$src" >"$T/fifo" &
    local writer=$!
    timeout 20 "$SIMSTORE" "$@" "$T/fifo" >"$T/out" 2>"$T/err"
    status=$?
    kill "$writer" 2>/dev/null
    wait "$writer" 2>/dev/null
}
fifo_run "$T/fox.txt" fingerprint
expect_status 0
expect_out "5cc1c8efc0c9b905	$T/fifo"
fifo_run "$T/fox.txt.zst" fingerprint
expect_status 0
expect_out "5cc1c8efc0c9b905	$T/fifo"
fifo_run "$T/big.jsonl.gz" fingerprint --jsonl
expect_status 0
same_out "$T/big.jsonl.fp" "fingerprint --jsonl FIFO (gzip)"

# ---- pairs, query --queries / --file, delete --ids ------------------------------
gzip -c "$T/sample.jsonl.fp" >"$T/sample.fp.gz"
zstd -q -c "$T/sample.jsonl.fp" >"$T/sample.fp.zst"
run pairs "$T/sample.jsonl.fp"
expect_status 0
cp "$T/out" "$T/pairs.plain"
for z in gz zst; do
    run pairs "$T/sample.fp.$z"
    expect_status 0; expect_err_empty
    same_out "$T/pairs.plain" "pairs sample.fp.$z"
done
size=$(stat -c %s "$T/sample.fp.gz")
head -c $((size / 2)) "$T/sample.fp.gz" >"$T/trunc.fp.gz"
run pairs "$T/trunc.fp.gz"
expect_status 1
expect_err_line pairs "$T/trunc.fp.gz" "gzip data is truncated"

run build "$T/s" "$sample"
expect_status 0
run query "$T/s" --queries "$sample"
expect_status 0
cp "$T/out" "$T/answers.plain"
for q in sample.jsonl.gz sample.jsonl.zst; do
    run query "$T/s" --queries "$T/$q"
    expect_status 0; expect_err_empty
    same_out "$T/answers.plain" "query --queries $q"
done
cp "$T/sample.jsonl.fp" "$T/sample.fp"
run query "$T/s" --queries "$T/sample.fp"
expect_status 0
cp "$T/out" "$T/fp-answers.plain"
run query "$T/s" --queries "$T/sample.fp.zst"
expect_status 0; expect_err_empty
same_out "$T/fp-answers.plain" "query --queries sample.fp.zst"
run_in "$T/sample.jsonl.gz" query "$T/s" --queries - --format jsonl
expect_status 0
same_out "$T/answers.plain" "query --queries - (gzip)"
run query "$T/s" --queries "$T/trunc.jsonl.gz"
expect_status 1
expect_err_line query "$T/trunc.jsonl.gz" "gzip data is truncated"
# --file: one document, compressed.
head -1 "$sample" | sed 's/.*"text": *"\([^"]*\)".*/\1/; s/\\n/\n/g' >"$T/doc.txt"
gzip -c "$T/doc.txt" >"$T/doc.txt.gz"
run query "$T/s" --file "$T/doc.txt"
expect_status 0
cp "$T/out" "$T/file.plain"
[ -s "$T/file.plain" ] && ok || fail "query --file found nothing for the first sample document"
run query "$T/s" --file "$T/doc.txt.gz"
expect_status 0; same_out "$T/file.plain" "query --file doc.txt.gz"
run query "$T/s" --file "$T/fox-trunc.gz"
expect_status 1
expect_err_has "simstore query: $T/fox-trunc.gz:1: gzip data is truncated"

# delete --ids from a compressed list; a broken list deletes nothing.
cut -f2 "$T/sample.jsonl.fp" | head -5 >"$T/ids"
gzip -c "$T/ids" >"$T/ids.gz"
head -c 30 "$T/ids.gz" >"$T/ids-trunc.gz"
run delete "$T/s" --ids "$T/ids-trunc.gz"
expect_status 1
expect_err_line delete "$T/ids-trunc.gz" "gzip data is truncated"
expect_err_has "nothing deleted"
run stats "$T/s"
expect_out_has "documents: 92"
printf 'x\n\ny\0z\n' | gzip >"$T/ids-nul.gz"   # a NUL inside a line is kept (and refused)
run delete "$T/s" --ids "$T/ids-nul.gz"
expect_status 1
expect_err_has "simstore delete: $T/ids-nul.gz:3: not a document id"
run delete "$T/s" --ids "$T/ids.gz"
expect_status 0
expect_out_has "deleted 5 documents"
zstd -q -c "$T/ids" >"$T/ids.zst"
run delete "$T/s" --ids "$T/ids.zst"
expect_status 0
expect_out_has "deleted 0 documents from $T/s (5 not found)"

# ---- build and add from compressed input -----------------------------------------
# (These need the ingest pipeline reading through cli_stream, with the format
# told from the name under a .gz/.zst/.zstd suffix.)
dump_store() { # dump_store STORE: every table file's fingerprints, without the header line
    local f
    for f in "$1"/*.tbl; do
        echo "== $(basename "$f")"
        "$SIMSTORE" dump "$f" | grep -v '^# table '
    done
}
same_store() { # same_store STORE REFERENCE WHAT
    if cmp -s <(dump_store "$1") <(dump_store "$2"); then ok; else
        fail "$3: table files differ from the plain build's"; fi
    "$SIMSTORE" query "$1" --queries "$sample" >"$T/q1" 2>&1
    "$SIMSTORE" query "$2" --queries "$sample" >"$T/q2" 2>&1
    if cmp -s "$T/q1" "$T/q2"; then ok; else fail "$3: query answers differ from the plain build's"; fi
}
run build "$T/ref" "$sample"
expect_status 0
for z in gz zst; do
    run build "$T/b-jsonl-$z" "$T/sample.jsonl.$z"
    expect_status 0; expect_out_has "92 documents"
    same_store "$T/b-jsonl-$z" "$T/ref" "build from sample.jsonl.$z"
done
cp "$T/sample.jsonl.zst" "$T/sample.jsonl.zstd"
run build "$T/b-jsonl-zstd" "$T/sample.jsonl.zstd"
expect_status 0
same_store "$T/b-jsonl-zstd" "$T/ref" "build from sample.jsonl.zstd"
awk -F'\t' '{ print $2 "\t" $1 }' "$T/sample.jsonl.fp" >"$T/sample.tsv"
gzip -c "$T/sample.tsv" >"$T/sample.tsv.gz"
run build "$T/b-tsv" "$T/sample.tsv.gz"
expect_status 0
same_store "$T/b-tsv" "$T/ref" "build from sample.tsv.gz"
run build "$T/b-fp" "$T/sample.fp.zst"
expect_status 0
same_store "$T/b-fp" "$T/ref" "build from sample.fp.zst"
run_in "$T/sample.jsonl.gz" build "$T/b-stdin" --format jsonl -
expect_status 0
same_store "$T/b-stdin" "$T/ref" "build from compressed stdin"
# Fingerprint-only, from hex lines.
cut -f1 "$T/sample.jsonl.fp" >"$T/sample.hex"
gzip -c "$T/sample.hex" >"$T/sample.hex.gz"
run build "$T/h-ref" --fingerprint-only "$T/sample.hex"
expect_status 0
run build "$T/h-gz" --fingerprint-only "$T/sample.hex.gz"
expect_status 0
if cmp -s <(dump_store "$T/h-gz") <(dump_store "$T/h-ref"); then ok; else
    fail "build --fingerprint-only from sample.hex.gz: table files differ"; fi
# A truncated input: FILE:LINE, and no store.
run build "$T/b-trunc" "$T/trunc.jsonl.gz"
expect_status 1
expect_err_line build "$T/trunc.jsonl.gz" "gzip data is truncated"
[ ! -e "$T/b-trunc" ] && ok || fail "a failed build left $T/b-trunc"
run build "$T/b-trunc-zst" "$T/bad.jsonl.zst"
expect_status 1
expect_err_line build "$T/bad.jsonl.zst" "zstd data is corrupt: "
[ ! -e "$T/b-trunc-zst" ] && ok || fail "a failed build left $T/b-trunc-zst"
# add: from a compressed file; a broken one changes nothing.
head -30 "$T/big.jsonl" >"$T/more.jsonl"
zstd -q -c "$T/more.jsonl" >"$T/more.jsonl.zst"
run add "$T/b-tsv" "$T/more.jsonl.zst"
expect_status 0
expect_out_has "added 30 documents"
dump_store "$T/b-tsv" >"$T/before.dump"
"$SIMSTORE" stats "$T/b-tsv" >"$T/before.stats"
run add "$T/b-tsv" "$T/trunc.jsonl.gz"
expect_status 1
expect_err_line add "$T/trunc.jsonl.gz" "gzip data is truncated"
dump_store "$T/b-tsv" | cmp -s - "$T/before.dump" && ok || fail "a failed add changed the table files"
"$SIMSTORE" stats "$T/b-tsv" | cmp -s - "$T/before.stats" && ok || fail "a failed add changed the stats"

finish
