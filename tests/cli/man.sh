#!/usr/bin/env bash
# man.sh: the generated man pages (cmake/man.cmake, cmd/man/genman.sh):
# simstore(1) and a page for every command `simstore --help` lists, each
# titled and named after its command, holding every option of the
# command's --help, and rendered by groff without a macro error (a line
# too long to fill, groff's "cannot adjust", is no error).
# Environment: SIMSTORE_MAN_DIR, the build's man/ directory.
. "$(dirname "$0")/lib.sh"
man_dir=${SIMSTORE_MAN_DIR:?SIMSTORE_MAN_DIR names the generated pages}

command -v groff >/dev/null || { echo "groff is missing (Debian package groff-base)" >&2; exit 1; }

# render PAGE: the page as text (groff -man), macro warnings in $T/err.
render() {
    groff -t -man -Tutf8 -P-c -wmac -wel -Wbreak -z "$1" 2>"$T/err"
    groff -t -man -Tutf8 -P-c "$1" 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g; s/.\x08//g' >"$T/out"
}

[ -f "$man_dir/simstore.1" ] && ok || fail "no $man_dir/simstore.1"
render "$man_dir/simstore.1"
expect_err_empty
expect_out_has "SIMSTORE(1)"
expect_out_has "simstore - a compressed on-disk store of simhash fingerprints"

run --help
commands=$(awk '/^Commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }' "$T/out")
[ "$(printf '%s\n' "$commands" | wc -l)" -ge 17 ] && ok || fail "simstore --help lists too few commands: $commands"
for c in $commands; do
    desc=$(awk -v c="$c" '$1 == c { $1 = ""; sub(/^ +/, ""); print; exit }' "$T/out")
    page=$man_dir/simstore-$c.1
    if [ ! -f "$page" ]; then
        fail "no page for '$c': $page"
        continue
    fi
    ok
    # The main page points to it.
    grep -qF "simstore\\-$c (1)" "$man_dir/simstore.1" && ok || fail "simstore.1 does not name simstore-$c(1)"
    "$SIMSTORE" "$c" --help >"$T/help" 2>&1
    render "$page"
    expect_err_empty
    upper=$(printf '%s' "$c" | tr '[:lower:]' '[:upper:]')
    expect_out_has "SIMSTORE-$upper(1)"
    # NAME: "simstore-COMMAND - DESCRIPTION" (groff may break the line).
    name=$(tr -s ' \n' '  ' <"$T/out")
    case $name in
        *"simstore-$c - $desc"*) ok ;;
        *) fail "the NAME of simstore-$c.1 is not 'simstore-$c - $desc'" ;;
    esac
    case $name in
        *"SYNOPSIS simstore $c "*) ok ;;
        *) fail "the SYNOPSIS of simstore-$c.1 is not 'simstore $c ...'" ;;
    esac
    # Every option of the command's help.
    for opt in $(sed -n -e 's/^ \{2,\}\(-[a-zA-Z], \)\{0,1\}\(--[a-z0-9][a-z0-9-]*\).*/\2/p' "$T/help" | sort -u); do
        grep -q -- "$opt" "$T/out" && ok || fail "simstore-$c.1 lacks $opt"
    done
done
finish
