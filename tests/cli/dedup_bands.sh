#!/usr/bin/env bash
# dedup_bands.sh: streaming `simstore dedup` takes the near-duplicate rule's
# band candidates (format/sketch.md 6.2) among the kept records, exactly:
# on short templated texts with one word substituted (near-duplicates often
# more than 7 bits apart), its kept records and --removed lines (the nearest
# kept record by distance, ties the earliest) equal the brute force of the
# whole rule over the records' sketches (sketch_ref.py, which derives the
# bands itself) at --min-similarity 0.5, 0.7, 0.8, 0.9, 0.95 and the
# defaults; --bands off is the rule within k alone; pairs and clusters
# take --bands too; -v states the rule; usage errors.
source "$(dirname "$0")/lib.sh"

REF="python3 $(dirname "$0")/sketch_ref.py"
$REF templates 300 3 >"$T/t.jsonl"
"$SIMSTORE" fingerprint --jsonl --sketch minhash256 "$T/t.jsonl" >"$T/fps" 2>/dev/null ||
    fail "fingerprint --sketch"

# The references, in one process (sketch_ref.dedup for each J: with the
# rule's bands, the default, at the store's k (3, the build's default);
# without them at k 7): $T/want-J-BANDS.{out,removed}.
python3 - "$(dirname "$0")" "$T" <<'PY' || fail "the references"
import sys
sys.path.insert(0, sys.argv[1])
import sketch_ref
t = sys.argv[2]
docs = sketch_ref.load(t + "/fps")
for j in ("0.5", "0.7", "0.8", "0.9", "0.95"):
    for bands, name in ((None, "default"), (False, "off"), (True, "on")):
        if bands and float(j) < 0.5:
            continue
        sketch_ref.BANDS = bands
        sketch_ref.dedup(7 if bands is False else 3, float(j), t + "/t.jsonl", docs, "%s/want-%s-%s.out" % (t, j, name),
                         "%s/want-%s-%s.removed" % (t, j, name))
PY

# check NAME J BANDS DEDUP_OPTIONS...: dedup == the reference at J with
# BANDS (default, off, on).
check() {
    local name=$1 j=$2 bands=$3
    shift 3
    run dedup --similarity --removed "$T/got.removed" "$@" "$T/t.jsonl"
    expect_status 0
    if cmp -s "$T/out" "$T/want-$j-$bands.out"; then ok; else fail "$name: kept records differ from the rule's"; fi
    if cmp -s "$T/got.removed" "$T/want-$j-$bands.removed"; then ok; else
        fail "$name: --removed differs from the rule's"; diff "$T/got.removed" "$T/want-$j-$bands.removed" | head -5 >&2; fi
}

beyond=0
for j in 0.5 0.7 0.8 0.9 0.95; do
    check "J $j" "$j" default --min-similarity "$j" --threads 2
    # Records dropped by a kept record more than 7 bits away: the bands
    # found them.
    n=$(awk -F'\t' '$3 > 7' "$T/got.removed" | wc -l)
    beyond=$((beyond + n))
    cp "$T/out" "$T/bands.out"
    check "J $j --bands off" "$j" off --min-similarity "$j" --bands off
    if awk -F'\t' '$3 > 7 { exit 1 }' "$T/got.removed"; then ok; else fail "J $j --bands off: a record dropped beyond k"; fi
    if [ "$j" = 0.8 ]; then
        if cmp -s "$T/out" "$T/bands.out"; then fail "J 0.8: bands change nothing on this corpus"; else ok; fi
    fi
done
if [ "$beyond" -gt 20 ]; then ok; else fail "only $beyond records dropped beyond k by bands"; fi
# The defaults: J 0.9, bands, the build's k 3 (on one thread and three).
check "the defaults" 0.9 default --threads 1
check "the defaults, 3 threads" 0.9 default --threads 3
check "--bands on" 0.9 on --bands on
check "the defaults, --bands off" 0.9 off --bands off
# -v states the rule, bands included, and counts the band index's memory.
run dedup -v "$T/t.jsonl"
expect_status 0
expect_err_has "rule: k 3, min similarity 0.9, bands on (22 bands of 32 bits)"
expect_err_has "kept records' index"
run dedup -v --bands off "$T/t.jsonl"
expect_err_has "rule: k 7, min similarity 0.9, bands off"

# pairs and clusters with --bands: the same rule (a store of the corpus).
run build "$T/s" -q "$T/t.jsonl"
expect_status 0
for b in on off; do
    k=3
    [ "$b" = off ] && k=7
    $REF pairs --bands $b $k 0.8 "$T/fps" >"$T/want"
    run pairs "$T/s" --similarity --min-similarity 0.8 --bands $b
    expect_status 0
    if cmp -s "$T/out" "$T/want"; then ok; else fail "pairs --bands $b differs from the rule's"; diff "$T/out" "$T/want" | head -5 >&2; fi
    $REF clusters --bands $b $k 0.9 "$T/fps" >"$T/want"
    run clusters "$T/s" --similarity --bands $b
    expect_status 0
    if cmp -s "$T/out" "$T/want"; then ok; else fail "clusters --bands $b differs from the rule's"; fi
done
# At their defaults pairs print band pairs beyond k.
run pairs "$T/s"
if awk -F'\t' '$3 > 7 { found = 1 } END { exit !found }' "$T/out"; then ok; else fail "pairs by default printed no band pair beyond k"; fi

# Usage errors.
run dedup --bands maybe "$T/t.jsonl"
expect_status 2
expect_err_has "--bands takes on or off, not 'maybe'"
run dedup --bands on --k 3 "$T/t.jsonl"
expect_status 2
expect_err_has "--k without --min-similarity"
run dedup --bands on --min-similarity 0.4 "$T/t.jsonl"
expect_status 2
expect_err_has "at least 0.5"
run dedup --bands on --store "$T/s" "$T/t.jsonl"
expect_status 2
expect_err_has "the store keeps no band index"
run dedup --bands off --paragraphs "$T/t.jsonl"
expect_status 2
run pairs "$T/s" --bands on --by-fingerprint
expect_status 2
run clusters "$T/s" --bands on --min-similarity 0.3
expect_status 2
# dedup --store is without bands, whatever J: the store answers within k,
# and the kept records are judged by the same rule (--bands off's).
head -n 100 "$T/t.jsonl" >"$T/base.jsonl"
tail -n +101 "$T/t.jsonl" >"$T/rest.jsonl"
run build "$T/b" -q "$T/base.jsonl"
run dedup --store "$T/b" -v "$T/rest.jsonl"
expect_status 0
expect_err_has "rule: k 7, min similarity 0.9, bands off"
cp "$T/out" "$T/store.out"
run dedup --store "$T/b" --bands off "$T/rest.jsonl"
expect_status 0
if cmp -s "$T/out" "$T/store.out"; then ok; else fail "dedup --store: --bands off changed the run"; fi

finish
