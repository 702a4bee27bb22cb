#!/usr/bin/env bash
# completion.sh: the bash completion (cmd/completion/simstore.bash), driven
# as bash drives it: COMP_WORDS and COMP_CWORD set, the function `complete`
# registered for simstore called, COMPREPLY read. Commands, options of
# every command, listed option values, file names and unknown commands.
. "$(dirname "$0")/lib.sh"
script=$SRC/cmd/completion/simstore.bash

# complete WORD...: the completions of the last WORD (the first is the
# program), one per line, sorted, into $T/out.
complete_words() {
    bash --norc --noprofile -c '
        . "$1" || exit 3
        shift
        spec=$(complete -p simstore) || exit 4
        fn=${spec#*-F }; fn=${fn%% *}
        COMP_WORDS=("$@")
        COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
        COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
        "$fn" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}" || exit 5
        [ ${#COMPREPLY[@]} -eq 0 ] || printf "%s\n" "${COMPREPLY[@]}" | sort' \
        complete "$script" "$SIMSTORE" "$@" >"$T/out" 2>"$T/err"
    status=$?
}

# Commands: every one `simstore --help` lists, and only those.
run --help
awk '/^Commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }' "$T/out" | sort >"$T/commands"
complete_words ""
expect_status 0
expect_err_empty
diff -u "$T/commands" "$T/out" >/dev/null && ok || fail "the commands completed differ from simstore --help's"
complete_words qu
expect_status 0; expect_out "query"
complete_words d
expect_out "dedup
delete
distance
dump"
complete_words --ve
expect_out "--version"

# Options: every option of each command's help completes from "--".
while read -r c; do
    "$SIMSTORE" "$c" --help >"$T/help" 2>&1
    sed -n -e 's/^ \{2,\}\(-[a-zA-Z], \)\{0,1\}\(--[a-z0-9][a-z0-9-]*\).*/\2/p' "$T/help" | sort -u >"$T/opts"
    complete_words "$c" --
    expect_status 0
    diff -u "$T/opts" "$T/out" >/dev/null && ok || fail "the options completed for '$c' differ from its --help"
    grep -qx -- --help "$T/out" && ok || fail "no --help among '$c' options"
done <"$T/commands"
complete_words query STORE --js
expect_out "--json"
complete_words build OUT --rep
expect_out "--replace"

# Values an option's help lists, and none for a number.
complete_words query STORE --format ""
expect_out "fp
jsonl
tsv"
complete_words query STORE --strategy o
expect_out "one-by-one"
complete_words query STORE --k ""
expect_status 0; expect_out ""

# File names: a store, an input file after an option taking FILE.
mkdir -p "$T/dir/sample.store"
: >"$T/dir/queries.tsv"
: >"$T/dir/query-notes.txt"
complete_words stats "$T/dir/sam"
expect_out "$T/dir/sample.store"
complete_words query "$T/dir/sample.store" --queries "$T/dir/quer"
expect_out "$T/dir/queries.tsv
$T/dir/query-notes.txt"
complete_words query "$T/dir/sample.store" --text "$T/dir/quer"
expect_out ""

# An unknown command: no options to offer, and no error.
complete_words frobnicate --
expect_status 0; expect_out ""
finish
