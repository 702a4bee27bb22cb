#!/usr/bin/env bash
# layering.sh: the dependency rules of the tree, checked on every file, so a
# wrong include fails the tests rather than waiting for a review.
#   - lib/<layer>/ includes internal headers ("layer/x.h") only of the layers
#     below it (the table RULES below; lib/README.md draws the same graph);
#   - <lmdb.h> only in lib/lmdb/; no file in lib/ includes jansson,
#     libmicrohttpd, MPI, zlib or zstd (those belong to the clients);
#   - cmd/ includes only the public headers (simstore.h, simstore_unstable.h)
#     and its own headers;
#   - server/ and mpi/ include only the public headers and cmd/'s helpers;
#   - python/ (the Python package's C core, python/_simstore/) includes only
#     the public header and its own headers (<Python.h> is its outside
#     dependency).
# Usage: layering.sh SOURCE_DIR
set -u
SRC=${1:?usage: layering.sh SOURCE_DIR}
cd "$SRC" || exit 1

# layer: the layers whose internal headers it may include (itself included).
declare -A RULES=(
    [common]="common"
    [codec]="common codec"
    [text]="common text"
    [table]="common codec sort table"
    [docfile]="common codec sort docfile"
    [design]="common design"
    [sort]="common sort"
    [lmdb]="common lmdb"
    [memindex]="common design memindex"
    [wal]="common wal"
    [store]="common codec text table docfile design sort lmdb wal store"
    [check]="common codec text table docfile design sort lmdb wal store check"
    [scan]="common codec text table docfile design sort lmdb wal store scan"
    [live]="common codec text table docfile design sort lmdb wal store live"
    [shard]="common codec text table docfile design sort lmdb wal store shard"
)
failures=0
checks=0
problem() {
    echo "layering: $*" >&2
    failures=$((failures + 1))
}

for dir in lib/*/; do
    layer=$(basename "$dir")
    [ "$layer" = include ] && continue
    if [ -z "${RULES[$layer]+x}" ]; then
        problem "lib/$layer/ is a layer this check does not know: add it to RULES in tests/layering.sh and to lib/README.md"
        continue
    fi
    for f in "$dir"*.c "$dir"*.h; do
        [ -e "$f" ] || continue
        checks=$((checks + 1))
        while IFS=: read -r line inc; do
            target=${inc%%/*}
            case " ${RULES[$layer]} " in
            *" $target "*) ;;
            *) problem "$f:$line: includes \"$inc\": lib/$layer/ may use only ${RULES[$layer]}" ;;
            esac
        done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[a-z_]*/' "$f" |
                 sed 's/^\([0-9]*\):.*"\([^"]*\)".*/\1:\2/')
        while IFS=: read -r line inc; do
            case "$inc" in
            lmdb.h) [ "$layer" = lmdb ] || problem "$f:$line: <lmdb.h> belongs to lib/lmdb/ alone" ;;
            jansson.h | microhttpd.h | mpi.h | zlib.h | zstd.h)
                problem "$f:$line: <$inc> is for clients (cmd/, server/, mpi/), not lib/" ;;
            esac
        done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*<' "$f" |
                 sed 's/^\([0-9]*\):.*<\([^>]*\)>.*/\1:\2/')
    done
done

# Clients: the public header (and but python/, simstore_unstable.h), their
# own headers (beside them), and (server/, mpi/) cmd/'s. Their sources are
# in the directory or one below it (python/_simstore/).
for dir in cmd server mpi python; do
    [ -d "$dir" ] || continue
    for f in "$dir"/*.c "$dir"/*.h "$dir"/*/*.c "$dir"/*/*.h; do
        [ -e "$f" ] || continue
        checks=$((checks + 1))
        while IFS=: read -r line inc; do
            [ "$inc" = simstore.h ] && continue
            # The project's own clients but the Python module may use the
            # unstable pieces (simstore_unstable.h); users of simstore.h
            # alone are what python/ shows.
            [ "$inc" = simstore_unstable.h ] && [ "$dir" != python ] && continue
            [ -e "$(dirname "$f")/$inc" ] && continue
            if [ "$dir" = server ] || [ "$dir" = mpi ]; then
                [ -e "cmd/$inc" ] && continue
            fi
            problem "$f:$line: includes \"$inc\": $dir/ includes only the public headers and its own"
        done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
                 sed 's/^\([0-9]*\):.*"\([^"]*\)".*/\1:\2/')
    done
done

echo "$checks files checked, $failures problems"
[ "$failures" = 0 ]
