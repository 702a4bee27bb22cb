#!/usr/bin/env bash
# scan.sh: simstore-mpi pairs and clusters under mpirun with -np 1, 2 and
# 3 print byte for byte what `simstore pairs` and `simstore clusters` print
# for one (unsharded) store built from the same input: random, duplicate-
# heavy (fingerprints shared by many documents across shards) and chained
# (long components) fingerprints, and neighbours near each other, with
# string and integer ids and metadata for the keep rules, components and
# stars, and texts with sketches for the similarities and the graph over documents, and
# for the near-duplicate rule's band candidates beyond k. The keep
# rule `first` (the default) is compared on the stores of simstore-mpi
# build and of `simstore build --shards R`: both number each document by
# its position in the whole input, as the one store does. Duplicate ids
# (which build refuses) are reported naming the copy first in the input,
# whichever rank read it. Options not supported yet exit 2 saying so; a
# rank that cannot read its shard fails the job naming the rank.
# Usage: scan.sh SIMSTORE SIMSTORE_MPI MPIEXEC
. "$(dirname "$0")/lib.sh"

python3 - "$T" <<'PY'
import json, random, sys
t = sys.argv[1]
r = random.Random(16)
def near(c, flips):
    for _ in range(flips):
        c ^= 1 << r.randrange(64)
    return c
def record(f, i, fp):
    rec = {"id": i if i % 5 == 0 else f"d{i}", "fp": f"{fp:016x}"}
    if i % 4:
        rec["meta"] = {"n": r.randrange(20)}
    f.write(json.dumps(rec) + "\n")
with open(f"{t}/random.jsonl", "w") as f:
    fps = []
    for i in range(1500):
        fp = near(r.choice(fps), r.randrange(1, 5)) if fps and i % 10 == 0 else r.getrandbits(64)
        fps.append(fp)
        record(f, i, fp)
with open(f"{t}/dups.jsonl", "w") as f:
    centres = [r.getrandbits(64) for _ in range(25)]
    for i in range(900):
        record(f, i, near(r.choice(centres), r.randrange(2) * r.randrange(3)))
with open(f"{t}/chains.jsonl", "w") as f:
    i = 0
    for _ in range(12):
        x = r.getrandbits(64)
        for _ in range(60):
            x = near(x, r.randrange(1, 3))
            record(f, i, x)
            i += 1
# Near pairs of neighbours in the input: which of the two is first in the
# whole input is not which is first in its shard (keep first tells).
with open(f"{t}/twos.jsonl", "w") as f:
    for k in range(300):
        x = r.getrandbits(64)
        record(f, 2 * k, x)
        record(f, 2 * k + 1, near(x, 1))
PY

# Sampled (the sanitizer pass): two ranks and three for dups (whose stores
# the checks further down read), one of the two for each other set (one rank
# is in the fingerprint-only runs).
for input in random dups chains twos; do
    nps="1 2 3"
    if sampled; then
        case $input in random | twos) nps=2 ;; chains) nps=3 ;; dups) nps="2 3" ;; esac
    fi
    "$SIMSTORE" build -q --sketch none "$T/$input" "$T/$input.jsonl" >/dev/null ||
        fail "build $input"
    for np in $nps; do
        out=$T/$input-m$np
        mpi "$np" build -q --sketch none --chunk 4K "$out" "$T/$input.jsonl" >"$T/out" 2>"$T/err"
        status=$?
        expect_status 0
        for mode in "--json" "--by-fingerprint --k 1"; do
            # shellcheck disable=SC2086
            a=$("$SIMSTORE" pairs "$T/$input" $mode | md5sum)
            # shellcheck disable=SC2086
            b=$(mpi "$np" pairs "$out" $mode --chunk 1K 2>"$T/err" | md5sum)
            if [ "$a" = "$b" ]; then ok; else fail "$input np $np: pairs $mode differs"; fi
        done
        "$SIMSTORE" build -q --sketch none --shards "$np" "$T/$input-s$np" \
            "$T/$input.jsonl" >/dev/null || fail "build $input --shards $np"
        for mode in "--keep min-meta n --singletons" \
            "--keep max-meta n --json --k 2 --similarity --mode star"; do
            # shellcheck disable=SC2086
            a=$("$SIMSTORE" clusters "$T/$input" $mode 2>"$T/err1" | md5sum)
            # shellcheck disable=SC2086
            b=$(mpi "$np" clusters "$out" $mode --chunk 1K 2>"$T/err2" | md5sum)
            if [ "$a" = "$b" ]; then ok; else fail "$input np $np: clusters $mode differs"; fi
            if grep -q '^clusters: ' "$T/err1" && cmp -s "$T/err1" "$T/err2"; then
                ok
            else
                fail "$input np $np: clusters $mode: the summaries differ: $(cat "$T/err2")"
            fi
        done
        # Keep first, the default: by insertion number, on the store of
        # simstore-mpi build and on that of build --shards.
        for mode in "--singletons" "--keep first --k 2 --mode star --json"; do
            # shellcheck disable=SC2086
            a=$("$SIMSTORE" clusters "$T/$input" $mode 2>"$T/err1" | md5sum)
            for store in "$out" "$T/$input-s$np"; do
                # shellcheck disable=SC2086
                b=$(mpi "$np" clusters "$store" $mode --chunk 1K 2>"$T/err2" | md5sum)
                if [ "$a" = "$b" ] && cmp -s "$T/err1" "$T/err2"; then
                    ok
                else
                    fail "$input np $np: clusters $mode of $store differs: $(cat "$T/err2")"
                fi
            done
        done
    done
    # Something to compare: pairs and clusters are not empty.
    if [ "$("$SIMSTORE" pairs "$T/$input" | wc -l)" -gt 20 ]; then ok; else fail "$input: few pairs"; fi
done

# Texts with sketches: similarities, and pairs above a minimum; with no
# --k nor --min-similarity, the near-duplicate setting (k 7, 0.9), as the
# one store's; --k alone a distance alone; by fingerprint no similarity.
"$SIMSTORE" build -q "$T/sample" "$SAMPLE" >/dev/null || fail "build the sample"
for np in 2 3; do
    mpi "$np" build -q "$T/sample-m$np" "$SAMPLE" >"$T/out" 2>"$T/err"
    status=$?
    expect_status 0
    for mode in "--similarity" "--json --similarity --min-similarity 0.3" "--k 3 --similarity" \
        "--by-fingerprint"; do
        # shellcheck disable=SC2086
        a=$("$SIMSTORE" pairs "$T/sample" $mode | md5sum)
        # shellcheck disable=SC2086
        b=$(mpi "$np" pairs "$T/sample-m$np" $mode 2>"$T/err" | md5sum)
        if [ "$a" = "$b" ]; then ok; else fail "sample np $np: pairs $mode differs"; fi
    done
    for mode in "--singletons --similarity" "--min-similarity 0.3 --similarity" \
        "--mode star --min-similarity 0.25 --json" "--similarity" "--k 2 --json"; do
        # shellcheck disable=SC2086
        a=$("$SIMSTORE" clusters "$T/sample" --keep min-id $mode 2>/dev/null | md5sum)
        # shellcheck disable=SC2086
        b=$(mpi "$np" clusters "$T/sample-m$np" --keep min-id $mode 2>"$T/err" | md5sum)
        if [ "$a" = "$b" ]; then ok; else fail "sample np $np: clusters $mode differs"; fi
    done
done

# Band candidates (format/sketch.md 6.2): with a minimum similarity of 0.5
# or more (the default 0.9 included), documents whose sketches share a band
# are candidates at any distance; the ranks find them as the one store does.
# Texts edited from random bases (a few light edits, or up to a sixth of
# the words), some copied whole under another id (a fingerprint of two
# documents): pairs beyond k = 7 occur at the defaults and at 0.5 to 0.8.
# bands-big: enough documents that a rank's bands at 0.5 take two passes
# within --memory 16M.
python3 - "$T" <<'PY'
import json, random, sys
t = sys.argv[1]
r = random.Random(36)
words = [f"w{i}" for i in range(3000)]
def corpus(path, bases):
    with open(path, "w") as f:
        n = 0
        for base in range(bases):
            text = [r.choice(words) for _ in range(r.randrange(60, 200))]
            f.write(json.dumps({"id": f"b{base}", "text": " ".join(text)}) + "\n")
            for v in range(5):
                e = list(text)
                for _ in range(r.randrange(1, 2 + len(e) // (40 if v < 2 else 6))):
                    e[r.randrange(len(e))] = r.choice(words)
                rid = n if n % 3 == 0 else f"v{base}-{v}"
                n += 1
                f.write(json.dumps({"id": rid, "text": " ".join(e)}) + "\n")
                if v == 4 and base % 4 == 0:
                    f.write(json.dumps({"id": f"c{base}", "text": " ".join(e)}) + "\n")
corpus(f"{t}/bands.jsonl", 30)
corpus(f"{t}/bands-big.jsonl", 200)
PY
"$SIMSTORE" build -q "$T/bands" "$T/bands.jsonl" >/dev/null || fail "build bands"
for np in 1 2 3; do
    sampled && [ "$np" = 1 ] && continue
    mpi "$np" build -q "$T/bands-m$np" "$T/bands.jsonl" >"$T/out" 2>"$T/err"
    status=$?
    expect_status 0
    rules=("" "--min-similarity 0.5" "--min-similarity 0.7" "--min-similarity 0.8"
        "--min-similarity 0.95")
    [ "$np" = 1 ] && rules=("") # one rank: the defaults alone
    # Sampled (the sanitizer pass): the defaults and 0.8.
    sampled && rules=("" "--min-similarity 0.8")
    for ms in "${rules[@]}"; do
        # shellcheck disable=SC2086
        "$SIMSTORE" pairs "$T/bands" $ms --similarity >"$T/pairs1"
        # shellcheck disable=SC2086
        mpi "$np" pairs "$T/bands-m$np" $ms --similarity --chunk 1K >"$T/pairs2" 2>"$T/err"
        if cmp -s "$T/pairs1" "$T/pairs2"; then ok; else fail "bands np $np: pairs $ms differs"; fi
        if [ "$ms" != "--min-similarity 0.95" ]; then
            if [ "$(awk -F'\t' '$3 > 7' "$T/pairs2" | wc -l)" -gt 0 ]; then ok; else
                fail "bands np $np: pairs $ms: no pair beyond k to compare"; fi
        fi
        # shellcheck disable=SC2086
        a=$("$SIMSTORE" clusters "$T/bands" $ms --similarity 2>"$T/err1" | md5sum)
        # shellcheck disable=SC2086
        b=$(mpi "$np" clusters "$T/bands-m$np" $ms --similarity --chunk 1K 2>"$T/err2" | md5sum)
        if [ "$a" = "$b" ] && cmp -s "$T/err1" "$T/err2"; then
            ok
        else
            fail "bands np $np: clusters $ms differs: $(cat "$T/err2")"
        fi
    done
done
"$SIMSTORE" build -q "$T/bands-big" "$T/bands-big.jsonl" >/dev/null || fail "build bands-big"
mpi 2 build -q "$T/bands-big-m2" "$T/bands-big.jsonl" >"$T/out" 2>"$T/err"
status=$?
expect_status 0
for cmd in pairs clusters; do
    a=$("$SIMSTORE" "$cmd" "$T/bands-big" --min-similarity 0.5 --json 2>"$T/err1" | md5sum)
    b=$(mpi 2 "$cmd" "$T/bands-big-m2" --min-similarity 0.5 --json --memory 16M --progress \
        2>"$T/err" | md5sum)
    if [ "$a" = "$b" ]; then ok; else fail "bands-big np 2: $cmd differs"; fi
    expect_err_has "simstore-mpi $cmd: bands: 144 of 144 done (12 bits each)"
    if [ "$(grep -c "bands: [0-9]* of 144 done" "$T/err")" -ge 2 ]; then ok; else
        fail "bands-big np 2: $cmd: the bands in one pass"; fi
done

# Fingerprint-only stores (of simstore-mpi build --fingerprint-only and of
# build --fingerprint-only --shards R): the documents are the fingerprints.
python3 -c '
import json, sys
for line in open(sys.argv[1]):
    print(json.loads(line)["fp"])
' "$T/chains.jsonl" >"$T/chains.hex"
cat "$T/chains.hex" "$T/chains.hex" | head -800 >"$T/fps.hex"
"$SIMSTORE" build -q --fingerprint-only "$T/fps" "$T/fps.hex" >/dev/null || fail "build fps"
for np in 1 2 3; do
    mpi "$np" build -q --fingerprint-only --chunk 1K "$T/fps-m$np" "$T/fps.hex" >"$T/out" 2>"$T/err"
    status=$?
    expect_status 0
    "$SIMSTORE" build -q --fingerprint-only --shards "$np" "$T/fps-s$np" "$T/fps.hex" >/dev/null ||
        fail "build fps --shards $np"
    for store in "$T/fps-m$np" "$T/fps-s$np"; do
        for mode in "" "--json --similarity" "--by-fingerprint --k 1"; do
            # shellcheck disable=SC2086
            a=$("$SIMSTORE" pairs "$T/fps" $mode | md5sum)
            # shellcheck disable=SC2086
            b=$(mpi "$np" pairs "$store" $mode --chunk 1K 2>"$T/err" | md5sum)
            if [ "$a" = "$b" ]; then ok; else fail "fps np $np: pairs $mode of $store differs"; fi
        done
        for mode in "--singletons" "--json --similarity --k 2 --mode star"; do
            # shellcheck disable=SC2086
            a=$("$SIMSTORE" clusters "$T/fps" $mode 2>"$T/err1" | md5sum)
            # shellcheck disable=SC2086
            b=$(mpi "$np" clusters "$store" $mode --chunk 1K 2>"$T/err2" | md5sum)
            if [ "$a" = "$b" ] && cmp -s "$T/err1" "$T/err2"; then
                ok
            else
                fail "fps np $np: clusters $mode of $store differs: $(cat "$T/err2")"
            fi
        done
    done
done
if [ "$("$SIMSTORE" pairs "$T/fps" | wc -l)" -gt 20 ]; then ok; else fail "fps: few pairs"; fi
# --progress: rank 0's steps with the ranks' totals on stderr, stdout as
# without it.
mpi 3 build -q --progress --fingerprint-only "$T/fps-p" "$T/fps.hex" >"$T/out" 2>"$T/err"
status=$?
expect_status 0
expect_err_has "simstore-mpi build: read 800 records of"
expect_err_has "simstore-mpi build: built 3 shards of 800 records"
for cmd in pairs clusters; do
    a=$(mpi 3 "$cmd" "$T/fps-m3" 2>/dev/null | md5sum)
    b=$(mpi 3 "$cmd" "$T/fps-m3" --progress 2>"$T/err" | md5sum)
    if [ "$a" = "$b" ]; then ok; else fail "$cmd --progress changed stdout"; fi
    expect_err_has "simstore-mpi $cmd: read 713 documents with 713 distinct fingerprints from 3 shards"
    expect_err_has "simstore-mpi $cmd: join: table 1 of"
    expect_err_has "simstore-mpi $cmd: printed the lines of rank 2 (ranks 0..2)"
    if [ "$(grep -c "rank [12]:" "$T/err")" = 0 ]; then ok; else fail "$cmd --progress: ranks 1, 2 said"; fi
done
expect_err_has "simstore-mpi clusters: components: round 1 of label propagation"
mpi 2 build -q --fingerprint-only "$T/fps-bad" "$T/chains.jsonl" >"$T/out" 2>"$T/err"
status=$?
expect_status 2
expect_err_has "a fingerprint-only store reads --format hex"

# Duplicate ids: a copy late in rank 0's share and one early in rank 1's,
# which reaches rank 1's shard in an earlier round. Build refuses them,
# naming the copy first in the input as the one store does.
awk 'NR == 700 || NR == 760 { sub(/"id": [^,]*/, "\"id\": \"twin\"") } { print }' \
    "$T/random.jsonl" >"$T/twins.jsonl"
"$SIMSTORE" build -q --sketch none "$T/twins" "$T/twins.jsonl" >"$T/out" 2>"$T/err"
status=$?
expect_status 1
expect_err_has "twins.jsonl:760: duplicate document id 'twin' (first at $T/twins.jsonl:700)"
for np in 2 3; do
    mpi "$np" build -q --sketch none --chunk 1K "$T/twins-m$np" "$T/twins.jsonl" >"$T/out" 2>"$T/err"
    status=$?
    expect_status 1
    expect_err_has "twins.jsonl:760: duplicate document id 'twin' (first at $T/twins.jsonl:700)"
done

# Not supported yet: exit 2, saying which.
out=$T/dups-m2
for args in "pairs $out --method brute" "pairs $out --method join"; do
    # shellcheck disable=SC2086
    mpi 2 $args >"$T/out" 2>"$T/err"
    status=$?
    expect_status 2
    expect_err_has "is not supported yet"
done
mpi 2 pairs "$T/dups-m3" >"$T/out" 2>"$T/err"
status=$?
expect_status 1
expect_err_has "has 3 shards: run it with -np 3"

# Above the store's k (3): the join plan is chosen for K whatever the
# store's design, so pairs and clusters answer as simstore does.
for input in chains dups; do
    for np in 2 3; do
        sampled && [ ! -d "$T/$input-m$np" ] && continue
        a=$("$SIMSTORE" pairs "$T/$input" --k 5 | md5sum)
        b=$(mpi "$np" pairs "$T/$input-m$np" --k 5 --chunk 1K 2>"$T/err" | md5sum)
        if [ "$a" = "$b" ]; then ok; else fail "$input np $np: pairs --k 5 differs"; fi
        a=$("$SIMSTORE" clusters "$T/$input" --keep min-id --k 6 2>"$T/err1" | md5sum)
        b=$(mpi "$np" clusters "$T/$input-m$np" --keep min-id --k 6 --chunk 1K 2>"$T/err2" | md5sum)
        if [ "$a" = "$b" ] && cmp -s "$T/err1" "$T/err2"; then ok; else
            fail "$input np $np: clusters --k 6 differs: $(cat "$T/err2")"; fi
    done
done
[ "$("$SIMSTORE" pairs "$T/chains" --k 5 | awk -F'\t' '$3 > 3' | wc -l)" -gt 0 ] && ok ||
    fail "no pair above the store's k to compare"

# A rank that cannot read its shard (rank 1 given a copy of the store whose
# shard 1 is damaged): the job exits 1, naming the rank, and prints nothing.
cp -r "$T/dups-m3" "$T/damaged"
for f in "$T"/damaged/shard-0001/data.mdb; do : >"$f"; done
for cmd in "pairs" "clusters --keep min-id"; do
    # shellcheck disable=SC2086
    timeout 300 "$MPIEXEC" --allow-run-as-root --oversubscribe -np 1 "$MPI_BIN" $cmd \
        "$T/dups-m3" : -np 1 "$MPI_BIN" $cmd "$T/damaged" : -np 1 "$MPI_BIN" $cmd \
        "$T/dups-m3" >"$T/out" 2>"$T/err"
    status=$?
    expect_status 1
    expect_err_has "failed on rank 1"
    expect_err_has "rank 1: $T/damaged/shard-0001"
    if [ -s "$T/out" ]; then fail "$cmd: a failed job printed"; else ok; fi
done

finish
