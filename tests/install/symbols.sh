#!/usr/bin/env bash
# symbols.sh: the names libsimstore gives the world (lib/README.md, "Names
# and visibility"):
#  1. every function simstore.h and simstore_unstable.h declare is marked SIMSTORE_API;
#  2. libsimstore.so exports exactly those functions (nm -D --defined-only):
#     nothing internal leaks, nothing public is missing;
#  3. every global symbol defined in libsimstore.a starts with simstore_ (and
#     is then one of those functions) or sims_: nothing unprefixed that a
#     static link could clash with;
#  4. neither library carries the test-only fault hooks (SIMSTORE_FAULT).
# Usage: symbols.sh SOURCE_DIR LIBSIMSTORE_SO LIBSIMSTORE_A
set -euo pipefail
src=${1:?usage: symbols.sh SOURCE_DIR LIBSIMSTORE_SO LIBSIMSTORE_A}
so=${2:?usage: symbols.sh SOURCE_DIR LIBSIMSTORE_SO LIBSIMSTORE_A}
archive=${3:?usage: symbols.sh SOURCE_DIR LIBSIMSTORE_SO LIBSIMSTORE_A}
headers=("$src/lib/include/simstore.h" "$src/lib/include/simstore_unstable.h")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
fail() {
    echo "symbols.sh: $*" >&2
    status=1
}

# 1. Function declarations start at column 0 with their return type; the
# name is on the first line, or at the start of the second.
decl='^[A-Za-z_][A-Za-z0-9_ ]*[ *]simstore_[a-z0-9_]+\('
grep -hE "$decl" "${headers[@]}" | grep -vE '^(SIMSTORE_API |typedef |static )' >"$tmp/unmarked" || true
# ... or the name at the start of a line, under a line that is not SIMSTORE_API's.
awk '/^simstore_[a-z0-9_]+\(/ && prev !~ /^SIMSTORE_API / { print } { prev = $0 }' "${headers[@]}" \
    >>"$tmp/unmarked"
if [ -s "$tmp/unmarked" ]; then
    fail "simstore.h declares functions without SIMSTORE_API:"
    sed 's/^/    /' "$tmp/unmarked" >&2
fi
# A declaration whose name does not fit on the SIMSTORE_API line (a long
# return type) carries it at the start of the next line.
awk '/^SIMSTORE_API / { line = $0; if (line !~ /\(/ && (getline next_line) > 0) line = line " " next_line; print line }' \
    "${headers[@]}" | grep -oE 'simstore_[a-z0-9_]+\(' | tr -d '(' | sort -u >"$tmp/api"
[ -s "$tmp/api" ] || fail "no SIMSTORE_API declaration found in ${headers[*]}"

# 2. The shared library's dynamic symbol table.
nm -D --defined-only "$so" | awk 'NF == 3 { print $3 }' | sort -u >"$tmp/exported"
comm -13 "$tmp/api" "$tmp/exported" >"$tmp/leaked"
comm -23 "$tmp/api" "$tmp/exported" >"$tmp/missing"
if [ -s "$tmp/leaked" ]; then
    fail "$(basename "$so") exports symbols simstore.h does not declare (make them static, or hidden):"
    sed 's/^/    /' "$tmp/leaked" >&2
fi
if [ -s "$tmp/missing" ]; then
    fail "$(basename "$so") does not export these SIMSTORE_API functions (is simstore.h included where they are defined?):"
    sed 's/^/    /' "$tmp/missing" >&2
fi

# 3. The static library: external symbols defined by its objects (but the
# ODR indicators AddressSanitizer adds for instrumented globals).
nm -g --defined-only "$archive" | awk 'NF == 3 { print $3 }' | grep -v '^__odr_asan[._]' |
    sort -u >"$tmp/defined"
grep -vE "^(simstore_|sims_)" "$tmp/defined" >"$tmp/unprefixed" || true
if [ -s "$tmp/unprefixed" ]; then
    fail "$(basename "$archive") defines global symbols without the simstore_ or sims_ prefix:"
    sed 's/^/    /' "$tmp/unprefixed" >&2
fi
grep -E '^simstore_' "$tmp/defined" | comm -23 - "$tmp/api" >"$tmp/private_public" || true
if [ -s "$tmp/private_public" ]; then
    fail "$(basename "$archive") defines simstore_ symbols that are not public API (internal names start with sims_):"
    sed 's/^/    /' "$tmp/private_public" >&2
fi

# 4. No fault-injection hooks in either library: the code that reads
# SIMSTORE_FAULT is linked into test programs only (lib/common/fault.c).
for lib in "$so" "$archive"; do
    if grep -q 'SIMSTORE_FAULT' "$lib"; then
        fail "$(basename "$lib") carries the test-only fault hooks (SIMSTORE_FAULT)"
    fi
done

if [ "$status" -eq 0 ]; then
    echo "symbols.sh: $(wc -l <"$tmp/exported") public functions exported, $(wc -l <"$tmp/defined") global symbols in $(basename "$archive"), all prefixed"
fi
exit "$status"
