#!/usr/bin/env bash
# batch.sh: `query --queries FILE` answered in batches: stdout byte-identical
# to the one-by-one path (--strategy one-by-one, and a pipe) for every
# --strategy, --threads 1 and 2 and a small --memory (many chunks), in every
# output mode (plain, --json, --json --meta, --end-marker, --skip-self), with
# bad lines reported as FILE:LINE and skipped; on a store of three segments
# with deleted documents (clustered, duplicate and uniform fingerprints) and
# on a store of near-duplicate texts with metadata and integer ids.
. "$(dirname "$0")/lib.sh"

# Fingerprints: clusters sharing prefixes (low nibbles changed), repeated
# ones, uniform ones; deterministic (awk's srand with a seed).
awk 'BEGIN {
    srand(12); hex = "0123456789abcdef"
    for (i = 0; i < 3000; i++) {
        if (i % 3 == 0 || i < 3) { s = ""; for (j = 0; j < 16; j++) s = s substr(hex, int(rand() * 16) + 1, 1) }
        else if (i % 3 == 1) { s = substr(prev, 1, 12); for (j = 0; j < 4; j++) s = s substr(hex, int(rand() * 16) + 1, 1) }
        else s = prev
        if (i % 30 == 0) prev = s
        printf "d%d\t%s\n", i, s
    }
}' >"$T/all.tsv"
head -n 1500 "$T/all.tsv" >"$T/one.tsv"
sed -n 1501,2250p "$T/all.tsv" >"$T/two.tsv"
sed -n 2251,3000p "$T/all.tsv" >"$T/three.tsv"
run build "$T/s" --k 4 "$T/one.tsv"
expect_status 0
run add "$T/s" --no-auto-compact "$T/two.tsv"
expect_status 0
run add "$T/s" --no-auto-compact "$T/three.tsv"
expect_status 0
awk 'NR % 9 == 0 { print $1 }' "$T/all.tsv" >"$T/gone.ids"
run delete "$T/s" --no-auto-compact --ids "$T/gone.ids"
expect_status 0

# Queries: stored fingerprints with a nibble changed, stored ones, random
# ones (as ids of stored documents, for --skip-self), and two bad lines.
awk -F'\t' 'BEGIN { srand(34); hex = "0123456789abcdef" }
{
    s = $2
    if (NR % 3 == 0) { p = int(rand() * 16) + 1; s = substr(s, 1, p - 1) substr(hex, int(rand() * 16) + 1, 1) substr(s, p + 1) }
    if (NR % 5 == 0) { s = ""; for (j = 0; j < 16; j++) s = s substr(hex, int(rand() * 16) + 1, 1) }
    printf "%s\t%s\n", $1, s
    if (NR == 700) print "bad\tzz"
    if (NR == 2999) print "worse"
}' "$T/all.tsv" >"$T/queries.tsv"
awk -F'\t' '{ printf "%s\t%s\n", $2, $1 }' "$T/queries.tsv" >"$T/queries.fp"

# compare STORE QUERIES FORMAT ARGS...: every way of answering gives the
# one-by-one path's stdout and exit status.
compare() {
    local store=$1 queries=$2 format=$3
    shift 3
    run query "$store" --queries "$queries" --strategy one-by-one "$@"
    cp "$T/out" "$T/want"
    local want_status=$status
    if [ -s "$T/want" ]; then ok; else fail "no answers for $*"; fi
    for way in "--strategy auto" "--strategy scan" "--strategy probe" "--threads 1" \
        "--threads 2 --strategy scan" "--memory 64K" "--memory 64K --strategy probe --threads 2"; do
        # shellcheck disable=SC2086
        run query "$store" --queries "$queries" $way "$@"
        if [ "$status" = "$want_status" ] && cmp -s "$T/out" "$T/want"; then ok; else
            fail "query $* $way: stdout or status ($status, want $want_status) differs"
            diff "$T/want" "$T/out" | head -5 >&2
        fi
    done
    # From a pipe, query by query (bad lines' messages name <stdin>).
    "$SIMSTORE" query "$store" --queries - --format "$format" "$@" <"$queries" 2>"$T/err" |
        sed "s|<stdin>|$queries|g" >"$T/out"
    status=${PIPESTATUS[0]}
    if [ "$status" = "$want_status" ] && cmp -s "$T/out" "$T/want"; then ok; else
        fail "query $* from a pipe differs"
    fi
}

for mode in "" "--json" "--end-marker" "--json --end-marker" "--skip-self" "--k 2"; do
    # shellcheck disable=SC2086
    compare "$T/s" "$T/queries.tsv" tsv $mode
done
compare "$T/s" "$T/queries.fp" fp --k 4 --end-marker

# Bad lines: reported as FILE:LINE, skipped, exit 1; the others answered.
run query "$T/s" --queries "$T/queries.tsv" --end-marker
expect_status 1
expect_err_has "$T/queries.tsv:701:"
expect_err_has "$T/queries.tsv:3001:"
n=$(grep -c '^\.$' "$T/out")
if [ "$n" = 3002 ]; then ok; else fail "expected 3002 end markers, got $n"; fi

# Near-duplicate texts with metadata and integer ids, two segments.
awk 'BEGIN {
    srand(56)
    split("river flood plan council vote farm town bank water survey rain field road bridge school", w, " ")
    for (i = 0; i < 300; i++) {
        if (i % 6 == 0) { base = ""; for (j = 0; j < 40; j++) base = base " " w[int(rand() * 15) + 1] }
        t = base; for (j = 0; j < i % 4; j++) t = t " " w[int(rand() * 15) + 1]
        id = (i % 2) ? i : "\"t" i "\""
        printf "{\"id\": %s, \"text\": \"%s\", \"meta\": {\"n\": %d, \"tag\": \"x%d\"}}\n", id, t, i, i % 7
    }
}' >"$T/docs.jsonl"
head -n 200 "$T/docs.jsonl" >"$T/docs1.jsonl"
tail -n 100 "$T/docs.jsonl" >"$T/docs2.jsonl"
run build "$T/t" --k 3 "$T/docs1.jsonl"
expect_status 0
run add "$T/t" --no-auto-compact "$T/docs2.jsonl"
expect_status 0
{ cat "$T/docs.jsonl"; echo '{"id": "broken", "text": '; } >"$T/tq.jsonl"
for mode in "--json --meta" "--json --meta --end-marker" "--skip-self" "--json --skip-self"; do
    # shellcheck disable=SC2086
    compare "$T/t" "$T/tq.jsonl" jsonl $mode
done

# Option errors.
run query "$T/s" --queries "$T/queries.tsv" --strategy fast
expect_status 2
expect_err_has "--strategy takes auto, scan, probe or one-by-one"
run query "$T/s" --queries "$T/queries.tsv" --memory 1K
expect_status 2
run query "$T/s" --queries "$T/queries.tsv" --threads 0
expect_status 2
finish
