#!/usr/bin/env bash
# sharded.sh: sharded stores (format/shards.md) through the command:
# build --shards R for R = 1, 2, 3, 5 answers every query (TSV, --json,
# --meta, --end-marker, --fp, --text, similarities) byte for byte as one
# store built from the same input, on random, duplicate-heavy and clustered
# fingerprints, texts with boilerplate and a fingerprint-only store; stats,
# inspect and verify take it; every command works on a shard alone; a
# damaged or truncated manifest, a missing shard and a directory without a
# manifest are errors naming what is wrong, never a crash; a rerun after an
# unfinished build succeeds.
. "$(dirname "$0")/lib.sh"

SAMPLE=$SRC/tests/data/sample.jsonl

# same_output DESC ARGS...: `simstore ARGS` with ONE and then SHARDED in
# place of the word STORE gives the same stdout and exit status.
same_output() {
    local desc=$1
    shift
    local a=() b=() x
    for x in "$@"; do
        a+=("${x/STORE/$ONE}")
        b+=("${x/STORE/$SHARDED}")
    done
    "$SIMSTORE" "${a[@]}" >"$T/a" 2>/dev/null
    local sa=$?
    "$SIMSTORE" "${b[@]}" >"$T/b" 2>"$T/err"
    local sb=$?
    if [ "$sa" = "$sb" ] && cmp -s "$T/a" "$T/b" && [ -s "$T/a" ]; then
        ok
    else
        cp "$T/b" "$T/out"
        fail "$desc: the sharded store answers otherwise (exit $sa vs $sb; $(wc -l <"$T/a") vs $(wc -l <"$T/b") lines)"
    fi
}

# Fingerprint sets: random, duplicate-heavy (40 values), clustered (40
# centres, up to 4 bits flipped), 4000 documents each; queries from each.
python3 - "$T" <<'PY'
import random, sys
t = sys.argv[1]
r = random.Random(16)
centres = [r.getrandbits(64) for _ in range(40)]
def near(c):
    for _ in range(r.randrange(5)):
        c ^= 1 << r.randrange(64)
    return c
for kind in ("random", "dups", "clustered"):
    fps = []
    for i in range(4000):
        if kind == "random":
            fps.append(r.getrandbits(64))
        elif kind == "dups":
            fps.append(r.choice(centres))
        else:
            fps.append(near(r.choice(centres)))
    with open(f"{t}/{kind}.tsv", "w") as f:
        for i, fp in enumerate(fps):
            f.write(f"doc-{(i * 7919) % 4013}\t{fp:016x}\n")
    with open(f"{t}/{kind}.q.tsv", "w") as f:
        for i in range(300):
            fp = fps[r.randrange(len(fps))] if i % 2 else near(r.choice(centres))
            f.write(f"q{i}\t{fp:016x}\n")
    with open(f"{t}/{kind}.hex", "w") as f:
        for fp in fps:
            f.write(f"{fp:016x}\n")
PY

for kind in random dups clustered; do
    ONE=$T/$kind.one
    "$SIMSTORE" build -q "$ONE" "$T/$kind.tsv" >/dev/null || fail "build $kind"
    for r in 1 2 3 5; do
        SHARDED=$T/$kind.sh$r
        run build -q --shards "$r" "$SHARDED" "$T/$kind.tsv"
        expect_status 0
        expect_out_has "$r shard"
        same_output "$kind R=$r TSV" query STORE --queries "$T/$kind.q.tsv"
        same_output "$kind R=$r --json" query STORE --json --queries "$T/$kind.q.tsv"
        same_output "$kind R=$r --k 2 --end-marker" query STORE --k 2 --end-marker \
            --queries "$T/$kind.q.tsv"
        same_output "$kind R=$r --json --end-marker" query STORE --json --end-marker \
            --queries "$T/$kind.q.tsv"
        # Above the store's k (3): every shard probes more, the same merge.
        same_output "$kind R=$r --k 6" query STORE --k 6 --queries "$T/$kind.q.tsv"
        fp=$(sed -n 2p "$T/$kind.q.tsv" | cut -f2)
        same_output "$kind R=$r --fp" query STORE --fp "$fp"
        same_output "$kind R=$r --fp --json" query STORE --json --fp "$fp"
        # Queries from a pipe go one by one: the same.
        a=$("$SIMSTORE" query "$ONE" --format tsv --queries - <"$T/$kind.q.tsv" | md5sum)
        b=$(cat "$T/$kind.q.tsv" | "$SIMSTORE" query "$SHARDED" --format tsv --queries - | md5sum)
        if [ "$a" = "$b" ]; then ok; else fail "$kind R=$r: queries from a pipe differ"; fi
        docs=$("$SIMSTORE" stats "$ONE" | sed -n 's/^documents: //p')
        run stats "$SHARDED"
        expect_status 0
        expect_out_has "documents: $docs"
        expect_out_has "shards: $r"
    done
done

# Fingerprint-only: the same answers (fingerprints on the shard their
# bytes give).
ONE=$T/fponly.one
SHARDED=$T/fponly.sh3
"$SIMSTORE" build -q --fingerprint-only "$ONE" "$T/clustered.hex" >/dev/null || fail "build fp-only"
run build -q --fingerprint-only --shards 3 "$SHARDED" "$T/clustered.hex"
expect_status 0
same_output "fingerprint-only R=3" query STORE --queries "$T/clustered.q.tsv"
same_output "fingerprint-only R=3 --json" query STORE --json --queries "$T/clustered.q.tsv"

# Texts: the sample corpus with sketches and metadata, queried by text,
# with similarities and metadata.
ONE=$T/sample.one
TEXT=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["text"])' "$SAMPLE")
"$SIMSTORE" build -q "$ONE" "$SAMPLE" >/dev/null || fail "build the sample"
for r in 1 2 3 5; do
    SHARDED=$T/sample.sh$r
    run build -q --shards "$r" "$SHARDED" "$SAMPLE"
    expect_status 0
    same_output "sample R=$r JSON Lines --similarity" query STORE --similarity \
        --queries "$SAMPLE"
    same_output "sample R=$r --json --meta" query STORE --json --meta --similarity \
        --queries "$SAMPLE"
    same_output "sample R=$r --min-similarity" query STORE --min-similarity 0.5 \
        --queries "$SAMPLE"
    same_output "sample R=$r --skip-self" query STORE --skip-self --queries "$SAMPLE"
    same_output "sample R=$r --text" query STORE --similarity --text "$TEXT"
done
# (stats differ in counts and sizes: compare the text options only)
a=$("$SIMSTORE" stats "$ONE" | grep -E '^(k|kind|documents|text options|sketch|boilerplate|fingerprint version):')
b=$("$SIMSTORE" stats "$T/sample.sh3" | grep -E '^(k|kind|documents|text options|sketch|boilerplate|fingerprint version):')
if [ "$a" = "$b" ]; then ok; else fail "stats of the sharded sample differ: $b"; fi
run stats --json "$T/sample.sh3"
expect_status 0
expect_out_has '"shards":3,"shard_stats":[{"name":"shard-0000"'

# Paragraphs: the answers of every shard merged in one store's order; and
# batches agree with one-by-one answers.
ONE=$T/para.one
SHARDED=$T/para.sh3
"$SIMSTORE" build -q --paragraphs --paragraph-min-words 4 "$ONE" "$SAMPLE" >/dev/null ||
    fail "build with paragraphs"
run build -q --paragraphs --paragraph-min-words 4 --shards 3 "$SHARDED" "$SAMPLE"
expect_status 0
same_output "paragraphs R=3" query STORE --paragraphs --queries "$SAMPLE"
same_output "paragraphs R=3 --json" query STORE --paragraphs --json --min-fraction 0.2 \
    --queries "$SAMPLE"
same_output "paragraphs R=3 --text" query STORE --paragraphs --text "$TEXT"
ONE=$T/clustered.one
SHARDED=$T/clustered.sh5
same_output "batch against one by one" query STORE --strategy one-by-one \
    --queries "$T/clustered.q.tsv"
same_output "--memory 64K: many batches" query STORE --memory 64K --json \
    --queries "$T/clustered.q.tsv"
a=$("$SIMSTORE" query "$SHARDED" --strategy one-by-one --queries "$T/clustered.q.tsv" | md5sum)
b=$("$SIMSTORE" query "$SHARDED" --strategy scan --queries "$T/clustered.q.tsv" | md5sum)
if [ "$a" = "$b" ]; then ok; else fail "sharded: batches and one by one differ"; fi

# Boilerplate: one set for the whole corpus, recorded in every shard, so
# text queries fingerprint alike.
python3 - "$T" <<'PY'
import random, sys
r = random.Random(5)
words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon".split()
with open(sys.argv[1] + "/templ.jsonl", "w") as f:
    for i in range(300):
        body = " ".join(r.choice(words) for _ in range(40))
        text = "Home | News | Contact\\nSite navigation menu here\\n" + body + "\\nCopyright 2024 Example Corp"
        f.write('{"id": "t%d", "text": "%s"}\n' % (i, text))
PY
ONE=$T/templ.one
SHARDED=$T/templ.sh3
"$SIMSTORE" build -q --boilerplate auto "$ONE" "$T/templ.jsonl" >/dev/null || fail "build templ"
run build -q --boilerplate auto --shards 3 "$SHARDED" "$T/templ.jsonl"
expect_status 0
expect_out_has "boilerplate"
same_output "boilerplate R=3 text queries" query STORE --similarity --queries "$T/templ.jsonl"

# inspect and verify take the sharded store; verify checks every shard and
# each document's place.
S=$T/sample.sh3
run inspect --brief "$S"
expect_status 0
expect_out_has "sharded store: $S"
expect_out_has "== shard 2 of 3 =="
run inspect --brief --json "$S"
expect_status 0
expect_out_has '{"kind":"sharded"'
run verify "$S"
expect_status 0
expect_out_has "verify $S/shard-0001: OK"
expect_out_has "verify $S: OK"
run verify --json --quick "$S"
expect_status 0
expect_out_has '"kind":"sharded","ok":true'

# Every command on a shard alone: it is an ordinary store.
SH=$S/shard-0001
for cmd in "stats" "inspect --brief" "verify" "export" "pairs" "clusters"; do
    # shellcheck disable=SC2086
    run $cmd "$SH"
    if [ "$status" = 0 ]; then ok; else fail "$cmd on a shard alone: exit $status"; fi
done
run dump "$(ls "$SH"/*.tbl | head -1)"
expect_status 0
id=$("$SIMSTORE" export "$SH" | head -1 | cut -f1)
run get "$SH" "$id"
expect_status 0
run query "$SH" --text "The river flooded the lower town"
expect_status 0
# Documents written to the wrong shard are found by verify (of ten ids,
# some hash to another shard).
cp -r "$S" "$T/mis"
for i in 0 1 2 3 4 5 6 7 8 9; do
    printf '{"id": "misplaced-%s", "text": "misplaced document number %s"}\n' "$i" "$i"
done >"$T/mis.jsonl"
"$SIMSTORE" add -q "$T/mis/shard-0000" "$T/mis.jsonl" >/dev/null 2>&1 || fail "add to a shard"
run verify "$T/mis"
expect_status 1
expect_out_has "belongs on shard"

# A damaged manifest: every flipped byte of the header region and a few
# truncations are errors naming the manifest, never a crash.
cp -r "$S" "$T/bad"
size=$(stat -c %s "$S/MANIFEST")
for off in 0 8 12 16 20 24 33 40 56 80 100 $((size - 1)); do
    cp "$S/MANIFEST" "$T/bad/MANIFEST"
    printf '\xff' | dd of="$T/bad/MANIFEST" bs=1 seek="$off" conv=notrunc 2>/dev/null
    for cmd in "query --fp 0000000000000000" "stats" "inspect --brief" "verify"; do
        # shellcheck disable=SC2086
        run ${cmd%% *} "$T/bad" $([ "${cmd#* }" = "$cmd" ] || echo "${cmd#* }")
        if [ "$status" = 1 ] && cat "$T/err" "$T/out" | grep -q "$T/bad/MANIFEST"; then
            ok
        else
            fail "byte $off of MANIFEST damaged: $cmd: exit $status"
        fi
    done
done
for len in 0 7 12 50 87 $((size - 8)) $((size - 1)); do
    head -c "$len" "$S/MANIFEST" >"$T/bad/MANIFEST"
    run query "$T/bad" --fp 0000000000000000
    expect_status 1
    expect_err_has "$T/bad/MANIFEST"
done
cp "$S/MANIFEST" "$T/bad/MANIFEST"
run query "$T/bad" --fp 0000000000000000
expect_status 0

# A missing shard: a clear error naming it.
mv "$T/bad/shard-0002" "$T/shard-away"
run query "$T/bad" --fp 0000000000000000
expect_status 1
expect_err_has "$T/bad/shard-0002: shard 3 of 3"
run stats "$T/bad"
expect_status 1
expect_err_has "shard-0002"

# A shard of another k: named, with what differs, in plain words.
"$SIMSTORE" build -q --k 2 "$T/shard-k2" "$SAMPLE" || fail "build the k=2 store"
mv "$T/shard-k2" "$T/bad/shard-0002"
run query "$T/bad" --fp 0000000000000000
expect_status 1
expect_err_has "$T/bad/shard-0002: its k differs from what $T/bad/MANIFEST records"
rm -rf "$T/bad/shard-0002"

# A build that did not finish (no manifest) is no sharded store; a rerun
# succeeds without --replace.
rm "$T/bad/MANIFEST"
mv "$T/shard-away" "$T/bad/shard-0002"
run query "$T/bad" --fp 0000000000000000
expect_status 1
expect_err_has "no MANIFEST: a sharded build that did not finish"
run build -q --shards 3 "$T/bad" "$SAMPLE"
expect_status 0
run query "$T/bad" --fp 0000000000000000
expect_status 0

# A published sharded store is replaced only with --replace, and with
# fewer shards the extra ones go.
run build -q --shards 5 "$T/bad" "$SAMPLE"
expect_status 1
expect_err_has "already exists; use --replace"
run build -q --shards 2 --replace "$T/bad" "$SAMPLE"
expect_status 0
if [ -d "$T/bad/shard-0002" ]; then fail "shard-0002 left after --replace with 2 shards"; else ok; fi
ONE=$T/sample.one SHARDED=$T/bad same_output "after --replace" query STORE --queries "$SAMPLE"
# A directory of other things, or an ordinary store, is not built over.
mkdir "$T/mine" && echo x >"$T/mine/notes.txt"
run build -q --shards 2 --replace "$T/mine" "$SAMPLE"
expect_status 1
expect_err_has "is not a sharded store"
run build -q --shards 2 --replace "$ONE" "$SAMPLE"
expect_status 1
expect_err_has "is not a sharded store"
run stats "$ONE"
expect_status 0
# Usage.
run build -q --shards 0 "$T/x" "$SAMPLE"
expect_status 2
run build -q --shards 257 "$T/x" "$SAMPLE"
expect_status 2
# A bad record publishes nothing.
printf '{"id": "a", "text": "one two three"}\nnot json\n' >"$T/badrec.jsonl"
run build -q --shards 2 "$T/norec" "$T/badrec.jsonl"
expect_status 1
if [ -e "$T/norec/MANIFEST" ]; then fail "a failed build published a manifest"; else ok; fi
run query "$T/norec" --fp 0000000000000000
expect_status 1

# A crash at every rename and fsync of a sharded build (SIMSTORE_FAULT, the
# test-only fault points): afterwards the directory is either a complete
# sharded store answering as one store, or no sharded store at all, and a
# rerun without --replace succeeds.
ONE=$T/sample.one
want=$("$SIMSTORE" query "$ONE" --queries "$SAMPLE" | md5sum)
for op in rename fsync; do
    n=1
    while [ "$n" -lt 200 ]; do
        rm -rf "$T/crash"
        SIMSTORE_FAULT=$op:$n:crash "$SIMSTORE" build -q --shards 2 "$T/crash" "$SAMPLE" \
            >/dev/null 2>&1
        st=$?
        if [ -e "$T/crash/MANIFEST" ]; then
            got=$("$SIMSTORE" query "$T/crash" --queries "$SAMPLE" 2>/dev/null | md5sum)
            if [ "$got" = "$want" ]; then ok; else fail "$op $n: a published store answers otherwise"; fi
        else
            run query "$T/crash" --fp 0000000000000000
            expect_status 1
            run build -q --shards 2 "$T/crash" "$SAMPLE"
            expect_status 0
            got=$("$SIMSTORE" query "$T/crash" --queries "$SAMPLE" 2>/dev/null | md5sum)
            if [ "$got" = "$want" ]; then ok; else fail "$op $n: the rerun answers otherwise"; fi
        fi
        [ "$st" = 86 ] || break # the build got past its last $op
        n=$((n + 1))
    done
    if [ "$n" -gt 2 ]; then ok; else fail "$op: too few crash points ($n)"; fi
done

finish
