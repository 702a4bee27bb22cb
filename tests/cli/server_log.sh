#!/usr/bin/env bash
# server_log.sh: what a killed server leaves in its write-ahead log survives
# every command run after it (reliability trial, defects 1, 2, 3): compact
# (plain and --shrink) and build --replace, add, delete and dedup --add
# apply the log first or refuse; the next serve puts nothing older back;
# stats and verify report pending changes; a damaged log is an error that
# leaves the file as it is, never a silent truncation. Needs curl.
. "$(dirname "$0")/lib.sh" "$1"

if ! command -v curl >/dev/null 2>&1; then
    echo "server_log.sh: curl is not installed (.ci/install-deps installs it)" >&2
    exit 1
fi

PID=
PORT=
# serve STORE: start a server on a free port; PORT and PID are set once it
# listens (its first line says where).
serve() {
    rm -f "$T/serve.out"
    "$SIMSTORE" serve "$1" --listen 127.0.0.1:0 --log /dev/null >"$T/serve.out" 2>"$T/serve.err" &
    PID=$!
    local line=
    for _ in $(seq 1 500); do
        line=$(head -n 1 "$T/serve.out" 2>/dev/null)
        case "$line" in *listening*) break ;; esac
        kill -0 "$PID" 2>/dev/null || break
        sleep 0.02
    done
    PORT=$(printf '%s' "$line" | sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p')
    [ -n "$PORT" ] || { fail "serve $1 did not start: $(cat "$T/serve.err")"; return 1; }
}
kill9() {
    kill -9 "$PID" 2>/dev/null
    wait "$PID" 2>/dev/null
}
stop() {
    kill "$PID" 2>/dev/null
    wait "$PID" 2>/dev/null
}
post() {
    curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/v1/documents" -d "$1"
}
# acked N PREFIX: N inserts PREFIX1..PREFIXN, each answered 201.
acked() {
    local n=0 i
    for i in $(seq 1 "$1"); do
        [ "$(post "{\"id\":\"$2$i\",\"fp\":\"$(printf '%016x' $((i * 977)))\"}")" = 201 ] &&
            n=$((n + 1))
    done
    [ "$n" = "$1" ] && ok || fail "$n of $1 inserts answered 201"
}
# have STORE PREFIX N: every PREFIX1..PREFIXN is in the store.
have() {
    local i ids=()
    for i in $(seq 1 "$3"); do ids+=("$2$i"); done
    run get "$1" "${ids[@]}"
    expect_status 0
    expect_out_lines "$3"
}
printf 'a\t0123456789abcdef\n' >"$T/in.tsv"

# Defect 1: compact --shrink (and a plain compact) after a crash.
for how in --shrink ""; do
    rm -rf "$T/w.store"
    "$SIMSTORE" build -q "$T/w.store" "$T/in.tsv"
    serve "$T/w.store" || continue
    acked 20 ack
    kill9
    run stats "$T/w.store"
    expect_out_has "write-ahead log:"
    expect_out_has "20 pending changes"
    run verify "$T/w.store"
    expect_status 0
    expect_out_has "20 log records (20 pending)"
    # shellcheck disable=SC2086
    run compact $how "$T/w.store"
    expect_status 0
    expect_err_has "first applied 20 changes that a server acknowledged"
    [ -f "$T/w.store/live.wal" ] && ok || fail "compact $how dropped live.wal"
    have "$T/w.store" ack 20
    serve "$T/w.store" || continue
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/v1/documents/ack20")" = 200 ] &&
        ok || fail "ack20 not served after compact $how"
    stop
    run stats "$T/w.store"
    expect_out_has "0 pending changes"
done

# Defect 2: CLI writers after a crash act on the whole store, and the next
# serve puts nothing back.
rm -rf "$T/w.store"
"$SIMSTORE" build -q "$T/w.store" "$T/in.tsv"
serve "$T/w.store"
post '{"id":"X","fp":"aaaaaaaaaaaaaaaa"}' >/dev/null
post '{"id":"Y","fp":"bbbbbbbbbbbbbbbb"}' >/dev/null
post '{"id":"Z","fp":"cccccccccccccccc"}' >/dev/null
kill9
printf 'W\tdddddddddddddddd\n' >"$T/w.tsv"
run add "$T/w.store" "$T/w.tsv"
expect_status 0
expect_err_has "first applied 3 changes"
run delete "$T/w.store" Y
expect_status 0
expect_out_has "deleted 1 document"
printf 'X\teeeeeeeeeeeeeeee\n' >"$T/x.tsv"
run add "$T/w.store" "$T/x.tsv"
expect_status 1
expect_err_has "document id 'X' is already in the store"
serve "$T/w.store"
stop
run get "$T/w.store" X Z W
expect_status 0
expect_out_has "X	aaaaaaaaaaaaaaaa"
expect_out_has "W	dddddddddddddddd"
run get "$T/w.store" Y
expect_status 1

# dedup --add after a crash applies the log first too.
serve "$T/w.store"
post '{"id":"V","fp":"1111111111111111"}' >/dev/null
kill9
printf '{"id":"new","text":"a text of its own for the dedup pass"}\n' >"$T/d.jsonl"
run dedup --store "$T/w.store" --add "$T/d.jsonl"
expect_err_has "first applied 1 change"
run get "$T/w.store" V
expect_status 0

# build --replace refuses while the log holds changes, and says how.
serve "$T/w.store"
post '{"id":"R","fp":"2222222222222222"}' >/dev/null
kill9
run build -q --replace "$T/w.store" "$T/in.tsv"
expect_status 1
expect_err_has "replacing the store is refused"
run get "$T/w.store" R
expect_status 1 # still only in the log
run compact "$T/w.store"
expect_status 0
run get "$T/w.store" R
expect_status 0
run build -q --replace "$T/w.store" "$T/in.tsv"
expect_status 0

# So does build --shards --replace, of a shard a server held.
"$SIMSTORE" build -q --shards 2 "$T/sh.store" "$T/in.tsv"
serve "$T/sh.store/shard-0001"
post '{"id":"S","fp":"3333333333333333"}' >/dev/null
kill9
run build -q --shards 2 --replace "$T/sh.store" "$T/in.tsv"
expect_status 1
expect_err_has "replacing the sharded store is refused"
[ -f "$T/sh.store/MANIFEST" ] && ok || fail "the refused replace unpublished the sharded store"

# Defect 3: one flipped bit in the log's tenth record, far from its end:
# an error naming the offset, the file left as it is, nothing lost.
rm -rf "$T/w.store"
"$SIMSTORE" build -q "$T/w.store" "$T/in.tsv"
serve "$T/w.store"
acked 100 ack
kill9
cp "$T/w.store/live.wal" "$T/wal.before"
b=$(od -An -tu1 -j 520 -N1 "$T/w.store/live.wal" | tr -d ' ')
printf "\\$(printf %o $((b ^ 1)))" | dd of="$T/w.store/live.wal" bs=1 seek=520 conv=notrunc 2>/dev/null
cp "$T/w.store/live.wal" "$T/wal.damaged"
run verify "$T/w.store"
expect_status 1
expect_out_has "damaged record at byte"
run stats "$T/w.store"
expect_status 0
expect_out_has "DAMAGED"
"$SIMSTORE" serve "$T/w.store" --listen 127.0.0.1:0 --log /dev/null >"$T/out" 2>"$T/err"
status=$?
expect_status 1
expect_err_has "live.wal: damaged record at byte"
run add "$T/w.store" "$T/w.tsv"
expect_status 1
expect_err_has "so it was acknowledged"
cmp -s "$T/w.store/live.wal" "$T/wal.damaged" && ok || fail "the damaged log was changed"
# Restored, everything is there.
cp "$T/wal.before" "$T/w.store/live.wal"
run compact "$T/w.store"
expect_status 0
have "$T/w.store" ack 100

finish
