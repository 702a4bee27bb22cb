#!/usr/bin/env bash
# documents.sh: `get` and `export`: documents by id (found, missing,
# deleted, re-added in a newer segment), every live document in id and
# insertion order, and the export read back by `build` into a store that
# answers the same (queries, pairs, clusters with --keep first).
. "$(dirname "$0")/lib.sh"

S=$T/store
SAMPLE=$SRC/tests/data/sample.jsonl
"$SIMSTORE" build "$S" -q "$SAMPLE" >/dev/null || fail "build the sample"
first_id=$(grep -o '"id": *"[^"]*"' "$SAMPLE" | head -1 | sed 's/.*: *"//;s/"$//')
first_fp=$("$SIMSTORE" fingerprint --jsonl "$SAMPLE" | head -1 | cut -f1)

# get: found and missing, plain and JSON.
run get "$S" "$first_id"
expect_status 0
expect_out "$first_id	$first_fp	1	-"
run get "$S" nosuch "$first_id"
expect_status 1
expect_err_has "no document 'nosuch'"
expect_out "$first_id	$first_fp	1	-"
run get "$S" --json 1002 nosuch
expect_status 1
expect_out '{"id":1002,"fp":"3880583a60b7cc15","segment":1,"meta":{"source":"intranet","tags":["it","security"]}}
{"id":"nosuch","missing":true}'

# Deleted, then added again: missing, then held by the new segment (its
# fingerprint was dead in the first).
printf '%s\n' '{"id": "x1", "text": "one fish two fish red fish blue fish"}' \
    '{"id": "x2", "text": "the quick brown fox jumps over the lazy dog"}' >"$T/x.jsonl"
"$SIMSTORE" build "$T/x" -q "$T/x.jsonl" >/dev/null || fail "build x"
"$SIMSTORE" delete "$T/x" --no-auto-compact x1 >/dev/null || fail "delete"
run get "$T/x" x1 x2
expect_status 1
expect_err_has "no document 'x1'"
head -1 "$T/x.jsonl" >"$T/again.jsonl"
"$SIMSTORE" add "$T/x" --no-auto-compact -q "$T/again.jsonl" >/dev/null || fail "add again"
run get "$T/x" x1 x2
expect_status 0
if [ "$(cut -f1,3 "$T/out")" = "x1	2
x2	1" ]; then ok; else fail "segments after delete and add"; fi

# export: one line per live document, in id order; JSON with metadata.
run export "$S"
expect_status 0
expect_out_lines "$("$SIMSTORE" stats "$S" | sed -n 's/^documents: //p')"
if LC_ALL=C sort -c "$T/out" 2>/dev/null; then ok; else fail "export is not in id order"; fi
run export "$S" --json
expect_status 0
expect_out_has '{"id":1002,"fp":"3880583a60b7cc15","sketch":"'
expect_out_has '"meta":{"source":"intranet","tags":["it","security"]}}'

# Round trip: build reads the JSON export back (fingerprints and sketches);
# the same answers, similarities too. By insertion order, clusters --keep
# first keep the same documents.
"$SIMSTORE" export "$S" --json --order insertion >"$T/export.jsonl" || fail "export"
"$SIMSTORE" build "$T/again" -q "$T/export.jsonl" >/dev/null || fail "build the export"
for cmd in "pairs --k 3" "pairs --k 3 --similarity" "clusters" "clusters --mode star" \
    "clusters --min-similarity 0.5" "export --json"; do
    # shellcheck disable=SC2086
    a=$("$SIMSTORE" $cmd "$S" 2>&1)
    # shellcheck disable=SC2086
    b=$("$SIMSTORE" $cmd "$T/again" 2>&1)
    if [ "$a" = "$b" ]; then ok; else fail "$cmd differs after export and build"; fi
done
"$SIMSTORE" fingerprint --jsonl "$SAMPLE" | cut -f1 >"$T/q.hex"
a=$("$SIMSTORE" query "$S" --k 3 --queries "$T/q.hex" 2>&1)
b=$("$SIMSTORE" query "$T/again" --k 3 --queries "$T/q.hex" 2>&1)
if [ "$a" = "$b" ]; then ok; else fail "queries differ after export and build"; fi
# The TSV export reads back too (without metadata).
"$SIMSTORE" export "$S" >"$T/export.tsv"
"$SIMSTORE" build "$T/tsv" -q "$T/export.tsv" >/dev/null || fail "build the TSV export"
a=$("$SIMSTORE" pairs "$S" --k 3)
b=$("$SIMSTORE" pairs "$T/tsv" --k 3)
if [ "$a" = "$b" ]; then ok; else fail "pairs differ after the TSV export"; fi

# A JSON Lines record with "fp" and no text: stored, queried, fingerprinted
# under that fingerprint; a bad "fp" is FILE:LINE.
printf '%s\n' '{"id": "f1", "fp": "00000000000000ff"}' '{"id": "f2", "fp": "zz"}' >"$T/fp.jsonl"
run build "$T/fpstore" --sketch none "$T/fp.jsonl"
expect_status 1
expect_err_has "fp.jsonl:2: \"fp\" must be a string of 16 hex digits"
# A store keeping sketches needs one with each fingerprint, of its kind.
head -1 "$T/fp.jsonl" >"$T/fp1.jsonl"
run build "$T/fpstore" "$T/fp1.jsonl"
expect_status 1
expect_err_has "fp1.jsonl:1: document 'f1' has no sketch"
printf '%s\n' '{"id": "f1", "fp": "00000000000000ff", "sketch": "00ff"}' >"$T/fp2.jsonl"
run build "$T/fpstore" "$T/fp2.jsonl"
expect_status 1
expect_err_has "fp2.jsonl:1: \"sketch\" has 2 bytes, but this store keeps minhash256 sketches"
run build "$T/fpstore" --sketch none "$T/fp1.jsonl"
expect_status 0
run fingerprint --jsonl "$T/fp.jsonl"
expect_out_has "00000000000000ff	f1"

# A fingerprint-only store exports its fingerprints; get is refused.
"$SIMSTORE" fingerprint --jsonl "$SAMPLE" | cut -f1 | sort -u >"$T/fps.hex"
"$SIMSTORE" build "$T/fponly" -q --fingerprint-only "$T/fps.hex" >/dev/null || fail "fp-only build"
run export "$T/fponly"
expect_status 0
if [ "$(cat "$T/out")" = "$(cat "$T/fps.hex")" ]; then ok; else fail "fp-only export"; fi
run get "$T/fponly" x
expect_status 1
expect_err_has "holds fingerprints only"
run export "$T/fponly" --order insertion
expect_status 1

# stats splits data.mdb by part: the parts add up to the file, records and
# mapping hold the documents, and a delete frees pages LMDB reuses (a store
# whose documents are all changes in LMDB: changes_store); with a document
# file, it holds them and the total counts it.
parts_check() { # FILE: the JSON of stats --json; prints records mapping free
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
parts = d["lmdb_records_bytes"] + d["lmdb_mapping_bytes"] + d["lmdb_other_bytes"] + d["lmdb_free_bytes"]
assert parts <= d["lmdb_bytes"] and d["lmdb_bytes"] - parts < 4096, (parts, d["lmdb_bytes"])
b = d["bytes_per_document"]
total = (d["table_bytes"] + d["lmdb_bytes"] + d["document_file_bytes"]) / d["documents"]
assert abs(b.get("document_file", 0) - d["document_file_bytes"] / d["documents"]) < 1e-3
assert abs(b["total"] - total) < 1e-3 and abs(b["tables"] - d["table_bytes"] / d["documents"]) < 1e-3
print(d["lmdb_records_bytes"], d["lmdb_mapping_bytes"], d["lmdb_free_bytes"])
' "$1"
}
python3 -c '
import random
r = random.Random(7)
for i in range(20000):
    print("{\"id\": \"doc-%06d\", \"fp\": \"%016x\", \"meta\": {\"n\": %d}}" % (i, r.getrandbits(64), i))
' >"$T/many.jsonl"
changes_store "$T/many" "$T/many.jsonl" --sketch none || fail "build many"
run stats --json "$T/many"
expect_status 0
if read -r rec1 map1 free1 < <(parts_check "$T/out") && [ "$rec1" -gt 0 ] && [ "$map1" -gt 0 ]; then ok; else fail "stats parts after build"; fi
run stats "$T/many"
expect_out_has "bytes per document: "
expect_out_has "LMDB records "
seq -f "doc-%06g" 0 2 19999 >"$T/half.ids"
"$SIMSTORE" delete "$T/many" --ids "$T/half.ids" --no-auto-compact >/dev/null || fail "delete half"
run stats --json "$T/many"
if read -r rec2 map2 free2 < <(parts_check "$T/out") && [ "$free2" -gt "$free1" ]; then ok; else fail "stats parts after delete: free $free1 -> ${free2:-?}"; fi
run inspect --json "$T/many"
expect_status 0
if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["bytes_per_document"]["lmdb_records"] > 0' "$T/out"; then ok; else fail "inspect --json: bytes_per_document"; fi
"$SIMSTORE" build "$T/manyd" -q --sketch none "$T/many.jsonl" \
    >/dev/null || fail "build manyd"
run stats --json "$T/manyd"
expect_status 0
if read -r rec3 map3 free3 < <(parts_check "$T/out") && [ "$rec3" = 0 ] && [ "$map3" = 0 ] &&
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["document_file_bytes"] > 0 and d["bytes_per_document"]["total"] < 70' "$T/out"; then
    ok
else
    fail "stats parts of a store with a document file"
fi

# Usage errors.
run get "$S"
expect_status 2
run export
expect_status 2
run export "$S" --order size
expect_status 2
run get --help
expect_status 0
expect_out_has "Usage: simstore get"
run export --help
expect_status 0
expect_out_has "Usage: simstore export"

finish
