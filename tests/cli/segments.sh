#!/usr/bin/env bash
# segments.sh: `simstore add`, `delete` and `compact`: outputs, errors, exit
# codes, all-or-nothing adds, answers before and after each change.
. "$(dirname "$0")/lib.sh"

printf 'a\t0000000000000001\nb\t0000000000000003\n' >"$T/one.tsv"
printf 'c\t0000000000000007\nd\tffffffffffffffff\n' >"$T/two.tsv"
printf '{"id": "e", "text": "the quick brown fox jumps over the lazy dog"}\n' >"$T/three.jsonl"
run build "$T/s" --k 3 "$T/one.tsv"
expect_status 0

run add --help
expect_status 0; expect_out_has "Usage: simstore add"
run add "$T/s" --no-auto-compact "$T/two.tsv"
expect_status 0
expect_out_has "added 2 documents to $T/s (2 new fingerprints); now 4 documents, 4 fingerprints in 2 segments"
run query "$T/s" --fp 0000000000000000
expect_status 0
expect_out "-	a	0000000000000001	1
-	b	0000000000000003	2
-	c	0000000000000007	3"
run add "$T/s" "$T/three.jsonl"
expect_status 0
expect_out_has "added 1 document to"
run query "$T/s" --text "the quick brown fox jumps over the lazy dog" --k 0
expect_status 0
expect_out_has "-	e	"

# Errors add nothing.
run stats "$T/s" --json
cp "$T/out" "$T/stats.before"
run add "$T/s" "$T/one.tsv"
expect_status 1
expect_err_has "$T/one.tsv:1: document id 'a' is already in the store"
printf 'f\t0000000000000010\ng\tzz\n' >"$T/bad.tsv"
run add "$T/s" "$T/bad.tsv"
expect_status 1
expect_err_has "$T/bad.tsv:2:"
expect_err_has "nothing added"
run add "$T/s" --format hex "$T/bad.tsv"
expect_status 1
expect_err_has "bare fingerprints (hex, u64) need a fingerprint-only store"
run add "$T/missing" "$T/one.tsv"
expect_status 1; expect_err_has "no such store"
run add "$T/s"
expect_status 2; expect_err_has "missing INPUT"
run stats "$T/s" --json
cmp -s "$T/out" "$T/stats.before" && ok || fail "failed adds changed the store"

# delete: ids on the command line and from a file; missing ids are warnings.
run delete "$T/s" a nope
expect_status 0
expect_out "deleted 1 document from $T/s (1 not found)"
expect_err_has "warning: no document 'nope'"
run query "$T/s" --fp 0000000000000001 --k 0
expect_status 0; expect_out_lines 0
printf 'b\n\nc\n' >"$T/ids"
run delete "$T/s" --ids "$T/ids" --no-auto-compact
expect_status 0
expect_out "deleted 2 documents from $T/s (0 not found)"
run_in "$T/ids" delete "$T/s" --ids -
expect_status 0
expect_out "deleted 0 documents from $T/s (2 not found)"
run delete "$T/s"
expect_status 2; expect_err_has "give ids to delete"
run delete "$T/s" --ids "$T/ids" x
expect_status 2
run stats "$T/s"
expect_out_has "documents: 2"
expect_out_has "segments: 3"

# compact: one segment, dead fingerprints gone, answers unchanged.
run query "$T/s" --fp ffffffffffffffff
cp "$T/out" "$T/answer.before"
run compact "$T/s"
expect_status 0
expect_out "compacted $T/s: 3 segments -> 1, 3 dead fingerprints dropped"
run query "$T/s" --fp ffffffffffffffff
cmp -s "$T/out" "$T/answer.before" && ok || fail "compaction changed an answer"
run stats "$T/s"
expect_out_has "segments: 1"
expect_out_has "documents: 2"
run compact "$T/s"
expect_status 0
expect_out "compacted $T/s: 1 segment -> 1, 0 dead fingerprints dropped"
ls "$T/s" | grep -c '\.tbl$' | grep -qx 4 && ok || fail "old table files were not removed"

# Fingerprint-only stores take hex adds and refuse deletes.
printf '00000000000000ff\n' >"$T/a.hex"
printf '00000000000000fe\n00000000000000ff\n' >"$T/b.hex"
run build "$T/h" --fingerprint-only "$T/a.hex"
run add "$T/h" "$T/b.hex"
expect_status 0
expect_out_has "added 2 fingerprints to $T/h (1 new fingerprint)"
run delete "$T/h" x
expect_status 1; expect_err_has "fingerprint-only store"

# A second writer is refused while one holds the store.
exec 9>"$T/s/writer.lock"
flock -n 9
run add "$T/s" "$T/two.tsv"
expect_status 1; expect_err_has "another writer holds the store"
run compact "$T/s"
expect_status 1; expect_err_has "another writer holds the store"
run query "$T/s" --fp ffffffffffffffff
expect_status 0; expect_out_has "-	d	ffffffffffffffff	0"
exec 9>&-
finish
