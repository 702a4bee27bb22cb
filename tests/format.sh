#!/usr/bin/env bash
# format.sh: every C and C++ source of the tree is as clang-format leaves it
# under .clang-format (generated tables opt out with "clang-format off").
# Usage: format.sh SOURCE_DIR CLANG_FORMAT
set -u
src=${1:?usage: $0 SOURCE_DIR CLANG_FORMAT}
cf=${2:?usage: $0 SOURCE_DIR CLANG_FORMAT}
cd "$src" || exit 1
if [ -d .git ] && command -v git >/dev/null; then
    mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp')
else
    mapfile -t files < <(find lib cmd server python mpi tests bench \
        \( -name '*.c' -o -name '*.h' -o -name '*.cpp' \) -type f | sort)
fi
[ "${#files[@]}" -gt 100 ] || { echo "format.sh: found only ${#files[@]} sources in $src" >&2; exit 1; }
# Sixteen files a run, as many runs as there are CPUs; the files named in
# its error lines are the ones that differ. A run that fails without naming
# one (clang-format itself failed) fails the test too.
out=$(printf '%s\0' "${files[@]}" |
    xargs -0 -P "$(nproc 2>/dev/null || echo 2)" -n 16 "$cf" --dry-run -Werror 2>&1)
status=$?
mapfile -t bad < <(sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' \
    <<<"$out" | sort -u)
if [ "$status" != 0 ] && [ "${#bad[@]}" = 0 ]; then
    echo "format.sh: $cf failed (status $status):" >&2
    head -n 20 <<<"$out" >&2
    exit 1
fi
for f in "${bad[@]}"; do
    echo "not formatted: $f" >&2
done
bad=${#bad[@]}
if [ "$bad" -gt 0 ]; then
    echo "format.sh: $bad of ${#files[@]} files differ from .clang-format; run: $cf -i FILE..." >&2
    exit 1
fi
echo "format.sh: ${#files[@]} files formatted"
