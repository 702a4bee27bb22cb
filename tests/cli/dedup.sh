#!/usr/bin/env bash
# dedup.sh: `simstore dedup` against the brute-force reference dedup_ref.py
# (earlier-kept-record rule over `simstore fingerprint --jsonl` output): the
# kept records byte for byte and the --removed lines, on the sample corpus
# and a generated one (planted near-duplicates, odd spacing and key order,
# unknown members, CRLF, blank lines), k = 0, 3, 7, --threads 1, 2, 3; gzip
# and zstd inputs; --store without and with --add (the store afterwards
# answers as one the kept records were added to; a second run keeps
# nothing); bad input (FILE:LINE, exit 1, store unchanged); usage errors.
source "$(dirname "$0")/lib.sh"

REF="python3 $(dirname "$0")/dedup_ref.py"
SAMPLE="$SRC/tests/data/sample.jsonl"
$REF gen 2600 11 >"$T/gen.jsonl"

# check_ref NAME K INPUT STORE_FPS THREADS [OPTIONS...]: dedup == reference.
check_ref() {
    local name=$1 k=$2 input=$3 sfps=$4 threads=$5
    shift 5
    "$SIMSTORE" fingerprint --jsonl "$input" >"$T/fps" 2>/dev/null
    $REF ref "$k" "$input" "$T/fps" "$sfps" "$T/want.out" "$T/want.removed"
    run dedup --k "$k" --threads "$threads" --removed "$T/got.removed" "$@" "$input"
    expect_status 0
    if cmp -s "$T/out" "$T/want.out"; then ok; else fail "$name k=$k threads=$threads: output differs from the reference"; fi
    if cmp -s "$T/got.removed" "$T/want.removed"; then ok; else
        fail "$name k=$k threads=$threads: --removed differs"; diff "$T/got.removed" "$T/want.removed" | head -5 >&2; fi
}

for k in 0 3 7; do
    for threads in 1 2 3; do
        check_ref sample $k "$SAMPLE" - $threads
        check_ref generated $k "$T/gen.jsonl" - $threads
    done
done
# Something was dropped and something kept, at k = 3, or the test proves little.
check_ref generated 3 "$T/gen.jsonl" - 2
kept=$(wc -l <"$T/out"); dropped=$(wc -l <"$T/got.removed")
if [ "$kept" -gt 100 ] && [ "$dropped" -gt 100 ]; then ok; else fail "generated: kept $kept, dropped $dropped"; fi
# Records pass through byte for byte: CRLF, spacing, key order, members.
if grep -q $'\r$' "$T/out"; then ok; else fail "no CRLF record passed through"; fi
if grep -qF '"n": [1, 2.50, {"x": null}] }' "$T/out"; then ok; else fail "odd spacing not kept"; fi

# Compressed inputs give the same output.
gzip -c "$T/gen.jsonl" >"$T/gen.jsonl.gz"
zstd -q -c "$T/gen.jsonl" >"$T/gen.jsonl.zst"
run dedup "$T/gen.jsonl"; cp "$T/out" "$T/plain.out"
for f in gen.jsonl.gz gen.jsonl.zst; do
    run dedup "$T/$f"
    expect_status 0
    if cmp -s "$T/out" "$T/plain.out"; then ok; else fail "$f: output differs from the plain input's"; fi
done
# Standard input, and a last line without a newline (one is added).
printf '{"id": "a", "text": "one two three four"}\n{"id": "b", "text": "five six seven eight nine"}' >"$T/nonl.jsonl"
run_in "$T/nonl.jsonl" dedup -
expect_status 0
expect_out '{"id": "a", "text": "one two three four"}
{"id": "b", "text": "five six seven eight nine"}'
if [ "$(tail -c 1 "$T/out" | od -An -c | tr -d ' ')" = '\n' ]; then ok; else fail "no newline added"; fi

# --store: the first 1200 generated records make a store; the rest are
# deduplicated against it and against each other.
head -n 1200 "$T/gen.jsonl" >"$T/base.jsonl"
tail -n +1201 "$T/gen.jsonl" >"$T/new.jsonl"
"$SIMSTORE" build "$T/store" -q --k 3 "$T/base.jsonl" >/dev/null || fail "build"
"$SIMSTORE" fingerprint --jsonl "$T/base.jsonl" >"$T/store.fps"
for threads in 1 3; do
    check_ref store 3 "$T/new.jsonl" "$T/store.fps" $threads --store "$T/store"
done
check_ref store-k1 1 "$T/new.jsonl" "$T/store.fps" 2 --store "$T/store"
# Above the store's k (3), the store answers as exactly (README,
# "Distances above the store's k").
check_ref store-k5 5 "$T/new.jsonl" "$T/store.fps" 2 --store "$T/store"

# --add: the store afterwards == a copy the kept records were added to.
cp -r "$T/store" "$T/copy"
run dedup --store "$T/store" --add --removed "$T/add.removed" -v "$T/new.jsonl"
expect_status 0
cp "$T/out" "$T/kept.jsonl"
expect_err_has "kept records' index"
"$SIMSTORE" add "$T/copy" -q "$T/kept.jsonl" >/dev/null || fail "add to the copy"
for s in store copy; do
    "$SIMSTORE" stats "$T/$s" | grep -E "^(documents|fingerprints)" >"$T/$s.stats"
    "$SIMSTORE" query "$T/$s" --k 3 --queries "$T/gen.jsonl" >"$T/$s.answers" 2>&1
done
if cmp -s "$T/store.stats" "$T/copy.stats" && [ -s "$T/store.stats" ]; then ok; else fail "--add: stats differ from the add of the kept records"; fi
if cmp -s "$T/store.answers" "$T/copy.answers" && [ -s "$T/store.answers" ]; then ok; else fail "--add: answers differ from the add of the kept records"; fi
# A second identical run keeps nothing: every record is now within 0 of a
# stored document (itself), or its id is stored.
run dedup --store "$T/store" "$T/kept.jsonl"
expect_status 1
expect_err_has "is already in STORE"
if [ ! -s "$T/out" ]; then ok; else fail "a second run kept records"; fi
run dedup --store "$T/store" --removed "$T/again.removed" "$T/new.jsonl" --id-field nosuch --id-from-line
expect_status 0
if [ ! -s "$T/out" ]; then ok; else fail "a second run (other ids) kept records"; fi

# Ties for KEPT_ID: a record R at the same distance from two records S and A
# that are not near each other: the earlier kept one (S) wins; a STORE
# document (S) wins over a kept record (A).
grep -v '^[[:space:]]*$' "$T/gen.jsonl" >"$T/recs.jsonl"
"$SIMSTORE" fingerprint --jsonl "$T/recs.jsonl" >"$T/recs.fps"
read -r ts ta tr < <($REF tie 3 "$T/recs.fps" 1500)
rec_line() { sed -n "$(($1 + 1))p" "$T/recs.jsonl"; }
rec_field() { sed -n "$(($1 + 1))p" "$T/recs.fps" | cut -f"$2"; }
tie_d=$("$SIMSTORE" distance "$(rec_field "$tr" 1)" "$(rec_field "$ts" 1)")
{ rec_line "$ts"; rec_line "$ta"; rec_line "$tr"; } >"$T/tie.jsonl"
run dedup --k 3 --removed "$T/tie.removed" "$T/tie.jsonl"
if [ "$(cat "$T/tie.removed")" = "$(rec_field "$tr" 2)	$(rec_field "$ts" 2)	$tie_d" ]; then ok; else
    fail "tie between kept records: $(cat "$T/tie.removed")"; fi
rec_line "$ts" >"$T/tie_store.jsonl"
"$SIMSTORE" build "$T/tiestore" -q "$T/tie_store.jsonl" >/dev/null || fail "build tiestore"
{ rec_line "$ta"; rec_line "$tr"; } >"$T/tie2.jsonl"
run dedup --store "$T/tiestore" --k 3 --removed "$T/tie.removed" "$T/tie2.jsonl"
expect_out "$(rec_line "$ta")"
if [ "$(cat "$T/tie.removed")" = "$(rec_field "$tr" 2)	$(rec_field "$ts" 2)	$tie_d" ]; then ok; else
    fail "tie between STORE and a kept record: $(cat "$T/tie.removed")"; fi

# Bad input: FILE:LINE, exit 1, the record not written, nothing added.
snapshot() { "$SIMSTORE" query "$T/store" --k 3 --queries "$T/gen.jsonl" 2>&1; "$SIMSTORE" stats "$T/store" | grep -E "^(documents|segments)"; }
snapshot >"$T/before"
printf '%s\n' '{"id": "x1", "text": "alpha beta gamma delta epsilon zeta"}' \
    '{"id": "x2", "text": "unterminated' \
    '{"id": "x3", "title": "no text here"}' \
    '{"id": "x1", "text": "eta theta iota kappa lambda mu nu xi omicron"}' \
    '{"id": "d1", "text": "pi rho sigma tau upsilon phi chi psi omega"}' \
    '{"id": "x5", "text": "a fine record about something else entirely"}' >"$T/bad.jsonl"
run dedup --store "$T/store" --add "$T/bad.jsonl"
expect_status 1
expect_err_has "$T/bad.jsonl:2: invalid JSON"
expect_err_has "$T/bad.jsonl:3: missing member \"text\""
expect_err_has "$T/bad.jsonl:4: document id 'x1' was given before"
expect_err_has "$T/bad.jsonl:5: document id 'd1' is already in STORE"
expect_err_has "nothing added to $T/store"
expect_out '{"id": "x1", "text": "alpha beta gamma delta epsilon zeta"}
{"id": "x5", "text": "a fine record about something else entirely"}'
snapshot >"$T/after"
if cmp -s "$T/before" "$T/after"; then ok; else fail "a failed --add changed the store"; fi

# Ids of dropped records: repeated among them, or shared with a kept record
# that comes later, across two input files. Found at the end of the run
# (after the kept records were written): FILE:LINE, exit 1, nothing added.
printf '%s\n' '{"id": "k1", "text": "one two three four five six seven eight nine ten"}' \
    '{"id": "r1", "text": "one two three four five six seven eight nine ten"}' \
    '{"id": "r2", "text": "one two three four five six seven eight nine ten"}' >"$T/ids1.jsonl"
printf '%s\n' '{"id": "r1", "text": "one two three four five six seven eight nine ten"}' \
    '{"id": "r2", "text": "a record on another subject altogether, kept in the end"}' \
    '{"id": "k9", "text": "a fine record about something else entirely, kept"}' >"$T/ids2.jsonl"
snapshot >"$T/before"
run dedup --store "$T/store" --add "$T/ids1.jsonl" "$T/ids2.jsonl"
expect_status 1
expect_err_has "$T/ids2.jsonl:1: document id 'r1' was given before (to a dropped record, $T/ids1.jsonl:2)"
expect_err_has "$T/ids1.jsonl:3: document id 'r2' (a dropped record) is also a kept record's"
expect_err_has "nothing added to $T/store"
snapshot >"$T/after"
if cmp -s "$T/before" "$T/after"; then ok; else fail "a failed --add changed the store (ids)"; fi
# Distinct ids: the same input minus the repeats is accepted.
printf '%s\n' '{"id": "r3", "text": "one two three four five six seven eight nine ten"}' >"$T/ids3.jsonl"
run dedup "$T/ids1.jsonl" "$T/ids3.jsonl"
expect_status 0

# Usage errors.
run dedup
expect_status 2
expect_err_has "missing INPUT"
run dedup --add "$T/gen.jsonl"
expect_status 2
expect_err_has "--add needs --store"
run dedup --k 8 "$T/gen.jsonl"
expect_status 2
run dedup --store "$T/store" --add --shingle 2 "$T/gen.jsonl"
expect_status 2
run dedup --help
expect_status 0
expect_out_has "a record is dropped when its"
run dedup "$T/nosuch.jsonl"
expect_status 1

finish
