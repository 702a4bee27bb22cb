#!/usr/bin/env bash
# hostile.sh: what a hostile trial run found (issue 10, item 6), through the
# simstore command:
#  - build --replace refuses anything that is not a store (a file, an ordinary
#    or empty directory) and leaves it untouched; a build removes only the
#    STORE.tmp-XXXXXX directories of dead builds, never a user's STORE.tmp-*;
#  - STORE/ is STORE, for every command;
#  - a full disk (a 2 MiB tmpfs, where mount is permitted) is an error naming
#    "no space left on device", never a signal: a missing or sparse LMDB lock
#    file, a commit that runs out of room, every command at many fill levels;
#  - a failed automatic compaction after add or delete is reported (exit 1)
#    with the committed change;
#  - an immutable (chattr +i) or read-only data.mdb is named, with what to do;
#  - query --file DIR says "is a directory";
#  - every command fails (exit 1, with a message) when stdout cannot be
#    written (/dev/full);
#  - a long-running `query --queries -` follows build --replace;
#  - --memory takes K/M/G/T with optional i and B, and refuses more than the
#    machine has; --expected takes 2^20, 1e6, 1M.
. "$(dirname "$0")/lib.sh"

MNT="$T/mnt"
cleanup() {
    mountpoint -q "$MNT" 2>/dev/null && umount "$MNT"
    chattr -i "$T/imm/data.mdb" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT

printf 'a\t0123456789abcdef\nb\t0123456789abcdee\n' >"$T/ab.tsv"
printf 'c\t0123456789abcdef\n' >"$T/c.tsv"
printf '0123456789abcdef\ta\n0123456789abcdee\tb\n' >"$T/ab.fp"
# 500 documents whose records are long enough to need a few LMDB pages.
for ((i = 0; i < 500; i++)); do
    printf 'doc-%06d-padding-padding-padding\t%016x\n' "$i" $(((i * 0x9E3779B97F4A7C15) ^ (i << 7)))
done >"$T/d500.tsv"

# ---- build --replace refuses what is not a store ----------------------------
echo "my notes" >"$T/notes"
run build "$T/notes" --replace "$T/ab.tsv"
expect_status 1
expect_err_has "is not a simstore store (a regular file)"
[ "$(cat "$T/notes")" = "my notes" ] && ok || fail "build --replace changed a regular file"

mkdir "$T/photos" && echo jpeg >"$T/photos/a.jpg"
run build "$T/photos" --replace "$T/ab.tsv"
expect_status 1
expect_err_has "is not a simstore store"
[ "$(cat "$T/photos/a.jpg" 2>/dev/null)" = jpeg ] && ok || fail "build --replace removed a directory"

mkdir "$T/empty"
run build "$T/empty" --replace "$T/ab.tsv"
expect_status 1
[ -d "$T/empty" ] && ok || fail "build --replace removed an empty directory"

run build "$T/s" "$T/ab.tsv"
expect_status 0
run build "$T/s" --replace "$T/c.tsv"
expect_status 0
expect_out_has "built $T/s: 1 document"

# ---- a build removes only its own kind of leftovers -------------------------
mkdir "$T/s.tmp-mine" && echo thesis >"$T/s.tmp-mine/thesis.tex"
mkdir "$T/s.tmp-abc123" && echo keep >"$T/s.tmp-abc123/data.mdb"
echo file >"$T/s.tmp-abc124"
mkdir "$T/s.tmp-Dead01" && : >"$T/s.tmp-Dead01/build.tmp-marker" && : >"$T/s.tmp-Dead01/writer.lock"
run build "$T/s" --replace "$T/ab.tsv"
expect_status 0
[ "$(cat "$T/s.tmp-mine/thesis.tex" 2>/dev/null)" = thesis ] && ok || fail "a build removed s.tmp-mine"
[ "$(cat "$T/s.tmp-abc123/data.mdb" 2>/dev/null)" = keep ] && ok || fail "a build removed an unmarked s.tmp-abc123"
[ "$(cat "$T/s.tmp-abc124" 2>/dev/null)" = file ] && ok || fail "a build removed the file s.tmp-abc124"
[ ! -e "$T/s.tmp-Dead01" ] && ok || fail "a dead build's marked directory was not removed"
[ ! -e "$T/s/build.tmp-marker" ] && ok || fail "the marker was left in the store"
rm -rf "$T/s.tmp-mine" "$T/s.tmp-abc123" "$T/s.tmp-abc124"

# ---- STORE/ is STORE ----------------------------------------------------------
run build "$T/slash/" "$T/ab.tsv"
expect_status 0
expect_out_has "built $T/slash: 2 documents"
[ -d "$T/slash" ] && ok || fail "build STORE/ made no store"
run stats "$T/slash//"
expect_status 0
expect_out_has "store: $T/slash"
run query "$T/slash/" --fp 0123456789abcdef --k 0
expect_status 0
expect_out "-	a	0123456789abcdef	0"
run add "$T/slash/" "$T/c.tsv"
expect_status 0
expect_out_has "added 1 document to $T/slash "
run build "$T/slash/" --replace "$T/c.tsv"
expect_status 0
[ -z "$(ls -A "$T" | grep '^slash\.tmp-')" ] && ok || fail "build STORE/ left a temporary directory"

# ---- query --file DIR ---------------------------------------------------------
run query "$T/s" --file "$T/photos"
expect_status 1
grep -qi "is a directory" "$T/err" && ok || fail "query --file DIR does not say it is a directory"

# ---- stdout that cannot be written --------------------------------------------
if [ -w /dev/full ]; then
    for args in "stats $T/s" "stats $T/s --json" "distance 0123456789abcdef 0123456789abcdee" \
        "query $T/s --fp 0123456789abcdef" "query $T/s --queries $T/ab.tsv" \
        "fingerprint $T/notes" "pairs $T/ab.fp" "inspect $T/s" "verify $T/s" "--version" \
        "--help" "stats --help"; do
        # shellcheck disable=SC2086
        "$SIMSTORE" $args >/dev/full 2>"$T/err"
        status=$?
        [ "$status" = 1 ] && ok || fail "simstore $args >/dev/full: exit $status, not 1"
        grep -qi "no space left on device" "$T/err" && ok ||
            fail "simstore $args >/dev/full: no message ($(head -c 200 "$T/err"))"
    done
else
    echo "skipped: /dev/full is not writable here"
fi

# ---- a failed automatic compaction is reported ----------------------------------
# The add's commit is the first LMDB write transaction, the compaction's the
# second (SIMSTORE_FAULT counts them).
run build "$T/c" "$T/ab.tsv"
for ((i = 1; i <= 7; i++)); do
    printf 'x%d\t%016x\n' "$i" $((i * 7919 + 12345)) >"$T/x$i.tsv"
    run add "$T/c" -q "$T/x$i.tsv"
done
run stats "$T/c"
expect_out_has "segments: 8"
printf 'x8\t%016x\n' 99999 >"$T/x8.tsv"
SIMSTORE_FAULT=mdb_commit:2 "$SIMSTORE" add "$T/c" -q "$T/x8.tsv" >"$T/out" 2>"$T/err"
status=$?
expect_status 1
expect_out_has "added 1 document to $T/c"
expect_err_has "the add is committed, but the automatic compaction failed"
expect_err_has "injected failure"
run stats "$T/c"
expect_out_has "documents: 10"
expect_out_has "segments: 9"

for ((i = 0; i < 10; i++)); do printf 'd%d\t%016x\n' "$i" $((i * 104729 + 3)); done >"$T/ten.tsv"
run build "$T/d" "$T/ten.tsv"
SIMSTORE_FAULT=mdb_commit:2 "$SIMSTORE" delete "$T/d" d0 d1 d2 d3 d4 d5 >"$T/out" 2>"$T/err"
status=$?
expect_status 1
expect_out_has "deleted 6 documents from $T/d"
expect_err_has "the delete is committed, but the automatic compaction failed"
run stats "$T/d"
expect_out_has "documents: 4"
# Without a fault both compact, and --no-auto-compact still turns it off.
run delete "$T/d" d6
expect_status 0
expect_out_has "compacted"
run add "$T/c" -q --no-auto-compact "$T/ten.tsv"
expect_status 0
run stats "$T/c"
expect_out_has "segments: 10"

# ---- an immutable or read-only data.mdb ----------------------------------------
run build "$T/imm" "$T/ab.tsv"
if chattr +i "$T/imm/data.mdb" 2>/dev/null; then
    run add "$T/imm" "$T/c.tsv"
    expect_status 1
    expect_err_has "$T/imm/data.mdb is immutable"
    expect_err_has "chattr -i"
    run delete "$T/imm" a
    expect_status 1
    expect_err_has "immutable"
    run query "$T/imm" --fp 0123456789abcdef --k 0
    expect_status 0
    expect_out "-	a	0123456789abcdef	0"
    chattr -i "$T/imm/data.mdb"
else
    echo "skipped: chattr +i is not permitted here (not root, or the file system has no attributes)"
fi
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
    setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
    run build "$T/ro" "$T/ab.tsv"
    chmod 755 "$T"
    chown -R 65534:65534 "$T/ro"
    chmod 444 "$T/ro/data.mdb"
    setpriv --reuid=65534 --regid=65534 --clear-groups "$SIMSTORE" add "$T/ro" "$T/c.tsv" \
        >"$T/out" 2>"$T/err"
    status=$?
    expect_status 1
    expect_err_has "$T/ro/data.mdb is read-only for this user"
    expect_err_has "chmod u+w"
    chmod 700 "$T"
elif [ "$(id -u)" != 0 ]; then
    run build "$T/ro" "$T/ab.tsv"
    chmod 444 "$T/ro/data.mdb"
    run add "$T/ro" "$T/c.tsv"
    expect_status 1
    expect_err_has "$T/ro/data.mdb is read-only for this user"
else
    echo "skipped: cannot run as user nobody (setpriv)"
fi

# ---- query --queries - follows build --replace ---------------------------------
run build "$T/r" "$T/ab.tsv"
mkfifo "$T/queries"
coproc QUERY { "$SIMSTORE" query "$T/r" --queries - --format tsv --k 0 <"$T/queries" 2>"$T/query.err"; }
query_pid=$QUERY_PID # bash unsets QUERY_PID once it reaps the co-process
exec 7>"$T/queries"
printf 'q1\t0123456789abcdee\n' >&7
read -r -t 10 line <&"${QUERY[0]}"
[ "$line" = "q1	b	0123456789abcdee	0" ] && ok || fail "first answer: '$line'"
printf 'z\t0123456789abcdee\n' >"$T/z.tsv"
run build "$T/r" --replace "$T/z.tsv"
expect_status 0
printf 'q2\t0123456789abcdee\n' >&7
read -r -t 10 line <&"${QUERY[0]}"
[ "$line" = "q2	z	0123456789abcdee	0" ] && ok || fail "answer after build --replace: '$line' (the old store's?)"
exec 7>&-
wait "$query_pid"
status=$?
expect_status 0
grep -q "was replaced by another store" "$T/query.err" && ok || fail "no note of the reopen"

# ---- sizes and counts ------------------------------------------------------------
for size in 64M 64m 64Mi 64MiB 64mib 64MB 65536K 65536KiB 65536kb 0.0625G 2^26; do
    run build "$T/m" --memory "$size" -q "$T/ab.tsv"
    [ "$status" = 0 ] && ok || fail "--memory $size refused: $(cat "$T/err")"
    rm -rf "$T/m"
done
for size in 64Q 64MiBB 64iM 1.3K -5M 15M; do
    run build "$T/m" --memory "$size" -q "$T/ab.tsv"
    expect_status 2
    [ ! -e "$T/m" ] && ok || fail "--memory $size built a store"
done
machine_kib=$(awk '/^MemTotal:/ {m = $2} /^SwapTotal:/ {s = $2} END {print m + s}' /proc/meminfo)
if [ "$machine_kib" -lt $((1 << 30)) ]; then
    run build "$T/m" --memory 1T -q "$T/ab.tsv"
    expect_status 2
    expect_err_has "is more than this machine has"
fi
run build "$T/e0" --expected 1048576 -q "$T/ab.tsv"
expect_status 0
run stats "$T/e0"
grep '^design:' "$T/out" >"$T/design0"
for n in 2^20 1M 1Mi 1024K 1.048576e6; do
    run build "$T/e" --expected "$n" -q "$T/ab.tsv"
    [ "$status" = 0 ] && ok || fail "--expected $n refused: $(cat "$T/err")"
    run stats "$T/e"
    [ "$(grep '^design:' "$T/out")" = "$(cat "$T/design0")" ] && ok || fail "--expected $n planned another design"
    rm -rf "$T/e"
done
run build "$T/e" --expected 1e6 -q "$T/ab.tsv"
expect_status 0
rm -rf "$T/e"
gen="$(dirname "$SIMSTORE")/bench/gen_fingerprints"
if [ -x "$gen" ]; then
    [ "$("$gen" --count 1e3 --format hex | wc -l)" = 1000 ] && ok || fail "gen_fingerprints --count 1e3"
    [ "$("$gen" --count 2K --format hex | wc -l)" = 2048 ] && ok || fail "gen_fingerprints --count 2K"
fi

# ---- a full disk: errors, never signals ----------------------------------------
mkdir "$MNT"
if ! mount -t tmpfs -o size=2M tmpfs "$MNT" 2>"$T/mount.err"; then
    echo "skipped: full-disk checks: cannot mount a tmpfs ($(head -1 "$T/mount.err"); needs root)"
    finish
fi
# fill KIB: leave about KIB KiB free.
fill() {
    rm -f "$MNT/fill"
    local avail
    avail=$(df --output=avail -k "$MNT" | tail -1)
    if [ "$avail" -gt "$1" ]; then
        dd if=/dev/zero of="$MNT/fill" bs=1k count=$((avail - $1)) 2>/dev/null
    fi
}
# expect_no_signal WHAT: the last run exited 0 or 1; on 1 it said why, naming
# the full disk.
expect_full_error() {
    if [ "$status" -ge 128 ]; then
        fail "$1: killed by signal $((status - 128))"
    elif [ "$status" != 0 ] && ! grep -qi "no space left on device" "$T/err" "$T/out"; then
        fail "$1: exit $status without 'no space left on device'"
    else
        ok
    fi
}

# LMDB's lock file created on a full disk (LMDB only ftruncates it, then
# stores into the mapping: SIGBUS, in readers too).
run build "$MNT/s" --memory 16M -q "$T/d500.tsv"
rm "$MNT/s/lock.mdb"
fill 0
for args in "query $MNT/s --fp 0123456789abcdef" "stats $MNT/s" "add $MNT/s -q --memory 16M $T/c.tsv" \
    "inspect $MNT/s"; do
    # shellcheck disable=SC2086
    run $args
    expect_status 1
    expect_full_error "missing lock file, full disk: $args"
done
# A sparse lock file of the full size (a lock file made by ftruncate).
rm -f "$MNT/fill" "$MNT/s/lock.mdb"
truncate -s 65536 "$MNT/s/lock.mdb"
fill 0
run query "$MNT/s" --fp 0123456789abcdef
expect_status 1
expect_full_error "sparse lock file, full disk"

# A commit that runs out of room: LMDB says EIO; the message says why and
# names the store.
rm -rf "$MNT"/*
run build "$MNT/t" --memory 16M -q "$T/ab.tsv"
for ((i = 0; i < 3000; i++)); do printf 'id%06d-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\t%016x\n' "$i" $((i * 0x2545F4914F6CDD1D)); done >"$T/d3000.tsv"
committed_full=0
for free in 160 200 240 280; do
    fill "$free"
    run add "$MNT/t" -q --memory 16M "$T/d3000.tsv"
    expect_full_error "add with $free KiB free"
    if grep -q "LMDB" "$T/err"; then
        committed_full=1
        expect_err_has "$MNT/t"
        grep -qi "no space left on device" "$T/err" && ok || fail "commit on a full disk: $(cat "$T/err")"
    fi
done
[ "$committed_full" = 1 ] && ok || echo "note: no fill level made the commit itself run out of room"

# Every command at many fill levels.
for free in 0 8 16 32 64 96 128 192 256 384; do
    rm -rf "$MNT"/*
    "$SIMSTORE" build "$MNT/s" --memory 16M -q "$T/d500.tsv" >/dev/null 2>&1
    "$SIMSTORE" build "$MNT/p" --memory 16M -q "$T/d500.tsv" >/dev/null 2>&1
    rm -f "$MNT/p/lock.mdb"
    fill "$free"
    for args in "add $MNT/s -q --memory 16M $T/d3000.tsv" "delete $MNT/s doc-000001-padding-padding-padding" \
        "compact $MNT/s -q --memory 16M" "build $MNT/s --replace -q --memory 16M $T/d3000.tsv" \
        "build $MNT/n -q --memory 16M $T/d500.tsv" "query $MNT/p --queries $T/d500.tsv" \
        "stats $MNT/p" "verify $MNT/p" "inspect $MNT/p" "add $MNT/p -q --memory 16M $T/c.tsv"; do
        # shellcheck disable=SC2086
        run $args
        expect_full_error "$free KiB free: $args"
    done
done

finish
