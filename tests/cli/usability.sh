#!/usr/bin/env bash
# usability.sh: what a user meets on the way: each path named once in
# messages, --replace named where it is needed, --help saying that standard
# input needs --format, singular counts, adds and deletes saying when they
# compacted, add --skip-existing and the report of every clashing id, query
# answers flushed to a co-process with an end marker, and delete --ids with a
# byte-order mark and ids that hold terminal escapes.
. "$(dirname "$0")/lib.sh"

# expect_err_names_once TEXT: stderr holds TEXT exactly once.
expect_err_names_once() {
    local n
    n=$(grep -o -F -- "$1" "$T/err" | wc -l)
    if [ "$n" = 1 ]; then ok; else fail "stderr names '$1' $n times, not once"; fi
}

printf 'a\t0000000000000001\nb\t0000000000000003\n' >"$T/ab.tsv"
run build "$T/s" "$T/ab.tsv"
expect_status 0

# ---- 1. every path once ------------------------------------------------------
for cmd in "query @ --fp 0000000000000001" "stats @" "add @ $T/ab.tsv" "delete @ a" "compact @" \
           "inspect @" "verify @" "dump @"; do
    # shellcheck disable=SC2086
    run ${cmd//@/$T/nostore}
    expect_status 1
    expect_err_names_once "$T/nostore"
done
run query "$T/nostore" --fp 0000000000000001
expect_err_has "simstore query: $T/nostore: no such store"
mkdir "$T/bad" && printf 'xx' >"$T/bad/data.mdb"
for cmd in "query @ --fp 0000000000000001" "stats @" "add @ $T/ab.tsv" "delete @ a" "compact @" \
           "inspect @"; do
    # shellcheck disable=SC2086
    run ${cmd//@/$T/bad}
    expect_status 1
    expect_err_names_once "$T/bad"
done
# The library's detail starts with the path: "S not created: why", once.
exec 9>"$T/s/writer.lock"
flock 9
run build "$T/s" --replace "$T/ab.tsv"
exec 9>&-
expect_status 1
expect_err_has "simstore build: $T/s not created: another writer holds the store"
expect_err_names_once "$T/s"
printf 'not a table' >"$T/x.tbl"
for cmd in dump inspect; do
    run "$cmd" "$T/x.tbl"
    expect_status 1
    expect_err_names_once "$T/x.tbl"
done

# ---- 2. --replace named -------------------------------------------------------
run build "$T/s" "$T/ab.tsv"
expect_status 1
expect_err_has "simstore build: $T/s already exists; use --replace to replace it"
expect_err_names_once "$T/s"

# ---- 3. standard input needs --format, and --help says so -------------------------
for cmd in build add query; do
    run "$cmd" --help
    expect_status 0
    if tr '\n' ' ' <"$T/out" | tr -s ' ' | grep -qF "standard input, which has no extension: give --format with it"; then
        ok
    else
        fail "$cmd --help does not say that standard input needs --format"
    fi
done
run_in "$T/ab.tsv" query "$T/s" --queries -
expect_status 2
expect_err_has "standard input ('-') needs --format tsv|fp|jsonl"

# ---- 4. singular counts -------------------------------------------------------------
printf 'only\t00000000000000ff\n' >"$T/one.tsv"
run build "$T/one" "$T/one.tsv"
expect_status 0
expect_out_has "built $T/one: 1 document, 1 distinct fingerprint;"
# Documents in LMDB (added, not yet compacted), so that verify counts an fps entry.
changes_store "$T/onel" "$T/one.tsv" || fail "changes_store one"
run verify "$T/onel"
expect_status 0
expect_out_has ", 1 document, 1 fps entry, "
printf 'second\t0f000000000000ff\n' >"$T/second.tsv"
run add "$T/one" "$T/second.tsv"
expect_status 0
expect_out "added 1 document to $T/one (1 new fingerprint); now 2 documents, 2 fingerprints in 2 segments"
run delete "$T/one" --no-auto-compact second
expect_status 0
expect_out "deleted 1 document from $T/one (0 not found)"
run compact "$T/one"
expect_status 0
expect_out "compacted $T/one: 2 segments -> 1, 1 dead fingerprint dropped"
printf '0000000000000001\n' >"$T/one.hex"
run build "$T/h" --fingerprint-only "$T/one.hex"
expect_status 0
expect_out_has "built $T/h: 1 distinct fingerprint;"

# ---- 5. add and delete say when they compacted -------------------------------------
# Fingerprints far apart: d<i> is the digit i sixteen times.
printf 'd0\t0000000000000000\n' >"$T/d0.tsv"
run build "$T/c" "$T/d0.tsv"
expect_status 0
for i in 1 2 3 4 5 6 7; do
    printf 'd%s\t%s\n' "$i" "$(printf "$i%.0s" {1..16})" >"$T/d$i.tsv"
    run add "$T/c" --no-auto-compact "$T/d$i.tsv"
    expect_status 0
done
expect_out_has "now 8 documents, 8 fingerprints in 8 segments"
printf 'd8\t8888888888888888\n' >"$T/d8.tsv"
run add "$T/c" "$T/d8.tsv"
expect_status 0
expect_out "added 1 document to $T/c (1 new fingerprint); now 9 documents, 9 fingerprints in 1 segment; compacted 9 segments -> 1, 0 dead fingerprints dropped"
run delete "$T/c" d0 d1 d2 d3 d4
expect_status 0
expect_out "deleted 5 documents from $T/c (0 not found); compacted 1 segment -> 1, 5 dead fingerprints dropped"
run delete "$T/c" d5
expect_status 0
expect_out "deleted 1 document from $T/c (0 not found)"

# ---- 6. add: every clash reported, or skipped with --skip-existing ------------------------
printf 'x\t00000000000000f0\na\t0000000000000002\nx\t00000000000000f1\ny\t00000000000000f2\nb\t0000000000000004\n' \
    >"$T/clash.tsv"
run add "$T/s" "$T/clash.tsv"
expect_status 1
expect_err_has "simstore add: $T/clash.tsv:2: document id 'a' is already in the store"
expect_err_has "simstore add: $T/clash.tsv:5: document id 'b' is already in the store"
expect_err_has "simstore add: $T/clash.tsv:3: duplicate document id 'x' (first at $T/clash.tsv:1)"
expect_err_has "simstore add: nothing added to $T/s: 3 document ids given twice or already in the store"
expect_err_has "simstore add: use --skip-existing to add the other documents"
run stats "$T/s"
expect_out_has "documents: 2"
run add "$T/s" --skip-existing "$T/clash.tsv"
expect_status 0
expect_err_empty
expect_out "added 2 documents to $T/s (2 new fingerprints); skipped 3 (2 already stored, 1 repeated); now 4 documents, 4 fingerprints in 2 segments"
# The first x is kept; a and b keep their stored fingerprints.
run query "$T/s" --fp 00000000000000f0 --k 0
expect_out "-	x	00000000000000f0	0"
run query "$T/s" --fp 00000000000000f1 --k 0
expect_out ""
run query "$T/s" --fp 0000000000000001 --k 0
expect_out "-	a	0000000000000001	0"
# Again: everything is skipped, nothing changes.
run add "$T/s" --skip-existing "$T/clash.tsv"
expect_status 0
expect_out_has "added 0 documents to $T/s (0 new fingerprints); skipped 5 (4 already stored, 1 repeated); now 4 documents"
# More than 20 clashes: 20 listed, then how many more.
for i in $(seq 1 25); do printf 'n%s\t%016x\n' "$i" "$i"; done >"$T/many.tsv"
run add "$T/s" "$T/many.tsv"
expect_status 0
run add "$T/s" "$T/many.tsv"
expect_status 1
n=$(grep -c "is already in the store" "$T/err")
if [ "$n" = 20 ]; then ok; else fail "expected 20 clash lines, got $n"; fi
expect_err_has "simstore add: 5 more clashing ids not listed; use --skip-existing to add the other documents"
# A build names every duplicate too.
printf 'p\t0000000000000001\np\t0000000000000002\nq\t0000000000000003\nq\t0000000000000004\n' >"$T/dups.tsv"
run build "$T/dups" "$T/dups.tsv"
expect_status 1
expect_err_has "$T/dups.tsv:2: duplicate document id 'p' (first at $T/dups.tsv:1)"
expect_err_has "$T/dups.tsv:4: duplicate document id 'q' (first at $T/dups.tsv:3)"
expect_err_has "$T/dups not created: 2 document ids given twice"

# ---- 8. query --queries - as a co-process ------------------------------------------
# Each answer must arrive before the next query is written: the reads time out
# (and the test fails) if the answer sits in a buffer.
run build "$T/co" "$T/ab.tsv"
expect_status 0
coproc Q { "$SIMSTORE" query "$T/co" --queries - --format tsv --end-marker 2>"$T/co.err"; }
# Bash unsets Q_PID once it reaps the co-process, which may be before the
# wait below: keep the pid (wait still gives its status).
q_pid=$Q_PID
answer() {
    local line got=""
    while IFS= read -r -t 10 line <&"${Q[0]}"; do
        [ "$line" = . ] && { printf '%s' "$got"; return 0; }
        got="$got$line;"
    done
    printf '%s' "$got<timeout>"
}
printf 'q1\t0000000000000001\n' >&"${Q[1]}"
got=$(answer)
if [ "$got" = "q1	a	0000000000000001	0;q1	b	0000000000000003	1;" ]; then ok; else fail "co-process answer 1: $got"; fi
printf 'q2\tffff0000ffff0000\n' >&"${Q[1]}"
got=$(answer)
if [ "$got" = "" ]; then ok; else fail "co-process answer 2 (no match): $got"; fi
printf 'not a query\n' >&"${Q[1]}"
got=$(answer)
if [ "$got" = "" ]; then ok; else fail "co-process answer 3 (a bad line): $got"; fi
exec {Q[1]}>&-
wait "$q_pid"
if [ "$?" = 1 ] && grep -qF "<stdin>:3:" "$T/co.err"; then ok; else fail "co-process exit or message"; fi

# Without --end-marker the answer still arrives at once.
coproc Q { "$SIMSTORE" query "$T/co" --queries - --format tsv --k 0; }
q_pid=$Q_PID
printf 'q1\t0000000000000003\n' >&"${Q[1]}"
if IFS= read -r -t 10 line <&"${Q[0]}" && [ "$line" = "q1	b	0000000000000003	0" ]; then ok; else fail "unflushed answer"; fi
exec {Q[1]}>&-
wait "$q_pid"

# --json --end-marker: one record per query, empty ones too; --json alone unchanged.
printf 'q1\t0000000000000001\nq2\tffff0000ffff0000\n' >"$T/q.tsv"
run query "$T/co" --queries "$T/q.tsv" --json --end-marker --k 1
expect_status 0
expect_out '{"query":"q1","matches":[{"id":"a","fp":"0000000000000001","distance":0},{"id":"b","fp":"0000000000000003","distance":1}]}
{"query":"q2","matches":[]}'
run query "$T/co" --queries "$T/q.tsv" --json --k 1
expect_out '{"query":"q1","id":"a","fp":"0000000000000001","distance":0}
{"query":"q1","id":"b","fp":"0000000000000003","distance":1}'
run query "$T/co" --fp ffff0000ffff0000 --end-marker
expect_out "."

# ---- 9. delete --ids: a byte-order mark, and ids with terminal escapes -----------------
printf '\357\273\277a\nzz\033[31mred\n' >"$T/ids"
run delete "$T/co" --ids "$T/ids"
expect_status 0
expect_out "deleted 1 document from $T/co (1 not found)"
expect_err_has 'simstore delete: warning: no document '"'"'zz\x1B[31mred'"'"
if grep -q $'\033' "$T/err"; then fail "a raw escape reached stderr"; else ok; fi
run query "$T/co" --fp 0000000000000001 --k 0
expect_out ""
run delete "$T/co" $'b\302\233c'
expect_status 0
expect_err_has 'no document '"'"'b\xC2\x9Bc'"'"

finish
