#!/usr/bin/env bash
# inspect.sh: `simstore inspect` on a known small store and on one of its
# table files: counts, the design table by table, permutations, code lengths
# and the leading-bit histogram, --json, --brief, sampling, --plot (a PNG by
# gnuplot, or an error and no file), errors naming the file, block and byte
# offset, exit codes.
. "$(dirname "$0")/lib.sh"

# Ten documents, nine distinct fingerprints (j repeats d's): one block per table.
printf 'a\t0123456789abcdef\nb\t0123456789abcdee\nc\tfedcba9876543210\nd\t1111111111111111\ne\t2222222222222222\nf\t8000000000000000\ng\t00000000000000ff\nh\t7fffffffffffffff\ni\t0f0f0f0f0f0f0f0f\nj\t1111111111111111\n' >"$T/small.tsv"
run build "$T/s" "$T/small.tsv"
expect_status 0

run inspect --help
expect_status 0
expect_out_has "Usage: simstore inspect STORE|FILE"
run inspect
expect_status 2
expect_err_has "missing STORE or FILE"
run inspect "$T/s" extra
expect_status 2
run inspect "$T/s" --exact --sample 3
expect_status 2
run inspect "$T/s" --sample 0
expect_status 2
run inspect "$T/nothing"
expect_status 1
expect_err_has "$T/nothing: no such store or table file"

# ---- --plot: a PNG drawn by gnuplot, the text unchanged ------------------------
is_png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }
run inspect "$T/s" --brief
cp "$T/out" "$T/brief.txt"
run inspect "$T/s" --brief --plot "$T/store.png"
expect_status 0
expect_err_empty
cmp -s "$T/out" "$T/brief.txt" && ok || fail "--plot changed what inspect prints"
is_png "$T/store.png" && ok || fail "--plot did not write a PNG"
ls "$T" | grep -q 'store.png.tmp' && fail "--plot left its temporary file" || ok
run inspect "$T/s/$(ls "$T/s" | grep -m1 '\.tbl$')" --json --plot "$T/table.png"
expect_status 0
expect_out_has '"kind":"table"'
is_png "$T/table.png" && ok || fail "--plot of a table file did not write a PNG"
# No gnuplot on PATH: an error naming the package, exit 1, no file.
mkdir -p "$T/nobin"
PATH="$T/nobin" run inspect "$T/s" --plot "$T/none.png"
expect_status 1
expect_err_has "gnuplot is not installed (Debian package gnuplot-nox)"
[ ! -e "$T/none.png" ] && ok || fail "a failed --plot left $T/none.png"
# A gnuplot that fails: its status is the error, and no file is left.
printf '#!/bin/sh\ncat >/dev/null\necho "gnuplot: broken" >&2\nexit 1\n' >"$T/nobin/gnuplot"
chmod +x "$T/nobin/gnuplot"
PATH="$T/nobin:$PATH" run inspect "$T/s" --plot "$T/none.png"
expect_status 1
expect_err_has "gnuplot failed to draw $T/none.png"
[ ! -e "$T/none.png" ] && ok || fail "a failed --plot left $T/none.png"
# An output folder that does not exist.
run inspect "$T/s" --plot "$T/no/such/dir/x.png"
expect_status 1
[ ! -e "$T/no" ] && ok || fail "--plot created folders"
run inspect "$T/s" --plot ""
expect_status 2

# ---- the store --------------------------------------------------------------
run inspect "$T/s"
expect_status 0; expect_err_empty
expect_out_has "store: $T/s"
expect_out_has "kind: documents"
expect_out_has "documents: 10"
expect_out_has "distinct fingerprints: 9 (with documents)"
expect_out_has "segments: 1"
expect_out_has "design: k=3: 1 level (4 blocks choose 1), 4 tables, prefix 16 bits"
expect_out_has "block bytes: 512"
expect_out_has "lmdb bytes: "
expect_out_has "segment 1: 9 fingerprints, created "
expect_out_has "table 0: blocks 0: bits 63..48 (p=16)"
expect_out_has "table 1: blocks 1: bits 47..32 (p=16)"
expect_out_has "table 3: blocks 3: bits 15..0 (p=16)"
expect_out_has "permutation: prefix bits 63..48 (16), then 47..0 (identity)"
expect_out_has "permutation: prefix bits 47..32 (16), then 63..48 31..0"
expect_out_has "blocks: 1 of 512 bytes (at most 9 fingerprints in one)"
expect_out_has "floor 64 - log2 N + 1.443 = 62.27"
expect_out_has "index: 80 bytes, 71.111 bits per fingerprint; in RAM: 25 bytes (24 per index chunk of 256 blocks, 1 per top page"
expect_out_has "leading-bit histogram: exact, 8 differences in 1 of 1 block"
# Table 0 is sorted by the fingerprints themselves: ...abcdee to ...abcdef and
# 7fff... to 8000... are differences of 1 (j = 0), two of the eight; the
# chart's first row is j = 0: count 2, share 25%, a 2-bit code (2^-2 = 25%),
# the longest bar.
grep -q '^         0             2   25.0%          2    25.0%  ########################################$' "$T/out" \
    && ok || fail "table 0's histogram row for j = 0 differs"
[ "$(grep -c 'leading-bit histogram' "$T/out")" = 4 ] && ok || fail "expected 4 histograms"

run inspect "$T/s" --brief
expect_status 0
expect_out_has "table 2: blocks 2: bits 31..16 (p=16)"
if grep -q "histogram" "$T/out"; then fail "--brief printed a histogram"; else ok; fi

run inspect "$T/s" --json
expect_status 0
if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["kind"]=="store" and d["documents"]==10 and d["fingerprints"]==9; t=d["segments"][0]["tables"]; assert len(t)==4 and t[0]["histogram"]["differences"]==8 and sum(t[0]["histogram"]["count"])==8 and len(t[0]["code_lengths"])==64 and t[1]["prefix_bits"]==16 and t[0]["description"]=="blocks 0: bits 63..48 (p=16)"' "$T/out"; then ok; else fail "inspect --json is not the expected JSON"; fi

# ---- one table file ----------------------------------------------------------------
tbl="$T/s/s0000000001-t002.tbl"
run inspect "$tbl"
expect_status 0; expect_err_empty
expect_out_has "table file: $tbl"
expect_out_has "permutation: prefix bits 31..16 (16), then 63..32 15..0"
expect_out_has "fingerprints: 9"
expect_out_has "table index 2"
run inspect "$tbl" --json
expect_status 0
if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["kind"]=="table" and d["table"]["table_index"]==2 and d["table"]["fingerprints"]==9' "$T/out"; then ok; else fail "inspect FILE --json"; fi

# A table of many blocks: sampling.
awk 'BEGIN { srand(7); for (i = 0; i < 3000; i++) printf "id%d\t%08x%08x\n", i, int(rand() * 4294967296), int(rand() * 4294967296) }' >"$T/many.tsv"
run build "$T/m" --block-bytes 256 "$T/many.tsv"
expect_status 0
run inspect "$T/m/s0000000001-t000.tbl" --sample 3
expect_status 0
expect_out_has "leading-bit histogram: sampled"
expect_out_has "in 3 of "
run inspect "$T/m/s0000000001-t000.tbl" --exact
expect_status 0
expect_out_has "leading-bit histogram: exact"

# ---- damage: errors name the file, block and byte offset ---------------------------
flip() { python3 -c 'import sys; p=sys.argv[1]; o=int(sys.argv[2]); d=bytearray(open(p,"rb").read()); d[o]^=0x40; open(p,"wb").write(d)' "$1" "$2"; }
cp -r "$T/s" "$T/d"
flip "$T/d/s0000000001-t001.tbl" 520
run inspect "$T/d"
expect_status 1
expect_err_has "s0000000001-t001.tbl: block 0 (byte offset 512): block checksum mismatch"
run inspect "$T/d" --brief
expect_status 0
flip "$T/d/s0000000001-t001.tbl" 4
run inspect "$T/d/s0000000001-t001.tbl"
expect_status 1
expect_err_has "s0000000001-t001.tbl"
cp -r "$T/s" "$T/e"
flip "$T/e/data.mdb" 4106   # meta page 1's flags
run inspect "$T/e"
expect_status 1
expect_err_has "data.mdb page 1 (byte offset 4106)"
finish
