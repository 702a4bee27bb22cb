#!/usr/bin/env bash
# crash.sh: the simstore command interrupted at every fault point and killed
# at random moments, for build, build --replace, add, delete and compact.
# After each interruption the store shows exactly the state before or after
# the command (stats and the answers for every document at k = 0) and
# `simstore verify` finds no error; an injected I/O error is reported (exit 1,
# one line) and changes nothing; a writer open leaves only the files of that
# state; the next build of a path leaves no STORE.tmp-* directory.
# (tests/store/test_crash.c does the same through the library, checking every
# point, with fingerprint-only stores and automatic compactions too.)
. "$(dirname "$0")/lib.sh"

SEED=${SIMSTORE_TEST_SEED:-4242}
echo "seed: $SEED (replay with SIMSTORE_TEST_SEED=$SEED)"
RANDOM=$SEED

# gen FIRST COUNT SEED: TSV documents doc-FIRST.. with seeded fingerprints;
# every fifth repeats the one before it.
gen() {
    awk -v first="$1" -v n="$2" -v seed="$3" 'BEGIN {
        srand(seed)
        for (i = 0; i < n; i++) {
            if (i % 5 != 4)
                fp = sprintf("%08x%08x", int(rand() * 4294967296), int(rand() * 4294967296))
            printf "doc-%07d\t%s\n", first + i, fp
        }
    }'
}
gen 0 300 "$SEED" >"$T/base.tsv"
gen 300 150 "$((SEED + 1))" >"$T/more.tsv"
gen 1000 250 "$((SEED + 2))" >"$T/other.tsv"
awk 'NR % 3 == 1 { print $1 }' "$T/base.tsv" >"$T/ids"
cat "$T/base.tsv" "$T/more.tsv" "$T/other.tsv" >"$T/all.tsv"
# --memory 16M: sorters size their buffers from the budget, and sanitized
# builds pay for every byte of a large allocation.
MEM=(--memory 16M)
BUILD_OPTS=(--k 3 --cjk bigram --threads 1 -q "${MEM[@]}")

# sig STORE: what a reader sees (counts and every answer), or "no store".
sig() {
    if [ ! -e "$1" ]; then
        echo "no store"
        return
    fi
    "$SIMSTORE" stats "$1" | grep -E '^(documents|fingerprints|segments):' || echo "stats failed"
    "$SIMSTORE" query "$1" --queries "$T/all.tsv" --k 0 || echo "query failed"
}
# files STORE: the store's entries.
files() { ls -A "$1" 2>/dev/null; }

# The command under test: simstore's arguments, @S@ for the store.
action=()
# setup_store DIR CMDS...: runs each CMD (simstore's arguments in one word,
# @S@ for the store DIR/s).
setup_store() {
    local dir=$1
    shift
    mkdir -p "$dir"
    local c
    for c in "$@"; do
        local args
        read -r -a args <<<"${c//@S@/$dir/s}"
        "$SIMSTORE" "${args[@]}" >/dev/null 2>"$T/setup.err" || {
            cat "$T/setup.err"
            echo "setup failed: $c"
            exit 1
        }
    done
}
reset_work() { # reset_work NAME
    rm -rf "$T/w"
    mkdir "$T/w"
    [ -e "$T/tpl-$1/s" ] && cp -a "$T/tpl-$1/s" "$T/w/s"
    return 0
}
run_action() { "$SIMSTORE" "${action[@]//@S@/$T/w/s}" >"$T/out" 2>"$T/err"; }

# state_of NAME: prints before or after (or nothing) for $T/w/s.
state_of() {
    sig "$T/w/s" >"$T/sig.now"
    if cmp -s "$T/sig.now" "$T/sig-$1-before"; then echo before
    elif cmp -s "$T/sig.now" "$T/sig-$1-after"; then echo after
    fi
}

# prepare NAME IS_BUILD SETUP...: makes the template store $T/tpl-NAME/s with
# the SETUP commands and records what the states before and after the action
# look like (sig) and hold (files).
prepare() {
    local name=$1 is_build=$2
    shift 2
    rm -rf "$T/tpl-$name"
    mkdir -p "$T/tpl-$name"
    [ "$#" -gt 0 ] && setup_store "$T/tpl-$name" "$@"
    sig "$T/tpl-$name/s" >"$T/sig-$name-before"
    files "$T/tpl-$name/s" >"$T/files-$name-before"
    reset_work "$name"
    local t0
    t0=$(date +%s%N)
    run_action || { cat "$T/err"; echo "clean $name failed"; exit 1; }
    action_ms=$((($(date +%s%N) - t0) / 1000000 + 1))
    sig "$T/w/s" >"$T/sig-$name-after"
    files "$T/w/s" >"$T/files-$name-after"
    cmp -s "$T/sig-$name-before" "$T/sig-$name-after" && { echo "$name changes nothing"; exit 1; }
}

# check_after NAME IS_BUILD STATUS WHAT: the checks after one interrupted run.
check_after() {
    local name=$1 is_build=$2 st=$3 what=$4 state
    state=$(state_of "$name")
    last_state=${state:-none}
    if [ -z "$state" ]; then
        fail "$name $what: the store is in neither the state before nor after"
        diff "$T/sig-$name-before" "$T/sig.now" | head -5 >&2
        return
    fi
    ok
    if [ "$st" = 0 ] && [ "$state" != after ]; then
        fail "$name $what: succeeded but the store is in the state before"
    fi
    if [ "$st" = 1 ]; then
        # A reported failure changed nothing and left nothing behind (or,
        # where fail_states allows "after", failed in a step after the
        # commit, as compact's rewrite of data.mdb, and said so).
        case " ${fail_states:-before} " in
            *" $state "*) ok ;;
            *) fail "$name $what: failed but changed the store" ;;
        esac
        [ "$(files "$T/w/s")" = "$(cat "$T/files-$name-$state")" ] && ok ||
            fail "$name $what: failed and left files behind"
        [ -z "$(ls -A "$T/w" | grep '^s\.tmp-')" ] && ok ||
            fail "$name $what: failed and left a s.tmp-* directory"
        return
    fi
    if [ -e "$T/w/s" ]; then
        # `simstore verify` finds no error (leftovers are warnings).
        "$SIMSTORE" verify "$T/w/s" --quiet >"$T/verify.out" 2>&1 && ok ||
            fail "$name $what: verify: $(head -3 "$T/verify.out")"
        # A writer open (deleting nothing) leaves only the state's files.
        "$SIMSTORE" delete "$T/w/s" --no-auto-compact no-such-document >/dev/null 2>&1 && ok ||
            fail "$name $what: writer open failed"
        [ "$(files "$T/w/s")" = "$(cat "$T/files-$name-$state")" ] && ok ||
            fail "$name $what: a writer open left other files than the $state state's"
    fi
    if [ "$is_build" = 1 ]; then
        local replace=()
        [ -e "$T/w/s" ] && replace=(--replace)
        run_action_again=("${action[@]//@S@/$T/w/s}" "${replace[@]}")
        "$SIMSTORE" "${run_action_again[@]}" >/dev/null 2>&1 && ok ||
            fail "$name $what: the next build failed"
        [ -z "$(ls -A "$T/w" | grep '^s\.tmp-')" ] && ok ||
            fail "$name $what: a s.tmp-* directory remains after the next build"
    fi
}

# The write and fsync crashes whose state is checked: every fourth
# (sampled, the sanitizer pass: every twelfth, of those run).
every=4
sampled && every=12
# sweep NAME IS_BUILD: every fault point as a crash, then as an I/O error.
sweep() {
    local name=$1 is_build=$2 op n calls summary=""
    for op in write fsync rename mdb_commit mdb_committed; do
        # As a crash at every call, until the command completes; the full
        # checks at every rename and commit point, and (the library test
        # checks every one) at the first two, every fourth (or eighth) and
        # the last write and fsync.
        # Sampled: the write and fsync crashes themselves at the first two
        # and every third call only, the last found by stepping back from
        # the first sampled call the command completed at.
        n=1
        calls=0
        while :; do
            if sampled && [ "$n" -gt 2 ] && [ $((n % 3)) != 0 ] &&
                { [ "$op" = write ] || [ "$op" = fsync ]; }; then
                n=$((n + 1))
                continue
            fi
            reset_work "$name"
            SIMSTORE_FAULT=$op:$n:crash run_action
            local st=$?
            if [ "$st" != 86 ] && [ "$st" != 0 ]; then
                fail "$name $op:$n:crash: exit status $st"
                break
            fi
            if [ "$st" = 0 ] || [ "$n" -le 2 ] || [ $((n % every)) = 0 ] ||
                { [ "$op" != write ] && [ "$op" != fsync ]; }; then
                check_after "$name" "$is_build" "$st" "$op:$n:crash"
            fi
            [ "$st" = 0 ] && break
            calls=$n
            n=$((n + 1))
            [ "$n" -gt 200 ] && { fail "$name $op: no end"; break; }
        done
        for ((n = n - 1; n > calls; n--)); do
            reset_work "$name"
            SIMSTORE_FAULT=$op:$n:crash run_action
            st=$?
            [ "$st" = 86 ] && { calls=$n; break; }
            [ "$st" = 0 ] || { fail "$name $op:$n:crash: exit status $st"; break; }
        done
        if [ "$calls" -gt 2 ] && [ $((calls % every)) != 0 ] &&
            { [ "$op" = write ] || [ "$op" = fsync ]; }; then
            reset_work "$name"
            SIMSTORE_FAULT=$op:$calls:crash run_action
            check_after "$name" "$is_build" $? "$op:$calls:crash"
        fi
        summary="$summary $op $calls"
        [ "$op" = mdb_committed ] && continue
        # As an I/O error at the first and the last of those calls (the
        # library test sweeps every one).
        for n in $(printf '%s\n' 1 "$calls" | sort -nu); do
            [ "$n" -ge 1 ] || continue
            reset_work "$name"
            SIMSTORE_FAULT=$op:$n run_action
            local st=$?
            # 1, or 0 when the failure came after the commit point (a
            # directory fsync after removing a compaction's old files).
            if [ "$st" != 1 ] && [ "$st" != 0 ]; then
                fail "$name $op:$n: exit status $st"
                continue
            fi
            check_after "$name" "$is_build" "$st" "$op:$n"
            [ "$st" = 0 ] && continue
            # The one line the user sees, e.g. "simstore add: nothing added
            # to STORE: write STORE/s0000000002-t001.tbl.tmp-...: Input/output error".
            [ "$(wc -l <"$T/err")" = 1 ] && grep -q "^simstore ${action[0]}: ." "$T/err" && ok ||
                fail "$name $op:$n: no one-line error message"
        done
    done
    echo "$name:$summary"
}

action=(build @S@ "${BUILD_OPTS[@]}" "$T/base.tsv")
prepare build 1
sweep build 1

action=(build @S@ --replace "${BUILD_OPTS[@]}" "$T/other.tsv")
prepare replace 1 "build @S@ --k 3 --cjk bigram --threads 1 -q --memory 16M $T/base.tsv"
sweep replace 1

action=(add @S@ --no-auto-compact --threads 1 -q "${MEM[@]}" "$T/more.tsv")
prepare add 0 "build @S@ --k 3 --cjk bigram --threads 1 -q --memory 16M $T/base.tsv"
sweep add 0

action=(delete @S@ --no-auto-compact --ids "$T/ids")
prepare delete 0 "build @S@ --k 3 --cjk bigram --threads 1 -q --memory 16M $T/base.tsv" \
    "add @S@ --no-auto-compact -q --memory 16M $T/more.tsv"
sweep delete 0

action=(compact @S@ --threads 1 -q "${MEM[@]}")
prepare compact 0 "build @S@ --k 3 --cjk bigram --threads 1 -q --memory 16M $T/base.tsv" \
    "add @S@ --no-auto-compact -q --memory 16M $T/more.tsv" "delete @S@ --no-auto-compact --ids $T/ids"
sweep compact 0

# compact, then the rewrite of data.mdb without its free pages (a directory
# swap): a failure in the rewrite leaves the compacted store, and says so.
action=(compact @S@ --shrink --threads 1 -q "${MEM[@]}")
prepare compact-shrink 0 "build @S@ --k 3 --cjk bigram --threads 1 -q --memory 16M $T/base.tsv" \
    "add @S@ --no-auto-compact -q --memory 16M $T/more.tsv" "delete @S@ --no-auto-compact --ids $T/ids"
fail_states="before after"
sweep compact-shrink 0
fail_states=""

# SIGKILL at random moments of commands on larger inputs.
gen 0 30000 "$((SEED + 3))" >"$T/big.tsv"
gen 30000 30000 "$((SEED + 4))" >"$T/big2.tsv"
cat "$T/big.tsv" "$T/big2.tsv" >"$T/all.tsv"
awk 'NR % 2 == 0 { print $1 }' "$T/big.tsv" >"$T/ids"
trials=6
sampled && trials=3
kills() { # kills NAME IS_BUILD TRIALS
    local name=$1 is_build=$2 i killed=0 st before=0 after=0
    for ((i = 0; i < $3; i++)); do
        reset_work "$name"
        # simstore itself in the background (not a function: $! would be a
        # subshell, and killing it would leave simstore running).
        "$SIMSTORE" "${action[@]//@S@/$T/w/s}" >"$T/out" 2>"$T/err" &
        local pid=$!
        # Stratified over the clean run's duration and a little past it.
        local slice=$((action_ms * 13 / 10 / $3 + 1))
        local ms=$((slice * i + RANDOM % slice))
        sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        st=$?
        [ "$st" = 137 ] && killed=$((killed + 1))
        if [ "$st" != 137 ] && [ "$st" != 0 ]; then
            fail "$name kill trial $i: exit status $st"
            continue
        fi
        check_after "$name" "$is_build" "$st" "kill trial $i"
        [ "$last_state" = before ] && before=$((before + 1))
        [ "$last_state" = after ] && after=$((after + 1))
    done
    echo "$name (~$action_ms ms): $3 kill trials, $killed killed: $before before, $after after"
}
action=(build @S@ --replace "${BUILD_OPTS[@]}" "$T/big2.tsv")
prepare kill-replace 1 "build @S@ --k 3 --cjk bigram -q --memory 16M $T/big.tsv"
kills kill-replace 1 "$trials"
action=(add @S@ -q "${MEM[@]}" "$T/big2.tsv")
prepare kill-add 0 "build @S@ --k 3 --cjk bigram -q --memory 16M $T/big.tsv"
kills kill-add 0 "$trials"
action=(delete @S@ --ids "$T/ids")
prepare kill-delete 0 "build @S@ --k 3 --cjk bigram -q --memory 16M $T/big.tsv" "add @S@ --no-auto-compact -q --memory 16M $T/big2.tsv"
kills kill-delete 0 "$trials"
action=(compact @S@ --shrink -q "${MEM[@]}")
prepare kill-shrink 0 "build @S@ --k 3 --cjk bigram -q --memory 16M $T/big.tsv" \
    "add @S@ --no-auto-compact -q --memory 16M $T/big2.tsv" "delete @S@ --no-auto-compact --ids $T/ids"
kills kill-shrink 0 "$trials"
finish
