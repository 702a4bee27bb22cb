#!/usr/bin/env bash
# scan.sh: `simstore pairs STORE` and `simstore clusters`: the store's
# pairs equal the all-pairs answer on its fingerprint lines, the same bytes
# at every thread count and across a compaction; pairs of fingerprint lines
# byte-identical through the join and through all pairs; pairs and clusters
# above the store's design byte-identical to those of a store built for
# that distance; clusters, keep rules, --json, the summary, and usage
# errors.
. "$(dirname "$0")/lib.sh"

same() { # same FILE_A FILE_B WHAT
    if cmp -s "$1" "$2"; then ok; else
        fail "$3 differs"; diff "$1" "$2" | head -20 >&2
    fi
}

# The sample corpus, and a generated one with planted near-duplicates,
# metadata and integer ids.
python3 - "$T/gen.jsonl" <<'PY'
import json, random, sys
rnd = random.Random(7)
words = ["w%d" % i for i in range(3000)]
out = open(sys.argv[1], "w")
n = 0
for g in range(400):
    base = [rnd.choice(words) for _ in range(60)]
    for c in range(rnd.choice([1, 1, 2, 3, 5])):
        t = list(base)
        for _ in range(c % 3):
            t[rnd.randrange(len(t))] = rnd.choice(words)
        rec = {"id": n if n % 7 == 0 else "g%03d-%d" % (g, c), "text": " ".join(t),
               "len": len(t) + c, "when": "%d" % (1000 - n)}
        if n % 11 == 0:
            del rec["len"]
        out.write(json.dumps(rec) + "\n")
        n += 1
PY

for corpus in "$SRC/tests/data/sample.jsonl" "$T/gen.jsonl"; do
    rm -rf "$T/s" "$T/fp.tsv"
    run build "$T/s" --meta-fields len,when "$corpus"
    expect_status 0
    run fingerprint --jsonl "$corpus"
    cp "$T/out" "$T/fp.tsv"
    for k in 0 1 3; do
        run pairs --k "$k" --method brute "$T/fp.tsv"
        cp "$T/out" "$T/want"
        run pairs "$T/s" --k "$k" --threads 1
        expect_status 0; expect_err_empty
        same "$T/out" "$T/want" "pairs STORE --k $k against all pairs of its lines"
        run pairs "$T/s" --k "$k" --threads 2 --memory 16M
        same "$T/out" "$T/want" "pairs STORE --k $k --threads 2"
        run pairs --k "$k" --method join --threads 2 "$T/fp.tsv"
        same "$T/out" "$T/want" "pairs of lines --k $k through the join"
    done
    for mode in components star; do
        for keep in first min-id "max-meta len" "min-meta when"; do
            run clusters "$T/s" --mode "$mode" --keep $keep --threads 1
            expect_status 0
            expect_err_has "clusters: "
            cp "$T/out" "$T/c1"
            run clusters "$T/s" --mode "$mode" --keep $keep --threads 2
            same "$T/out" "$T/c1" "clusters --mode $mode --keep $keep at 2 threads"
        done
    done
done

# Above the store's design (k = 3): the same bytes as a store built for K
# from the same input (its fingerprints joined in memory instead).
for k in 5 7; do
    run build "$T/s$k" --k "$k" --meta-fields len,when "$T/gen.jsonl"
    expect_status 0
done
run pairs --k 7 --method brute "$T/fp.tsv"
cp "$T/out" "$T/want"
run pairs "$T/s" --k 7
expect_status 0; expect_err_empty
same "$T/out" "$T/want" "pairs STORE --k 7 of a k=3 store against all pairs of its lines"
for args in "--k 7" "--k 7 --threads 1 --memory 16M" "--k 6 --by-fingerprint" \
    "--k 5 --json --similarity" "--k 7 --min-similarity 0.5 --similarity"; do
    run pairs "$T/s" $args
    expect_status 0
    cp "$T/out" "$T/got"
    run pairs "$T/s7" $args
    same "$T/got" "$T/out" "pairs $args of a k=3 store against one built for 7"
done
for args in "--k 5" "--k 5 --mode star --keep max-meta len --threads 1" \
    "--k 5 --singletons --json --similarity" "--k 5 --min-similarity 0.6"; do
    run clusters "$T/s" $args
    expect_status 0
    cp "$T/out" "$T/got"; cp "$T/err" "$T/got.err"
    run clusters "$T/s5" $args
    same "$T/got" "$T/out" "clusters $args of a k=3 store against one built for 5"
    same "$T/got.err" "$T/err" "the summary of clusters $args"
done
if [ "$(wc -l <"$T/want")" -gt "$(grep -c '	[0-3]$' "$T/want")" ]; then ok; else
    fail "the corpus has no pairs above distance 3: the checks above prove nothing"; fi
run pairs "$T/s" --k 8
expect_status 2; expect_err_has "--k: 8 is above 7"
run clusters "$T/s" --k 8
expect_status 2; expect_err_has "--k: '8' is not a distance in 0..7"

# Every clustered document once; one kept per cluster, named by it; star
# clusters within K of their kept document.
run clusters "$T/s" --mode star --k 3
awk -F'\t' '{ seen[$2]++; if ($3 == 1) { kept[$1]++; if ($1 != $2) bad = 1 } if ($4 > 3) bad = 1 }
    END { for (d in seen) if (seen[d] != 1) bad = 1; for (c in kept) if (kept[c] != 1) bad = 1; exit bad }' "$T/out" \
    && ok || fail "star clusters are not a partition with one kept document within 3"
# Components: the union of the pairs' documents, plus nothing else.
run pairs "$T/s" --k 3
cut -f1,2 "$T/out" | tr '\t' '\n' | sort -u >"$T/paired"
run clusters "$T/s" --k 3
cut -f2 "$T/out" | sort >"$T/clustered"
same "$T/clustered" "$T/paired" "clustered documents against paired documents"
# --singletons: every document once.
run clusters "$T/s" --singletons
if [ "$(cut -f2 "$T/out" | sort -u | wc -l)" = "$(wc -l <"$T/gen.jsonl")" ]; then ok; else fail "--singletons does not list every document once"; fi
# The keep rule picks the largest len (documents without one last, then id).
run clusters "$T/s" --keep max-meta len --json
expect_out_has '"kept":true'
if python3 - "$T/out" "$T/gen.jsonl" <<'PY'
import json, sys
recs = {}
for line in open(sys.argv[2]):
    r = json.loads(line)
    recs[str(r["id"])] = r.get("len")
clusters = {}
for line in open(sys.argv[1]):
    m = json.loads(line)
    clusters.setdefault(str(m["cluster"]), []).append((str(m["id"]), m["kept"]))
for c, members in clusters.items():
    def key(i):
        l = recs[i]
        return (l is None, -(l or 0), i.encode())
    best = min((i for i, _ in members), key=key)
    kept = [i for i, k in members if k]
    assert kept == [best] == [c], (c, members)
PY
then ok; else fail "--keep max-meta len keeps the wrong documents"; fi
# Integer ids come back as numbers in JSON.
run pairs "$T/s" --json --k 3
if grep -q '"a":[0-9]' "$T/out" || grep -q '"b":[0-9]' "$T/out"; then ok; else fail "integer ids are not JSON numbers"; fi

# --by-fingerprint on a store where one fingerprint has many documents.
printf '{"id":"d%d","text":"the same words every time"}\n' $(seq 1 300) >"$T/dup.jsonl"
run build "$T/d" "$T/dup.jsonl"
run pairs "$T/d" --by-fingerprint
expect_out_lines 1
expect_out_has "	0	300	300"
run pairs "$T/d" --k 0
expect_out_lines 44850

# The same answers after deletes, an add and a compaction.
run delete "$T/s" g000-0 g001-1 g002-0 --no-compact
run pairs "$T/s" --k 3
cp "$T/out" "$T/before"
run compact "$T/s"
run pairs "$T/s" --k 3
same "$T/out" "$T/before" "pairs across a compaction"

# Fingerprint-only stores answer with fingerprints.
cut -f1 "$T/fp.tsv" >"$T/only.hex"
run build "$T/f" --fingerprint-only "$T/only.hex"
run pairs "$T/f" --k 3
expect_status 0
if grep -qE '^[0-9a-f]{16}	[0-9a-f]{16}	[0-3]$' "$T/out"; then ok; else fail "fingerprint-only pairs are not HEX HEX D"; fi
run clusters "$T/f" --keep max-meta len
expect_status 1; expect_err_has "fingerprints only"

# Usage errors.
run pairs "$T/s" --k 9
expect_status 2
run pairs "$T/s" "$T/d"
expect_status 2
run pairs --by-fingerprint "$T/fp.tsv"
expect_status 2
run clusters "$T/s" --keep biggest
expect_status 2
run clusters "$T/s" --mode ring
expect_status 2
run clusters "$T/s" --keep max-meta
expect_status 2
run clusters
expect_status 2
run clusters "$T/nothing"
expect_status 1

finish
