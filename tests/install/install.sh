#!/usr/bin/env bash
# install.sh: `cmake --install` of a build into a temporary prefix, then what
# a C user does with it (README.md, "Use the library"):
#  - the files are there: libsimstore.so.VERSION with its SONAME links,
#    libsimstore.a, simstore.h, the simstore tool, the format documents,
#    simstore.pc and the CMake package, the bash completion and the man
#    pages (when the build made them);
#  - the README's example is example.c;
#  - example.c compiles (cc, -Wall -Wextra -pedantic -Werror) and links
#    through pkg-config, against the shared library and, with --static,
#    against libsimstore.a alone, and through find_package(simstore) with
#    simstore::simstore and simstore::simstore_static; each program runs and
#    prints example.expected; the shared ones load the installed library;
#  - the Python package, when the build has one, is installed under the
#    prefix and answers a query from there.
# Usage: install.sh BUILD_DIR SOURCE_DIR VERSION
# Environment: CC (default cc); SIMSTORE_EXAMPLE_CFLAGS, added to every
# compile and link (the sanitizer flags of an instrumented build);
# SIMSTORE_PYTHON3, the Python package's interpreter (with the package).
set -euo pipefail
build=${1:?usage: install.sh BUILD_DIR SOURCE_DIR VERSION}
src=${2:?usage: install.sh BUILD_DIR SOURCE_DIR VERSION}
version=${3:?usage: install.sh BUILD_DIR SOURCE_DIR VERSION}
cc=${CC:-cc}
read -ra extra <<<"${SIMSTORE_EXAMPLE_CFLAGS:-}"
here=$src/tests/install
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

fail() {
    echo "install.sh: $*" >&2
    exit 1
}
step() { echo "== $*"; }

step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; fail "cmake --install failed"; }

pc=$(find "$prefix" -name simstore.pc -path '*/pkgconfig/*')
[ -n "$pc" ] || fail "no simstore.pc under $prefix"
libdir=$(dirname "$(dirname "$pc")")
major=${version%%.*}
[ -f "$libdir/libsimstore.so.$version" ] && [ ! -L "$libdir/libsimstore.so.$version" ] ||
    fail "no $libdir/libsimstore.so.$version"
[ "$(readlink "$libdir/libsimstore.so.$major")" = "libsimstore.so.$version" ] ||
    fail "libsimstore.so.$major is not a link to libsimstore.so.$version"
[ "$(readlink "$libdir/libsimstore.so")" = "libsimstore.so.$major" ] ||
    fail "libsimstore.so is not a link to libsimstore.so.$major"
# (Outputs are captured before grep -q reads them: with pipefail, grep -q
# quitting at its first match can kill the writer with SIGPIPE and fail the
# pipeline although the line was there.)
dynamic=$(readelf -d "$libdir/libsimstore.so.$version")
grep -q "Library soname: \[libsimstore.so.$major\]" <<<"$dynamic" ||
    fail "the SONAME of libsimstore.so.$version is not libsimstore.so.$major"
for f in "$libdir/libsimstore.a" "$prefix/include/simstore.h" "$prefix/include/simstore_unstable.h" "$prefix/bin/simstore" \
    "$libdir/cmake/simstore/simstore-config.cmake" \
    "$libdir/cmake/simstore/simstore-config-version.cmake" \
    "$prefix/share/doc/simstore/LICENSE" "$prefix/share/doc/simstore/README.md"; do
    [ -f "$f" ] || fail "not installed: $f"
done
for f in "$src"/format/*.md; do
    [ -f "$prefix/share/doc/simstore/format/$(basename "$f")" ] ||
        fail "not installed: share/doc/simstore/format/$(basename "$f")"
done
"$prefix/bin/simstore" --version >/dev/null || fail "the installed simstore --version failed"
[ -f "$prefix/share/bash-completion/completions/simstore" ] ||
    fail "not installed: share/bash-completion/completions/simstore"
# The man pages, when this build made them (help2man found: build/man/).
if [ -f "$build/man/simstore.1" ]; then
    for f in "$build"/man/*.1; do
        [ -f "$prefix/share/man/man1/$(basename "$f")" ] ||
            fail "not installed: share/man/man1/$(basename "$f")"
    done
fi

# The Python package, when the build made one (SIMSTORE_PYTHON): installed
# whole (its .py files and the extension _simstore, self-contained:
# libsimstore linked in) into Python's packages under the prefix, and
# importable from there by the interpreter it was built for.
# (No python/ in builds without the package: find would fail the pipeline.)
built_module=
if [ -d "$build/python/simstore" ]; then
    built_module=$(find "$build/python/simstore" -maxdepth 1 -name '_simstore*.so' | head -n 1)
fi
if [ -n "$built_module" ]; then
    step "the Python package"
    module=$(find "$prefix" -name "$(basename "$built_module")" -path '*-packages/simstore/*')
    [ -n "$module" ] || fail "the Python extension $(basename "$built_module") is not installed under $prefix"
    package=$(dirname "$module")
    for f in "$src"/python/simstore/*.py; do
        [ -f "$package/$(basename "$f")" ] || fail "not installed: $package/$(basename "$f")"
    done
    python=${SIMSTORE_PYTHON3:?the Python package is built: SIMSTORE_PYTHON3 names its interpreter}
    deps=$(ldd "$module")
    ! grep -q libsimstore <<<"$deps" || fail "the installed Python extension needs libsimstore.so"
    got=$(cd "$tmp" && PYTHONPATH=$(dirname "$package") "$python" -c '
import simstore
with simstore.Store.build("py.store", [("a", "one two three four"), ("b", "one two three four")]) as s:
    print(simstore.__file__, simstore._simstore.__file__, [m.id for m in s.query("one two three four")])
') || fail "importing the installed Python package failed"
    [ "$got" = "$package/__init__.py $module ['a', 'b']" ] || fail "the installed Python package: '$got'"
fi

step "the README's example is tests/install/example.c"
awk '/^## Use the library/ { in_section = 1; next }
     in_section && /^## / { exit }
     in_section && /^```c$/ { in_code = 1; next }
     in_code && /^```$/ { exit }
     in_code { print }' "$src/README.md" >"$tmp/readme_example.c"
diff -u "$here/example.c" "$tmp/readme_example.c" ||
    fail "README.md's example (the first \`\`\`c block of \"Use the library\") differs from tests/install/example.c"

# run NAME PROGRAM [ENV...]: run PROGRAM on a new store, compare its output.
run() {
    local name=$1 program=$2
    shift 2
    local status=0
    env "$@" "$program" "$tmp/$name.store" >"$tmp/$name.out" 2>"$tmp/$name.err" || status=$?
    if [ "$status" -ne 0 ]; then
        cat "$tmp/$name.err" >&2
        fail "$name: exit status $status"
    fi
    diff -u "$here/example.expected" "$tmp/$name.out" || fail "$name: unexpected output"
    echo "$name: OK"
}
# uses_installed_so PROGRAM [ENV...]: PROGRAM loads libsimstore from $libdir.
uses_installed_so() {
    local program=$1
    shift
    local libs
    libs=$(env "$@" ldd "$program")
    grep -q "libsimstore.so.$major => $libdir/libsimstore.so.$major" <<<"$libs" ||
        fail "$program does not load $libdir/libsimstore.so.$major: $libs"
}
# static_only PROGRAM: PROGRAM does not need libsimstore.so.
static_only() {
    local dynamic
    dynamic=$(readelf -d "$1")
    if grep -q 'NEEDED.*libsimstore' <<<"$dynamic"; then
        fail "$1 needs libsimstore.so although it was linked with libsimstore.a"
    fi
}
cflags=(-std=c11 -Wall -Wextra -pedantic -Werror "${extra[@]}")

step "pkg-config"
export PKG_CONFIG_PATH=$libdir/pkgconfig
[ "$(pkg-config --modversion simstore)" = "$version" ] || fail "pkg-config --modversion simstore"
read -ra pc_flags <<<"$(pkg-config --cflags --libs simstore)"
"$cc" "${cflags[@]}" "$here/example.c" -o "$tmp/example_pc" "${pc_flags[@]}"
uses_installed_so "$tmp/example_pc" LD_LIBRARY_PATH="$libdir"
run pkg-config-shared "$tmp/example_pc" LD_LIBRARY_PATH="$libdir"
# A static link as the README shows it: -l:libsimstore.a in place of
# -lsimstore, with what --static adds (Requires.private, Libs.private).
read -ra static_flags <<<"$(pkg-config --cflags --libs --static simstore | sed 's/-lsimstore /-l:libsimstore.a /')"
"$cc" "${cflags[@]}" "$here/example.c" -o "$tmp/example_pc_static" "${static_flags[@]}"
static_only "$tmp/example_pc_static"
run pkg-config-static "$tmp/example_pc_static"
unset PKG_CONFIG_PATH

step "find_package(simstore)"
cmake -S "$here" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_C_FLAGS="${SIMSTORE_EXAMPLE_CFLAGS:-}" -DCMAKE_EXE_LINKER_FLAGS="${SIMSTORE_EXAMPLE_CFLAGS:-}" \
    >"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log" >&2; fail "configuring the consumer failed"; }
grep -qx "simstore_DIR:PATH=$libdir/cmake/simstore" "$tmp/consumer/CMakeCache.txt" ||
    fail "find_package(simstore) found another simstore: $(grep simstore_DIR "$tmp/consumer/CMakeCache.txt")"
cmake --build "$tmp/consumer" >>"$tmp/consumer.log" 2>&1 ||
    { cat "$tmp/consumer.log" >&2; fail "building the consumer failed"; }
uses_installed_so "$tmp/consumer/example_shared"
run find_package-shared "$tmp/consumer/example_shared"
static_only "$tmp/consumer/example_static"
run find_package-static "$tmp/consumer/example_static"
step "all OK"
