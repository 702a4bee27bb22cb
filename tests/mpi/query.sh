#!/usr/bin/env bash
# query.sh: simstore-mpi query's answer options under mpirun with -np 2 and
# -np 3 print what `simstore query` prints on the same sharded store, byte
# for byte, with the same exit status and the same FILE:LINE messages:
# --similarity and --min-similarity, --paragraphs [--min-fraction],
# --end-marker (with and without --json), --skip-self and the JSON Lines
# field options; queries without matches, malformed lines, and records
# giving "fp" where texts are needed; and the refusals (no sketches, no
# paragraph index, queries without texts).
# Usage: query.sh SIMSTORE SIMSTORE_MPI MPIEXEC
. "$(dirname "$0")/lib.sh"

python3 - "$T" <<'PY'
import json, random, sys
t = sys.argv[1]
r = random.Random(8)
words = [f"w{i}" for i in range(2000)]
def para(n=None):
    return " ".join(r.choice(words) for _ in range(n or r.randrange(8, 30)))
shared = [para(60) for _ in range(12)]
docs = []
with open(f"{t}/docs.jsonl", "w") as f:
    for i in range(150):
        ps = [para() for _ in range(r.randrange(2, 5))]
        if i % 3 == 0:
            ps.insert(r.randrange(len(ps) + 1), r.choice(shared))
        text = "\n\n".join(ps)
        docs.append(text)
        rec = {"id": f"d{i}" if i % 5 else i, "text": text}
        if i % 2:
            rec["meta"] = {"n": i}
        f.write(json.dumps(rec) + "\n")
def changed(text, n):
    w = text.split(" ")
    for _ in range(n):
        w[r.randrange(len(w))] = r.choice(words)
    return " ".join(w)
with open(f"{t}/q.jsonl", "w") as f:
    for i in range(24):
        if i % 4 == 0:
            text = changed(docs[r.randrange(150)], 1)      # near a document
        elif i % 4 == 1:
            text = r.choice(shared) + "\n\n" + para()      # a shared paragraph
        elif i % 4 == 2:
            text = para(40) + "\n\n" + para(40)            # nothing near
        else:
            text = docs[i]                                 # a document itself
        qid = f"d{i}" if i % 4 == 3 else (i if i == 6 else f"q{i}")
        f.write(json.dumps({"id": qid, "text": text}) + "\n")
        if i == 10:
            f.write("{this is not json\n")
# The same queries under other member names, one without its id.
with open(f"{t}/q.jsonl") as src, open(f"{t}/fields.jsonl", "w") as f:
    for n, line in enumerate(src):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        out = {"body": rec["text"]}
        if n != 5:
            out["name"] = rec["id"]
        f.write(json.dumps(out) + "\n")
# A record giving "fp" among texts: a bad line for similarities, the end of
# the answers for paragraphs.
with open(f"{t}/q.jsonl") as src, open(f"{t}/fp.jsonl", "w") as f:
    lines = [l for l in src if l.startswith("{\"id")][:6]
    lines.insert(3, json.dumps({"id": "given", "fp": "0123456789abcdef"}) + "\n")
    f.writelines(lines)
PY

# compare NP STORE ARGS...: `simstore query` and `simstore-mpi query` on
# STORE print the same stdout and stderr (the command's name aside) and
# exit alike.
compare() {
    local np=$1 store=$2
    shift 2
    "$SIMSTORE" query "$store" "$@" >"$T/a.out" 2>"$T/a.err"
    local sa=$?
    mpi "$np" query "$store" "$@" >"$T/b.out" 2>"$T/b.err"
    local sb=$?
    sed -e '/^Try .simstore query --help.\.$/d' "$T/a.err" >"$T/a.msg"
    # mpirun's own notes of a non-zero exit are not the command's.
    grep '^simstore' "$T/b.err" | sed -e 's/^simstore-mpi query: /simstore query: /' >"$T/b.msg"
    if [ "$sa" = "$sb" ] && cmp -s "$T/a.out" "$T/b.out" && cmp -s "$T/a.msg" "$T/b.msg"; then
        ok
    else
        cp "$T/b.out" "$T/out"
        cp "$T/b.err" "$T/err"
        fail "np $np query $store $*: exit $sa/$sb; $(diff "$T/a.out" "$T/b.out" | head -5)
$(diff "$T/a.msg" "$T/b.msg" | head -5)"
    fi
}

for np in 2 3; do
    mpi "$np" build "$T/p$np" --paragraphs --paragraph-min-words 5 "$T/docs.jsonl" \
        >"$T/out" 2>"$T/err"
    status=$?
    expect_status 0
done
# The TSV queries: the fingerprints of the text queries' matches, a bad
# line, one without matches.
"$SIMSTORE" query "$T/p2" --queries "$T/q.jsonl" 2>/dev/null | cut -f1,3 >"$T/fps.tsv"
cp "$T/fps.tsv" "$T/q.tsv"
printf 'broken line\nnomatch\t5555555555555555\n' >>"$T/q.tsv"

# Every option on -np 2, the heaviest merges on -np 3 too (each mpirun
# costs a second or so on a loaded machine).
s=$T/p2
compare 2 "$s" --similarity --queries "$T/q.jsonl"
compare 2 "$s" --similarity --json --meta --skip-self --end-marker --min-similarity 0.3 \
    --queries "$T/q.jsonl"
expect_out_has() { grep -qF -- "$1" "$T/b.out" && ok || fail "stdout lacks: $1"; }
expect_out_has '{"query":"q2","matches":[]}'
expect_out_has '{"query":6,"matches":[]}'
expect_out_has '{"query":null,"matches":[],"error":'
compare 2 "$s" --similarity --end-marker --k 2 --queries "$T/q.tsv"
# Above the store's k (3): each shard answers as exactly, paragraphs too.
compare 2 "$s" --similarity --k 5 --queries "$T/q.jsonl"
compare 2 "$s" --paragraphs --k 6 --queries "$T/q.jsonl"
compare 2 "$s" --similarity --json --end-marker --queries "$T/fp.jsonl"
if grep -q 'fp.jsonl:4: a record giving "fp" has no text to sketch' "$T/b.err"; then ok; else
    fail "no message for the record giving fp"
fi
compare 2 "$s" --paragraphs --queries "$T/q.jsonl"
compare 2 "$s" --paragraphs --json --meta --end-marker --min-fraction 0 --k 2 --skip-self \
    --queries "$T/q.jsonl"
compare 2 "$s" --paragraphs --queries "$T/fp.jsonl"
if grep -q "fp.jsonl:4: query 'given' has no text: --paragraphs needs texts" "$T/b.err"; then ok
else fail "no message for the paragraph query giving fp"; fi
compare 2 "$s" --similarity --json --id-field name --text-field body --id-from-line \
    --queries "$T/fields.jsonl"
s=$T/p3
compare 3 "$s" --similarity --min-similarity 0.2 --queries "$T/q.jsonl"
compare 3 "$s" --json --similarity --end-marker --queries "$T/q.tsv"
compare 3 "$s" --paragraphs --end-marker --min-fraction 0.1 --queries "$T/q.jsonl"
compare 3 "$s" --paragraphs --json --skip-self --id-field name --text-field body \
    --id-from-line --queries "$T/fields.jsonl"

# Something was compared: similarities below 1, paragraph answers.
"$SIMSTORE" query "$s" --similarity --skip-self --queries "$T/q.jsonl" >"$T/out" 2>"$T/err"
if grep -qE '	0\.[0-9]+$' "$T/out"; then ok; else fail "no similarities below 1"; fi
"$SIMSTORE" query "$s" --paragraphs --queries "$T/q.jsonl" >"$T/out" 2>"$T/err"
if [ "$(cut -f1 "$T/out" | sort -u | wc -l)" -gt 5 ]; then ok; else fail "few paragraph answers"; fi

# Refused as `simstore query` refuses: a store without sketches or a
# paragraph index, queries without texts, options that do not go together.
"$SIMSTORE" build -q --shards 2 "$T/f2" "$T/fps.tsv" >/dev/null 2>&1 || fail "build f2"
compare 2 "$T/f2" --min-similarity 0.5 --queries "$T/q.jsonl"
compare 2 "$T/f2" --paragraphs --queries "$T/q.jsonl"
compare 2 "$T/p2" --min-similarity 0.5 --queries "$T/q.tsv"
compare 2 "$T/p2" --paragraphs --similarity --queries "$T/q.jsonl"
compare 2 "$T/p2" --min-fraction 0.5 --queries "$T/q.jsonl"

finish
