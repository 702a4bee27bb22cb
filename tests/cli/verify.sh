#!/usr/bin/env bash
# verify.sh: `simstore verify`: a clean store and table file pass (exit 0);
# damage to a block, an index, data.mdb or a missing table fails (exit 1) with
# lines naming the file, block and byte offset; --quick, --json, --quiet,
# leftovers as warnings, usage errors (exit 2).
. "$(dirname "$0")/lib.sh"
# The store here keeps its documents as changes in LMDB (changes_store),
# whose records and pages this script damages (document files:
# docfile_store.sh).

flip() { python3 -c 'import sys; p=sys.argv[1]; o=int(sys.argv[2]); d=bytearray(open(p,"rb").read()); d[o]^=0x40; open(p,"wb").write(d)' "$1" "$2"; }
printf 'a\t0123456789abcdef\nb\t0123456789abcdee\nc\tfedcba9876543210\nd\t1111111111111111\ne\t2222222222222222\nf\t8000000000000000\ng\t00000000000000ff\nh\t7fffffffffffffff\ni\t0f0f0f0f0f0f0f0f\nj\t1111111111111111\n' >"$T/small.tsv"
changes_store "$T/s" "$T/small.tsv" || fail "changes_store small"

run verify --help
expect_status 0
expect_out_has "Usage: simstore verify STORE|FILE"
run verify
expect_status 2
run verify "$T/s" --bogus
expect_status 2
expect_err_has "unknown option '--bogus'"
run verify "$T/nothing"
expect_status 1
expect_err_has "no such store or table file"
mkdir "$T/empty"
run verify "$T/empty"
expect_status 1
expect_err_has "not a store (no data.mdb)"

# ---- clean ----------------------------------------------------------------------
run verify "$T/s"
expect_status 0; expect_err_empty
expect_out "verify $T/s: OK: 0 errors, 0 warnings (4 table files, 4 blocks, 36 fingerprints decoded, 10 documents, 10 fps entries, 11 LMDB pages)"
run verify "$T/s" --quick
expect_status 0
expect_out_has "OK: 0 errors, 0 warnings (quick; 4 table files, 0 blocks"
run verify "$T/s/s0000000001-t003.tbl"
expect_status 0
expect_out_has "OK: 0 errors, 0 warnings (1 table file, 1 block, 9 fingerprints decoded)"
run verify "$T/s" --json
expect_status 0
expect_out_lines 1
if python3 -c 'import json,sys; d=json.loads(open(sys.argv[1]).read())["summary"]; assert d["ok"] and d["errors"]==0 and d["documents"]==10 and d["kind"]=="store"' "$T/out"; then ok; else fail "verify --json summary"; fi

# ---- leftovers are warnings ------------------------------------------------------
cp -r "$T/s" "$T/l"
echo x >"$T/l/s0000000007-t000.tbl"
run verify "$T/l"
expect_status 0
expect_out_has "warning: $T/l/s0000000007-t000.tbl: table file of segment 7"
expect_out_has "OK: 0 errors, 1 warning"
run verify "$T/l" --quiet
expect_status 0
expect_out_lines 1

# ---- a damaged block ---------------------------------------------------------------
cp -r "$T/s" "$T/b"
flip "$T/b/s0000000001-t002.tbl" 530
run verify "$T/b"
expect_status 1
expect_out_has "error: table $T/b/s0000000001-t002.tbl: block 0 (byte offset 512): block checksum mismatch"
expect_out_has "verify $T/b: FAILED: 1 error"
run verify "$T/b" --quick
expect_status 0
run verify "$T/b" --json
expect_status 1
expect_out_has '"severity":"error","kind":"block","file":"'"$T/b/s0000000001-t002.tbl"'","block":0,"offset":512'
run verify "$T/b/s0000000001-t002.tbl"
expect_status 1
expect_out_has "block 0 (byte offset 512)"

# ---- a damaged index; a missing table -------------------------------------------------
cp -r "$T/s" "$T/i"
flip "$T/i/s0000000001-t000.tbl" 1030
run verify "$T/i" --quick
expect_status 1
expect_out_has "padding after the group checksums (byte offset 1028) not zero"
cp -r "$T/s" "$T/x"
rm "$T/x/s0000000001-t001.tbl"
run verify "$T/x"
expect_status 1
expect_out_has "error: $T/x/s0000000001-t001.tbl: table file missing"

# ---- data.mdb: a damaged page header ------------------------------------------------
cp -r "$T/s" "$T/m"
flip "$T/m/data.mdb" 4106
run verify "$T/m"
expect_status 1
expect_out_has "error: data.mdb page 1 (byte offset 4106): meta page has flags"
# The tables are still checked, on their own, and pass.
expect_out_has "checking the 1 segment(s) of table files"
expect_out_has "4 table files, 4 blocks"
finish
