# simstore.bash: bash completion for simstore: commands, each command's
# options, the values of options that list them (--format tsv|fp|jsonl) and
# file names. The commands and options are read from `simstore --help` and
# `simstore COMMAND --help` (the one source), once per shell and command.
# Installed as share/bash-completion/completions/simstore; or: source it.

# The options of the help text on stdin, one per line (an option's help
# begins an indented line: "  -h, --help", "      --k K").
_simstore_options()
{
    sed -n -e 's/^ \{2,\}\(-[a-zA-Z], \)\{0,1\}\(--[a-z0-9][a-z0-9-]*\).*/\2/p' | sort -u
}

_simstore()
{
    local cur prev prog cmd i
    COMPREPLY=()
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=""
    [ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD - 1]}
    prog=${COMP_WORDS[0]}
    # The command: the first word after the program that is not an option.
    cmd=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
            -*) ;;
            *) cmd=${COMP_WORDS[i]}; break ;;
        esac
    done
    if [ -z "$cmd" ]; then
        if [ -z "${_simstore_commands+set}" ]; then
            _simstore_commands=$("$prog" --help 2>/dev/null |
                awk '/^Commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }')
        fi
        case $cur in
            -*) COMPREPLY=($(compgen -W "--help --version" -- "$cur")) ;;
            *) COMPREPLY=($(compgen -W "$_simstore_commands" -- "$cur")) ;;
        esac
        return 0
    fi
    # The command's help, once per shell: its options and their arguments.
    local var="_simstore_help_${cmd//[^a-z0-9]/_}"
    if [ -z "${!var+set}" ]; then
        printf -v "$var" '%s' "$("$prog" "$cmd" --help 2>/dev/null)"
    fi
    local help=${!var}
    # The value of an option: the values its help line lists (A|B|C), a file
    # name for FILE, PATH, DIR, STORE, or nothing to offer.
    if [[ $prev == --* ]]; then
        local arg
        arg=$(printf '%s\n' "$help" |
            sed -n -e "s/^ \{2,\}\(-[a-zA-Z], \)\{0,1\}$prev \([^ ]*\).*/\2/p" | head -n 1)
        if [ -n "$arg" ]; then
            if [[ $arg == *"|"* ]]; then
                COMPREPLY=($(compgen -W "${arg//|/ }" -- "$cur"))
            elif [[ $arg =~ FILE|PATH|DIR|STORE|OUT ]]; then
                compopt -o filenames 2>/dev/null
                COMPREPLY=($(compgen -f -- "$cur"))
            fi
            return 0
        fi
    fi
    if [[ $cur == -* ]]; then
        local opts
        opts=$(printf '%s\n' "$help" | _simstore_options)
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        return 0
    fi
    # Anything else is a store, an input file or an id: file names.
    compopt -o filenames 2>/dev/null
    COMPREPLY=($(compgen -f -- "$cur"))
    return 0
}
complete -F _simstore simstore
