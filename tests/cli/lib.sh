# lib.sh: assertions for the CLI test scripts. Source it after setting
# SIMSTORE (the binary under test, the script's first argument).
set -u
SIMSTORE=${1:?usage: $0 PATH/TO/simstore}
SRC=${SIMSTORE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$(mktemp -d "${TMPDIR:-/tmp}/simstore-cli-XXXXXX")
trap 'rm -rf "$T"' EXIT
failures=0
checks=0

# dense: SIMSTORE_DENSE is set (sweep everything); sampled: SIMSTORE_SAMPLED
# is set and SIMSTORE_DENSE is not (the sanitizer pass of tests/run.sh takes
# a smaller sample); as test_dense() and test_sampled() in tests/common.
dense() { [ -n "${SIMSTORE_DENSE:-}" ] && [ "$SIMSTORE_DENSE" != 0 ]; }
sampled() { [ -n "${SIMSTORE_SAMPLED:-}" ] && [ "$SIMSTORE_SAMPLED" != 0 ] && ! dense; }

# run ARGS...: run simstore with ARGS, capturing $T/out, $T/err and $status.
# changes_store STORE INPUT [BUILD OPTIONS...]: a store whose documents are
# all changes in LMDB (docs and fps), none yet in a document file: built
# empty with the options, then INPUT added without compaction
# (format/store.md, "Document files"). The empty input takes INPUT's
# extension.
changes_store() {
    local store=$1 input=$2
    shift 2
    local empty
    empty=$(mktemp "$T/empty-XXXXXX")
    mv "$empty" "$empty.${input##*.}"
    "$SIMSTORE" build "$store" -q "$@" "$empty.${input##*.}" >/dev/null &&
        "$SIMSTORE" add "$store" -q --no-auto-compact "$input" >/dev/null
}
run() {
    "$SIMSTORE" "$@" >"$T/out" 2>"$T/err"
    status=$?
}
# run_in FILE ARGS...: like run, with FILE on stdin.
run_in() {
    local input=$1
    shift
    "$SIMSTORE" "$@" <"$input" >"$T/out" 2>"$T/err"
    status=$?
}
fail() {
    failures=$((failures + 1))
    echo "FAIL (line ${BASH_LINENO[1]:-?}): $*" >&2
    echo "  --- stdout:" >&2; head -c 2000 "$T/out" >&2
    echo "  --- stderr:" >&2; head -c 2000 "$T/err" >&2
}
ok() { checks=$((checks + 1)); }
expect_status() {
    if [ "$status" = "$1" ]; then ok; else fail "expected exit $1, got $status"; fi
}
expect_out() {
    if [ "$(cat "$T/out")" = "$1" ]; then ok; else fail "stdout differs; expected:
$1"; fi
}
expect_out_has() {
    if grep -qF -- "$1" "$T/out"; then ok; else fail "stdout lacks: $1"; fi
}
expect_err_has() {
    if grep -qF -- "$1" "$T/err"; then ok; else fail "stderr lacks: $1"; fi
}
expect_err_empty() {
    if [ ! -s "$T/err" ]; then ok; else fail "stderr is not empty"; fi
}
expect_out_lines() {
    local n
    n=$(wc -l <"$T/out")
    if [ "$n" = "$1" ]; then ok; else fail "expected $1 stdout lines, got $n"; fi
}
finish() {
    echo "$checks checks, $failures failures"
    [ "$failures" = 0 ]
    exit $?
}
