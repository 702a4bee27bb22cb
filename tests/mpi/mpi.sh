#!/usr/bin/env bash
# mpi.sh: simstore-mpi (mpi/) under mpirun with -np 2 and -np 3: a sharded
# build from TSV and JSON Lines inputs (in small all-to-all rounds, so that
# records cross ranks many times) answers `simstore query` and
# `simstore-mpi query` byte for byte as one store built by `simstore build`;
# a bad record fails the job naming the rank and publishes nothing; a rerun
# succeeds; a published store needs --replace.
# Usage: mpi.sh SIMSTORE SIMSTORE_MPI MPIEXEC
. "$(dirname "$0")/lib.sh"

python3 - "$T" <<'PY'
import random, sys
t = sys.argv[1]
r = random.Random(3)
centres = [r.getrandbits(64) for _ in range(60)]
def near(c):
    for _ in range(r.randrange(5)):
        c ^= 1 << r.randrange(64)
    return c
with open(f"{t}/a.tsv", "w") as f:
    for i in range(3000):
        f.write(f"a{i}\t{near(r.choice(centres)):016x}\n")
with open(f"{t}/b.tsv", "w") as f:
    for i in range(2000):
        fp = r.choice(centres) if i % 3 else r.getrandbits(64)
        f.write(f"b{i}\t{fp:016x}\n")
with open(f"{t}/q.tsv", "w") as f:
    for i in range(500):
        f.write(f"q{i}\t{near(r.choice(centres)):016x}\n")
PY

"$SIMSTORE" build -q "$T/one" "$T/a.tsv" "$T/b.tsv" >/dev/null || fail "build one"
"$SIMSTORE" build -q "$T/sample" "$SAMPLE" >/dev/null || fail "build the sample"
for np in 2 3; do
    out=$T/m$np
    mpi "$np" build "$out" --chunk 64K "$T/a.tsv" "$T/b.tsv" >"$T/out" 2>"$T/err"
    status=$?
    expect_status 0
    expect_out_has "built $out: 5000 documents"
    expect_out_has "$np shards"
    for mode in "" "--json" "--k 1"; do
        # shellcheck disable=SC2086
        a=$("$SIMSTORE" query "$T/one" $mode --queries "$T/q.tsv" | md5sum)
        # shellcheck disable=SC2086
        b=$("$SIMSTORE" query "$out" $mode --queries "$T/q.tsv" | md5sum)
        # shellcheck disable=SC2086
        c=$(mpi "$np" query "$out" $mode --batch 100 --queries "$T/q.tsv" 2>"$T/err" | md5sum)
        if [ "$a" = "$b" ]; then ok; else fail "np $np $mode: simstore query differs"; fi
        if [ "$a" = "$c" ]; then ok; else fail "np $np $mode: simstore-mpi query differs"; fi
    done
    run verify "$out"
    expect_status 0
    # JSON Lines texts: fingerprinted and sketched on every rank.
    mpi "$np" build "$T/s$np" --chunk 4K "$SAMPLE" >"$T/out" 2>"$T/err"
    status=$?
    expect_status 0
    a=$("$SIMSTORE" query "$T/sample" --similarity --json --meta --queries "$SAMPLE" | md5sum)
    b=$("$SIMSTORE" query "$T/s$np" --similarity --json --meta --queries "$SAMPLE" | md5sum)
    if [ "$a" = "$b" ]; then ok; else fail "np $np: the sample's answers differ"; fi
    a=$("$SIMSTORE" query "$T/sample" --json --meta --queries "$SAMPLE" | md5sum)
    c=$(mpi "$np" query "$T/s$np" --json --meta --queries "$SAMPLE" 2>"$T/err" | md5sum)
    if [ "$a" = "$c" ]; then ok; else fail "np $np: simstore-mpi query of texts differs"; fi
done

# Text options as `simstore build` takes them: the same store.
"$SIMSTORE" build -q --shingle 2 --weights log --sketch minhash32 "$T/opts" "$SAMPLE" >/dev/null ||
    fail "build with text options"
mpi 3 build "$T/mopts" --shingle 2 --weights log --sketch minhash32 "$SAMPLE" >"$T/out" 2>"$T/err"
status=$?
expect_status 0
a=$("$SIMSTORE" query "$T/opts" --similarity --queries "$SAMPLE" | md5sum)
b=$("$SIMSTORE" query "$T/mopts" --similarity --queries "$SAMPLE" | md5sum)
if [ "$a" = "$b" ]; then ok; else fail "text options: the answers differ"; fi
a=$("$SIMSTORE" stats "$T/opts" | grep '^text options')
b=$("$SIMSTORE" stats "$T/mopts" | grep '^text options')
if [ "$a" = "$b" ]; then ok; else fail "text options differ: $b"; fi

# The wrong number of ranks for a store.
mpi 2 query "$T/m3" --queries "$T/q.tsv" >"$T/out" 2>"$T/err"
status=$?
expect_status 1
expect_err_has "has 3 shards: run it with -np 3"

# A bad record on one rank: the job fails naming the rank, nothing is
# published; fixed, a rerun succeeds without --replace.
cp "$T/b.tsv" "$T/bad.tsv"
echo "broken line without a tab" >>"$T/bad.tsv"
mpi 3 build "$T/mb" "$T/a.tsv" "$T/bad.tsv" >"$T/out" 2>"$T/err"
status=$?
expect_status 1
expect_err_has "building failed on rank 2"
expect_err_has "bad.tsv:2001"
if [ -e "$T/mb/MANIFEST" ]; then fail "a failed build published a manifest"; else ok; fi
run query "$T/mb" --fp 0000000000000000
expect_status 1
mpi 3 build "$T/mb" "$T/a.tsv" "$T/b.tsv" >"$T/out" 2>"$T/err"
status=$?
expect_status 0
mpi 3 build "$T/mb" "$T/a.tsv" "$T/b.tsv" >"$T/out" 2>"$T/err"
status=$?
expect_status 1
expect_err_has "already exists; use --replace"
mpi 2 build --replace "$T/mb" "$T/a.tsv" "$T/b.tsv" >"$T/out" 2>"$T/err"
status=$?
expect_status 0
a=$("$SIMSTORE" query "$T/one" --queries "$T/q.tsv" | md5sum)
b=$("$SIMSTORE" query "$T/mb" --queries "$T/q.tsv" | md5sum)
if [ "$a" = "$b" ]; then ok; else fail "after --replace with 2 ranks: answers differ"; fi

# A rank that dies (rank 1 crashes at its first rename, as a power cut
# would: SIMSTORE_FAULT): the job exits non-zero, mpirun naming the
# process, and nothing is published; a rerun succeeds.
timeout 300 "$MPIEXEC" --allow-run-as-root --oversubscribe -np 1 "$MPI_BIN" build "$T/mc" \
    "$T/a.tsv" : -np 1 env SIMSTORE_FAULT=rename:1:crash "$MPI_BIN" build "$T/mc" "$T/a.tsv" \
    : -np 1 "$MPI_BIN" build "$T/mc" "$T/a.tsv" >"$T/out" 2>"$T/err"
status=$?
if [ "$status" != 0 ]; then ok; else fail "a crashed rank: exit 0"; fi
if [ -e "$T/mc/MANIFEST" ]; then fail "a crashed rank: a manifest was published"; else ok; fi
run query "$T/mc" --fp 0000000000000000
expect_status 1
mpi 3 build "$T/mc" "$T/a.tsv" >"$T/out" 2>"$T/err"
status=$?
expect_status 0
"$SIMSTORE" build -q "$T/aone" "$T/a.tsv" >/dev/null || fail "build a.tsv"
a=$("$SIMSTORE" query "$T/aone" --queries "$T/q.tsv" | md5sum)
b=$("$SIMSTORE" query "$T/mc" --queries "$T/q.tsv" | md5sum)
if [ "$a" = "$b" ]; then ok; else fail "the rerun after a crashed rank answers otherwise"; fi

finish
