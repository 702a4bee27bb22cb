#!/usr/bin/env bash
# version.sh: `simstore --version` names the CJK segmenter in effect (friso,
# or the bigram fallback and why); top-level usage.
. "$(dirname "$0")/lib.sh"

run --version
expect_status 0; expect_out_has "simstore 1.0.0 (library 1.0.0)"; expect_out_has "CJK segmenter: "
if [ -r /usr/share/friso/dict/UTF-8/friso.lex.ini ] && [ -z "${SIMSTORE_FRISO_INI:-}" ]; then
    expect_out_has "CJK segmenter: friso 1.6.4 (complex mode), dictionary /usr/share/friso/dict/UTF-8/"
fi
SIMSTORE_FRISO_INI=/nonexistent/friso.ini run --version
expect_status 0
expect_out_has "CJK segmenter: character bigrams (friso dictionary not loadable: /nonexistent/friso.ini: No such file or directory)"
# An ini whose dictionary directory is missing.
printf 'friso.lex_dir = %s/nodict/\nfriso.charset = 0\n' "$T" >"$T/friso.ini"
SIMSTORE_FRISO_INI="$T/friso.ini" run --version
expect_out_has "character bigrams (friso dictionary not loadable: $T/nodict/friso.lex.ini: No such file or directory)"
run -V
expect_status 0; expect_out_has "CJK segmenter"
run --help
expect_status 0; expect_out_has "fingerprint"; expect_out_has "distance"; expect_out_has "pairs"
run
expect_status 2
run frobnicate
expect_status 2; expect_err_has "unknown command 'frobnicate'"
run --frobnicate
expect_status 2; expect_err_has "unknown option '--frobnicate'"
finish
