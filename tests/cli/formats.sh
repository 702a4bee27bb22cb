#!/usr/bin/env bash
# formats.sh: a store or table file of a format this simstore does not know
# (an unknown incompatible feature, a table version from a pre-release
# build) is refused with a message naming it and a non-zero exit, never
# reported as corrupt (format/store.md, "Versions and features").
. "$(dirname "$0")/lib.sh"
command -v mdb_load >/dev/null || { echo "formats.sh: mdb_load (lmdb-utils) is needed" >&2; exit 1; }

sample="$SRC/tests/data/sample.jsonl"
run build "$T/s" "$sample"
expect_status 0
run query "$T/s" --fp 0123456789abcdef
expect_status 0

# The store record of format/golden/store-record-incompatible-4.bin: incompatible
# feature bit 2 set (and another store's tag: the features are refused
# before anything else is compared).
cp -r "$T/s" "$T/incompat"
{
    printf 'VERSION=3\nformat=bytevalue\ntype=btree\nHEADER=END\n'
    printf ' %s\n' "$(printf store | od -An -tx1 | tr -d ' \n')"
    printf ' %s\n' "$(od -An -tx1 -v "$SRC/format/golden/store-record-incompatible-4.bin" | tr -d ' \n')"
    printf 'DATA=END\n'
} | mdb_load -s meta "$T/incompat" || fail "mdb_load"
for cmd in query stats verify; do
    if [ "$cmd" = query ]; then run query "$T/incompat" --fp 0123456789abcdef; else run "$cmd" "$T/incompat"; fi
    [ "$status" != 0 ] && ok || fail "$cmd of a store with an unknown incompatible feature succeeded"
    # verify reports its findings on stdout, the others on stderr.
    cat "$T/out" "$T/err" >"$T/both"
    grep -qF "incompatible features 0x4 unknown to this simstore" "$T/both" && ok || fail "$cmd: no message"
    grep -qF "written by a newer version" "$T/both" && ok || fail "$cmd: no reason"
    if grep -qi "corrupt" "$T/both"; then fail "$cmd called an unknown feature corrupt"; else ok; fi
done
run query "$T/incompat" --fp 0123456789abcdef
expect_err_has "store $T/incompat: incompatible features 0x4"

# A table file whose header says format version 2 (format/golden's
# table-err-version-2.tbl, checksums repaired): refused naming the file.
cp -r "$T/s" "$T/table2"
table=$(ls "$T/table2"/*.tbl | head -n 1)
cp "$SRC/format/golden/table-err-version-2.tbl" "$table"
run query "$T/table2" --fp 0123456789abcdef
[ "$status" != 0 ] && ok || fail "query over a version-2 table succeeded"
expect_err_has "$table"
expect_err_has "table format version 2 unknown to this simstore"
expect_err_has "rebuild the store"
finish
