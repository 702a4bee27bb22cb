#!/usr/bin/env bash
# inputs.sh: the inputs simstore-mpi build cannot split at byte offsets,
# under mpirun -np 2 and 3: gzip and zstd files (each read whole by one
# rank; one told gzip by its magic bytes alone), standard input (rank 0's)
# and raw .u64 values (split at 8-byte boundaries), mixed with plain files in
# one build. The sharded store answers `simstore query`, `simstore pairs` and
# `simstore clusters --keep first` byte for byte as `simstore build --shards R`
# of the same inputs does (the same documents and insertion numbers), and as
# one store does; a corrupt .gz and a .u64 of odd length fail naming the file
# and publish nothing.
# Usage: inputs.sh SIMSTORE SIMSTORE_MPI MPIEXEC
. "$(dirname "$0")/lib.sh"

python3 - "$T" <<'PY'
import random, struct, sys
t = sys.argv[1]
r = random.Random(5)
# Many small groups of near fingerprints, each spread over the files: the
# document a cluster keeps (--keep first: the first in input order) tells
# a numbering out of input order apart.
centres = [r.getrandbits(64) for _ in range(700)]
def near(c):
    for _ in range(r.randrange(4)):
        c ^= 1 << r.randrange(64)
    return c
for name, n in (("a", 1500), ("b", 1200), ("c", 900), ("d", 700), ("e", 600)):
    with open(f"{t}/{name}.tsv", "w") as f:
        for i in range(n):
            f.write(f"{name}{i}\t{near(r.choice(centres)):016x}\n")
with open(f"{t}/q.tsv", "w") as f:
    for i in range(200):
        f.write(f"q{i}\t{near(r.choice(centres)):016x}\n")
for name, n in (("f", 3000), ("g", 1000), ("h", 500)):
    with open(f"{t}/{name}.u64", "wb") as f:
        for i in range(n):
            f.write(struct.pack("<Q", near(r.choice(centres))))
with open(f"{t}/i.hex", "w") as f:
    for i in range(400):
        f.write(f"{near(r.choice(centres)):016x}\n")
PY
gzip -c "$T/b.tsv" >"$T/b.tsv.gz"
zstd -q -c "$T/c.tsv" >"$T/c.tsv.zst"
gzip -c "$T/d.tsv" >"$T/dz.tsv" # gzip, though the name does not say so
zstd -q -c "$T/g.u64" >"$T/g.u64.zst"
gzip -c "$SAMPLE" >"$T/sample.jsonl.gz"

# same NAME NP ONE M [REF]: the sharded store M (of NP shards) answers as
# the one store ONE does: `simstore query` of both, and `simstore-mpi pairs`
# and `clusters --keep first` of M (and of REF, the store `simstore build
# --shards NP` made) against `simstore pairs` and `clusters` of ONE, stdout
# byte for byte.
same() {
    local name=$1 np=$2 one=$3 m=$4 ref=${5:-} cmd x y store
    for cmd in "--queries $T/q.tsv" "--json --queries $T/q.tsv"; do
        # shellcheck disable=SC2086
        x=$("$SIMSTORE" query "$one" $cmd 2>&1 | md5sum)
        for store in "$m" $ref; do
            # shellcheck disable=SC2086
            y=$("$SIMSTORE" query "$store" $cmd 2>&1 | md5sum)
            if [ "$x" = "$y" ]; then ok; else fail "$name: query $cmd of $store differs"; fi
        done
    done
    for cmd in "pairs" "clusters --keep first --singletons"; do
        # shellcheck disable=SC2086
        x=$("$SIMSTORE" $cmd "$one" 2>/dev/null | md5sum)
        for store in "$m" $ref; do
            # shellcheck disable=SC2086
            y=$(mpi "$np" $cmd "$store" 2>"$T/err" | md5sum)
            if [ "$x" = "$y" ]; then ok; else fail "$name: '$cmd' of $store differs"; fi
        done
    done
}

"$SIMSTORE" build -q "$T/one" "$T/a.tsv" "$T/b.tsv.gz" "$T/e.tsv" "$T/c.tsv.zst" "$T/dz.tsv" \
    >/dev/null || fail "build one"
"$SIMSTORE" build -q --fingerprint-only "$T/fone" "$T/f.u64" "$T/g.u64.zst" "$T/i.hex" \
    "$T/h.u64" >/dev/null || fail "build fone"
"$SIMSTORE" build -q "$T/sone" "$T/sample.jsonl.gz" >/dev/null || fail "build sone"
"$SIMSTORE" build -q "$T/cone" "$T/b.tsv.gz" "$T/c.tsv.zst" >/dev/null || fail "build cone"
"$SIMSTORE" build -q --fingerprint-only "$T/fsone" "$T/f.u64" "$T/g.u64" "$T/h.u64" \
    >/dev/null || fail "build fsone"
for np in 2 3; do
    "$SIMSTORE" build -q --shards "$np" "$T/ref$np" "$T/a.tsv" "$T/b.tsv.gz" "$T/e.tsv" \
        "$T/c.tsv.zst" "$T/dz.tsv" >/dev/null || fail "build --shards $np"
    # Plain, gzip, standard input (e.tsv), zstd and gzip by magic in one
    # build, in small rounds.
    mpi "$np" build --format tsv --chunk 4K "$T/m$np" "$T/a.tsv" "$T/b.tsv.gz" - \
        "$T/c.tsv.zst" "$T/dz.tsv" <"$T/e.tsv" >"$T/out" 2>"$T/err"
    status=$?
    expect_status 0
    expect_out_has "built $T/m$np: 4900 documents"
    same "np $np: mixed" "$np" "$T/one" "$T/m$np" "$T/ref$np"
    run verify "$T/m$np"
    expect_status 0
    # Only compressed inputs: some ranks read nothing.
    mpi "$np" build --chunk 4K "$T/c$np" "$T/b.tsv.gz" "$T/c.tsv.zst" >"$T/out" 2>"$T/err"
    status=$?
    expect_status 0
    same "np $np: compressed only" "$np" "$T/cone" "$T/c$np"
    # Raw values: split .u64, a zstd one, hex lines.
    "$SIMSTORE" build -q --fingerprint-only --shards "$np" "$T/fref$np" "$T/f.u64" \
        "$T/g.u64.zst" "$T/i.hex" "$T/h.u64" >/dev/null || fail "build --fingerprint-only --shards"
    mpi "$np" build --fingerprint-only --chunk 4K "$T/f$np" "$T/f.u64" "$T/g.u64.zst" "$T/i.hex" \
        "$T/h.u64" >"$T/out" 2>"$T/err"
    status=$?
    expect_status 0
    same "np $np: raw values" "$np" "$T/fone" "$T/f$np" "$T/fref$np"
    run verify "$T/f$np"
    expect_status 0
    # Raw values on standard input.
    mpi "$np" build --fingerprint-only --format u64 "$T/fs$np" "$T/f.u64" - "$T/h.u64" \
        <"$T/g.u64" >"$T/out" 2>"$T/err"
    status=$?
    expect_status 0
    same "np $np: raw values on stdin" "$np" "$T/fsone" "$T/fs$np"
    # JSON Lines texts from a gzip file: fingerprinted and sketched by the
    # rank that reads it.
    mpi "$np" build "$T/s$np" "$T/sample.jsonl.gz" >"$T/out" 2>"$T/err"
    status=$?
    expect_status 0
    a=$("$SIMSTORE" query "$T/sone" --similarity --json --meta --queries "$SAMPLE" | md5sum)
    b=$("$SIMSTORE" query "$T/s$np" --similarity --json --meta --queries "$SAMPLE" | md5sum)
    if [ "$a" = "$b" ]; then ok; else fail "np $np: the gzip sample's answers differ"; fi
done

# --boilerplate auto reads every input twice: standard input (gzip here)
# is copied first, so both passes see all of it, as in `simstore build`.
head -n 50 "$SAMPLE" >"$T/s1.jsonl"
tail -n +51 "$SAMPLE" | gzip -c >"$T/s2.jsonl.gz"
bopts="--boilerplate auto --boilerplate-min-docs 5 --boilerplate-fraction 0.05"
# shellcheck disable=SC2086
"$SIMSTORE" build -q $bopts "$T/bone" "$T/s1.jsonl" "$T/s2.jsonl.gz" >/dev/null ||
    fail "build bone"
# shellcheck disable=SC2086
mpi 2 build $bopts --format jsonl "$T/bm" "$T/s1.jsonl" - <"$T/s2.jsonl.gz" >"$T/out" 2>"$T/err"
status=$?
expect_status 0
a=$("$SIMSTORE" stats "$T/bone" | grep -E '^(documents|boilerplate)')
b=$("$SIMSTORE" stats "$T/bm" | grep -E '^(documents|boilerplate)')
if [ "$a" = "$b" ]; then ok; else fail "boilerplate auto from stdin: stats differ: $b"; fi
a=$("$SIMSTORE" query "$T/bone" --similarity --json --meta --queries "$SAMPLE" | md5sum)
b=$("$SIMSTORE" query "$T/bm" --similarity --json --meta --queries "$SAMPLE" | md5sum)
if [ "$a" = "$b" ]; then ok; else fail "boilerplate auto from stdin: answers differ"; fi

# Standard input needs --format, as `simstore build` says.
mpi 2 build "$T/nf" "$T/a.tsv" - <"$T/e.tsv" >"$T/out" 2>"$T/err"
status=$?
expect_status 2
expect_err_has "<stdin>: cannot tell the format of standard input; use --format"

# A corrupt gzip file: the rank that reads it names it and the line, the
# job fails, nothing is published.
head -c 2000 "$T/b.tsv.gz" >"$T/bad.tsv.gz"
head -c 3000 /dev/urandom >>"$T/bad.tsv.gz"
mpi 3 build "$T/mbad" "$T/a.tsv" "$T/bad.tsv.gz" >"$T/out" 2>"$T/err"
status=$?
expect_status 1
expect_err_has "bad.tsv.gz:"
expect_err_has "gzip data is"
expect_err_has "not published"
if [ -e "$T/mbad/MANIFEST" ]; then fail "a corrupt .gz published a manifest"; else ok; fi

# A .u64 whose length is not a multiple of 8, plain and compressed.
cp "$T/f.u64" "$T/odd.u64"
printf 'abc' >>"$T/odd.u64"
mpi 3 build --fingerprint-only "$T/modd" "$T/h.u64" "$T/odd.u64" >"$T/out" 2>"$T/err"
status=$?
expect_status 1
expect_err_has "odd.u64: length is not a multiple of 8 bytes"
if [ -e "$T/modd/MANIFEST" ]; then fail "an odd .u64 published a manifest"; else ok; fi
zstd -q -c "$T/odd.u64" >"$T/odd.u64.zst"
mpi 2 build --fingerprint-only "$T/moddz" "$T/odd.u64.zst" "$T/h.u64" >"$T/out" 2>"$T/err"
status=$?
expect_status 1
expect_err_has "odd.u64.zst: length is not a multiple of 8 bytes"
if [ -e "$T/moddz/MANIFEST" ]; then fail "an odd .u64.zst published a manifest"; else ok; fi

finish
