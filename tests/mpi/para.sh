#!/usr/bin/env bash
# para.sh: simstore-mpi build --paragraphs and --boilerplate auto under
# mpirun with -np 1, 2 and 3 make the shards `simstore build --shards R`
# makes of the same input: the same boilerplate set (counted over every
# rank's share: a line held by one document more than the fraction, all in
# one share, is boilerplate; one held by exactly the fraction is not), the
# same documents and fingerprints in each shard, the same paragraph index
# (stats, and paragraph queries of each shard), the same warnings, and the
# same answers to text queries. And pairs --paragraphs on those stores
# prints what `simstore pairs --paragraphs` prints for one store.
# Usage: para.sh SIMSTORE SIMSTORE_MPI MPIEXEC
. "$(dirname "$0")/lib.sh"

python3 - "$T" <<'PY'
import json, random, sys
t = sys.argv[1]
r = random.Random(21)
meta = random.Random(5)  # metadata for the keep rules, from a stream of its own
words = [f"w{i}" for i in range(3000)]
def para(n=None):
    return " ".join(r.choice(words) for _ in range(n or r.randrange(8, 30)))
shared = [para(80) for _ in range(40)]
nav = ["Home | About | Contact", "Copyright 2024 Site A all rights reserved"]
other = ["Site B menu: news sport weather", "Follow us on social media today"]
# 420 documents, fraction 0.1: a line in 43 is boilerplate, in 42 not.
texts = [i for i in range(420) if i % 13]  # the others give fingerprints
edge_in = set(texts[:43])                  # all early: rank 0's share
edge_out = set(r.sample(texts, 42))        # spread over the shares
with open(f"{t}/docs.jsonl", "w") as f:
    for i in range(420):
        lines = []
        if i % 5 < 2:
            lines += nav
        if i % 7 == 0:
            lines += other
        if i in edge_in:
            lines.append("one more than the fraction")
        if i in edge_out:
            lines.append("exactly the fraction")
        ps = [para() for _ in range(r.randrange(2, 6))]
        if i % 3 == 0:
            c = r.choice(shared)
            if i % 6 == 0:  # a word changed: near, or not, in the paragraph index
                w = c.split()
                w[r.randrange(len(w))] = r.choice(words)
                c = " ".join(w)
            ps.insert(r.randrange(len(ps) + 1), c)
            if i % 17 == 0:  # the same paragraph twice: counted twice
                ps.append(c)
        if i % 11 == 0:
            ps = nav[:1]  # nothing but boilerplate
        rec = {"id": f"doc{i}" if i % 4 else i, "text": "\n".join(lines) + "\n\n" + "\n\n".join(ps)}
        if i % 4:
            rec["meta"] = {"n": meta.randrange(20)}
        if i % 13 == 0:  # a fingerprint without a text: a document of no lines
            rec = {"id": f"fp{i}", "fp": "%016x" % r.getrandbits(64)}
        f.write(json.dumps(rec) + "\n")
with open(f"{t}/q.jsonl", "w") as f:
    for i in range(30):
        text = nav[0] + "\n" + r.choice(shared) + "\n\n" + para()
        f.write(json.dumps({"id": f"q{i}", "text": text}) + "\n")
PY

opts="--sketch none --paragraphs --paragraph-min-words 5 --boilerplate auto"
for np in 1 2 3; do
    # shellcheck disable=SC2086
    "$SIMSTORE" build $opts --shards "$np" "$T/s$np" "$T/docs.jsonl" >"$T/out1" 2>"$T/err1" ||
        fail "build --shards $np"
    # shellcheck disable=SC2086
    mpi "$np" build $opts --chunk 1K "$T/m$np" "$T/docs.jsonl" >"$T/out" 2>"$T/err"
    status=$?
    expect_status 0
    expect_out_has "boilerplate 5 lines (held by more than 10% of 420 documents)"
    grep -q "boilerplate 5 lines (held by more than 10% of 420 documents)" "$T/out1" && ok ||
        fail "np $np: build --shards found another set: $(cat "$T/out1")"
    # The same warnings (documents that are only boilerplate), whichever
    # rank read them.
    sort "$T/err1" >"$T/w1"
    sed 's/^simstore-mpi build: rank [0-9]*: warning: /simstore build: warning: /' "$T/err" |
        sort >"$T/w2"
    if [ -s "$T/w1" ] && cmp -s "$T/w1" "$T/w2"; then ok; else fail "np $np: warnings differ"; fi
    for ((i = 0; i < np; i++)); do
        shard=$(printf 'shard-%04d' "$i")
        a=$("$SIMSTORE" export --json "$T/s$np/$shard" | md5sum)
        b=$("$SIMSTORE" export --json "$T/m$np/$shard" | md5sum)
        if [ "$a" = "$b" ]; then ok; else fail "np $np: $shard's documents differ"; fi
        a=$("$SIMSTORE" stats "$T/s$np/$shard" | grep -E 'boilerplate|paragraph' | md5sum)
        b=$("$SIMSTORE" stats "$T/m$np/$shard" | grep -E 'boilerplate|paragraph' | md5sum)
        if [ "$a" = "$b" ]; then ok; else fail "np $np: $shard's stats differ"; fi
        a=$("$SIMSTORE" query "$T/s$np/$shard" --paragraphs --queries "$T/q.jsonl" | md5sum)
        b=$("$SIMSTORE" query "$T/m$np/$shard" --paragraphs --queries "$T/q.jsonl" | md5sum)
        if [ "$a" = "$b" ]; then ok; else fail "np $np: $shard's paragraph answers differ"; fi
    done
    a=$("$SIMSTORE" query "$T/s$np" --k 3 --queries "$T/q.jsonl" --json | md5sum)
    b=$(mpi "$np" query "$T/m$np" --k 3 --queries "$T/q.jsonl" --json 2>"$T/err" | md5sum)
    if [ "$a" = "$b" ]; then ok; else fail "np $np: query answers differ"; fi
done
# pairs --paragraphs: the paragraph join spread over the ranks, the counts
# of each document pair added up at the rank owning it, the lines of
# `simstore pairs --paragraphs` on one store.
# shellcheck disable=SC2086
"$SIMSTORE" build -q $opts "$T/one" "$T/docs.jsonl" >/dev/null 2>&1 || fail "build one"
for np in 1 2 3; do
    for mode in "" "--json --k 1" "--min-fraction 0" "--min-fraction 0.6 --k 2 --json" "--k 5"; do
        # shellcheck disable=SC2086
        a=$("$SIMSTORE" pairs "$T/one" --paragraphs $mode | md5sum)
        # The store of build --shards R once, that of simstore-mpi build always.
        stores=$T/m$np
        [ -z "$mode" ] && stores="$stores $T/s$np"
        for store in $stores; do
            # shellcheck disable=SC2086
            b=$(mpi "$np" pairs "$store" --paragraphs $mode --chunk 1K 2>"$T/err" | md5sum)
            if [ "$a" = "$b" ]; then ok; else fail "np $np: pairs --paragraphs $mode of $store differs"; fi
        done
    done
done
# clusters --paragraphs: components over the documents at their ranks, the
# kept one by the keep rule, the fraction with it from the pairs.
for np in 1 2 3; do
    for mode in "" "--keep max-meta n --json --k 1" "--keep min-id --min-fraction 0.1"; do
        # shellcheck disable=SC2086
        a=$("$SIMSTORE" clusters "$T/one" --paragraphs $mode 2>"$T/err1" | md5sum)
        # shellcheck disable=SC2086
        b=$(mpi "$np" clusters "$T/m$np" --paragraphs $mode --chunk 1K 2>"$T/err2" | md5sum)
        if [ "$a" = "$b" ] && grep -q '^clusters: ' "$T/err1" && cmp -s "$T/err1" "$T/err2"; then
            ok
        else
            fail "np $np: clusters --paragraphs $mode differs: $(cat "$T/err2")"
        fi
    done
done
if [ "$("$SIMSTORE" clusters "$T/one" --paragraphs 2>/dev/null | grep -c '	-$')" -gt 0 ]; then
    ok
else
    fail "no member linked only through others"
fi
for args in "--paragraphs --singletons" "--paragraphs --mode star" "--min-fraction 0.5"; do
    # shellcheck disable=SC2086
    mpi 2 clusters "$T/m2" $args >"$T/out" 2>"$T/err"
    status=$?
    expect_status 2
done

# Something to compare: pairs, and near paragraphs that are not equal.
if [ "$("$SIMSTORE" pairs "$T/one" --paragraphs | wc -l)" -gt 20 ]; then ok; else fail "few pairs"; fi
a=$("$SIMSTORE" pairs "$T/one" --paragraphs --min-fraction 0 --k 0 | wc -l)
b=$("$SIMSTORE" pairs "$T/one" --paragraphs --min-fraction 0 | wc -l)
if [ "$a" -lt "$b" ]; then ok; else fail "no pairs near but not equal ($a, $b)"; fi
mpi 3 pairs "$T/m3" --paragraphs --progress >/dev/null 2>"$T/err"
expect_err_has "simstore-mpi pairs: read 351 documents with paragraphs, 1305 distinct paragraphs"
for args in "--paragraphs --by-fingerprint" "--min-fraction 0.5" "--paragraphs --min-fraction 2"; do
    # shellcheck disable=SC2086
    mpi 2 pairs "$T/m2" $args >"$T/out" 2>"$T/err"
    status=$?
    expect_status 2
done

# The paragraph index answers something, and the edge lines fell as they
# should: the set has 5 lines (nav 2, other 2, the one above the fraction).
if [ "$("$SIMSTORE" query "$T/m3/shard-0000" --paragraphs --queries "$T/q.jsonl" | wc -l)" -gt 3 ]; then
    ok
else
    fail "few paragraph answers"
fi

# Boilerplate options: a higher minimum of documents makes the set empty.
mpi 2 build --sketch none --boilerplate auto --boilerplate-min-docs 1000 "$T/few" \
    "$T/docs.jsonl" >"$T/out" 2>"$T/err"
status=$?
expect_status 0
expect_out_has "boilerplate 0 lines (420 documents: fewer than the 1000 needed)"
expect_err_has "fewer than the 1000 --boilerplate auto needs"
mpi 2 pairs "$T/few" --paragraphs >"$T/out" 2>"$T/err"
status=$?
expect_status 1
expect_err_has "has no paragraph index"

# Refused: exit 2 (1 for fingerprints given to --boilerplate auto).
for args in "--paragraph-min-words 3" "--fingerprint-only --paragraphs" \
    "--fingerprint-only --boilerplate auto" "--boilerplate-fraction 0.2"; do
    # shellcheck disable=SC2086
    mpi 2 build $args "$T/bad" "$T/docs.jsonl" >"$T/out" 2>"$T/err"
    status=$?
    expect_status 2
done
printf 'a\t0123456789abcdef\n' >"$T/x.tsv"
mpi 2 build --boilerplate auto "$T/bad" "$T/x.tsv" >"$T/out" 2>"$T/err"
status=$?
expect_status 1
expect_err_has "--boilerplate auto reads the texts of JSON Lines documents"

finish
