#!/usr/bin/env bash
# dump.sh: `simstore dump`: the fingerprints of a table file, permuted and
# original, block by block; --block, --range; a damaged block reported with
# its number and byte offset; usage errors.
. "$(dirname "$0")/lib.sh"

flip() { python3 -c 'import sys; p=sys.argv[1]; o=int(sys.argv[2]); d=bytearray(open(p,"rb").read()); d[o]^=0x40; open(p,"wb").write(d)' "$1" "$2"; }
printf 'a\t0123456789abcdef\nb\t0123456789abcdee\nc\tfedcba9876543210\nd\t1111111111111111\ne\t2222222222222222\nf\t8000000000000000\ng\t00000000000000ff\nh\t7fffffffffffffff\ni\t0f0f0f0f0f0f0f0f\nj\t1111111111111111\n' >"$T/small.tsv"
run build "$T/s" "$T/small.tsv"
expect_status 0
cut -f2 "$T/small.tsv" | LC_ALL=C sort -u >"$T/want"

run dump --help
expect_status 0
expect_out_has "Usage: simstore dump FILE [--block N] [--range LO HI]"
run dump
expect_status 2
run dump "$T/s"
expect_status 1
expect_err_has "is a store directory"
# Another directory is not called a store (reliability trial, defect 15).
mkdir -p "$T/plain"
run dump "$T/plain"
expect_status 1
expect_err_has "is a directory, not a table file"
run dump "$T/s/s0000000001-t000.tbl" --range 0000000000000000
expect_status 2
run dump "$T/s/s0000000001-t000.tbl" --range zz 0000000000000001
expect_status 2
run dump "$T/s/s0000000001-t000.tbl" --range 0000000000000010 0000000000000001
expect_status 2

# Table 0 is the identity: both columns equal, in fingerprint order.
run dump "$T/s/s0000000001-t000.tbl"
expect_status 0; expect_err_empty
expect_out_has "# table $T/s/s0000000001-t000.tbl: 9 fingerprints in 1 block of 512 bytes; table 0"
expect_out_has "# permutation: prefix bits 63..48 (16), then 47..0 (identity)"
expect_out_has "# block 0 at byte offset 512: 9 fingerprints, first 00000000000000ff, key fedcba9876543210"
grep -v '^#' "$T/out" >"$T/rows"
[ "$(wc -l <"$T/rows")" = 9 ] && ok || fail "expected 9 rows"
awk -F'\t' '$1 != $2' "$T/rows" | grep -q . && fail "table 0 rows differ between columns" || ok
cut -f2 "$T/rows" | cmp -s - "$T/want" && ok || fail "table 0 does not hold the distinct fingerprints in order"

# Table 1 permutes: the original column is still the set.
run dump "$T/s/s0000000001-t001.tbl"
expect_status 0
expect_out_has "4567012389abcdef	0123456789abcdef"
grep -v '^#' "$T/out" | cut -f1 | LC_ALL=C sort -c && ok || fail "table 1's permuted column is not sorted"
grep -v '^#' "$T/out" | cut -f2 | LC_ALL=C sort | cmp -s - "$T/want" && ok || fail "table 1 holds another set"

run dump "$T/s/s0000000001-t001.tbl" --range 1000000000000000 4567012389abcdee
expect_status 0
grep -v '^#' "$T/out" >"$T/rows"
expect_out_has "1111111111111111	1111111111111111"
expect_out_has "4567012389abcdee	0123456789abcdee"
[ "$(wc -l <"$T/rows")" = 3 ] && ok || fail "--range: expected 3 rows, got $(wc -l <"$T/rows")"
run dump "$T/s/s0000000001-t001.tbl" --block 0
expect_status 0
expect_out_has "# block 0 at byte offset 512"
run dump "$T/s/s0000000001-t001.tbl" --block 1
expect_status 1
expect_err_has "no block 1 (the table has 1 block)"

# Many blocks: boundaries, and --block picks one.
awk 'BEGIN { srand(3); for (i = 0; i < 2000; i++) printf "id%d\t%08x%08x\n", i, int(rand() * 4294967296), int(rand() * 4294967296) }' >"$T/many.tsv"
run build "$T/m" --block-bytes 256 "$T/many.tsv"
expect_status 0
run dump "$T/m/s0000000001-t003.tbl"
expect_status 0
blocks=$(grep -c '^# block ' "$T/out")
[ "$blocks" -gt 10 ] && ok || fail "expected many blocks, got $blocks"
[ "$(grep -vc '^#' "$T/out")" = 2000 ] && ok || fail "expected 2000 rows"
run dump "$T/m/s0000000001-t003.tbl" --block 5
expect_status 0
expect_out_has "# block 5 at byte offset $((256 + 5 * 256)):"
[ "$(grep -c '^# block ' "$T/out")" = 1 ] && ok || fail "--block printed more than one block"

# A damaged block: reported after the blocks before it. Its checksum covers
# its 4 KiB page (table format 2): 256-byte block 20 is in page 1 with blocks
# 15..30, so the error comes at block 15, the first of them.
flip "$T/m/s0000000001-t003.tbl" $((256 + 20 * 256 + 17))
run dump "$T/m/s0000000001-t003.tbl"
expect_status 1
expect_out_has "# block 14 at byte offset 3840"
expect_err_has "block 15 (byte offset 4096): block checksum mismatch: group 1 (blocks 15..30"
finish
