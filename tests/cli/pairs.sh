#!/usr/bin/env bash
# pairs.sh: `simstore pairs`: brute-force pairs within k, their order, and
# malformed fingerprint lines.
. "$(dirname "$0")/lib.sh"

cat >"$T/fp.tsv" <<'TSV'
0000000000000000	zeta
0000000000000007	alpha
000000000000000f	beta
ffffffffffffffff	far
0000000000000001	gamma
0000000000000000	delta
TSV
run pairs "$T/fp.tsv"
expect_status 0; expect_err_empty
expect_out "delta	zeta	0
alpha	beta	1
delta	gamma	1
gamma	zeta	1
alpha	gamma	2
alpha	delta	3
alpha	zeta	3
beta	gamma	3"
run pairs --k 0 "$T/fp.tsv"
expect_out "delta	zeta	0"
run pairs --k 64 "$T/fp.tsv"
expect_out_lines 15
expect_out_has "alpha	far	61"
# Standard input, and several files read as one set.
run_in "$T/fp.tsv" pairs --k 1
expect_out_lines 4
printf '0000000000000003\tomega\n' >"$T/more.tsv"
run pairs --k 0 "$T/fp.tsv" "$T/more.tsv"
expect_out "delta	zeta	0"
run pairs --k 1 "$T/more.tsv" - <"$T/fp.tsv"
expect_out_has "alpha	omega	1"
expect_out_has "gamma	omega	1"
# Malformed lines: FILE:LINE, skipped, exit 1; the rest still paired.
cat >"$T/bad.tsv" <<'TSV'
0000000000000000	one
000000000000000	short
not a fingerprint line
0000000000000000	two	extra
0000000000000000	
00000000000000g0	hex
0000000000000001	three
TSV
run pairs "$T/bad.tsv"
expect_status 1
expect_out "one	three	1"
expect_err_has "simstore pairs: $T/bad.tsv:2: bad fingerprint '000000000000000': expected 16 hex digits"
expect_err_has "simstore pairs: $T/bad.tsv:3: expected HEX16<TAB>id, found no tab"
expect_err_has "simstore pairs: $T/bad.tsv:4: more than two tab-separated fields"
expect_err_has "simstore pairs: $T/bad.tsv:5: empty id"
expect_err_has "simstore pairs: $T/bad.tsv:6: bad fingerprint"
run pairs "$T/missing.tsv"
expect_status 1; expect_err_has "simstore pairs: $T/missing.tsv: No such file or directory"
# Usage.
run pairs --help
expect_status 0; expect_out_has "Usage: simstore pairs"
run pairs --k 65 "$T/fp.tsv"
expect_status 2; expect_err_has "--k: '65' is not a distance in 0..64"
run pairs --k x "$T/fp.tsv"
expect_status 2
run pairs --k
expect_status 2; expect_err_has "needs a value"
run pairs --bogus
expect_status 2; expect_err_has "unknown option '--bogus'"
# Fingerprint output feeds pairs directly.
printf 'The same words in the same order.' >"$T/a.txt"
printf 'THE SAME WORDS, in the same order!\n' >"$T/b.txt"
"$SIMSTORE" fingerprint "$T/a.txt" "$T/b.txt" >"$T/ab.fp"
run pairs "$T/ab.fp"
expect_status 0; expect_out "$T/a.txt	$T/b.txt	0"
finish
