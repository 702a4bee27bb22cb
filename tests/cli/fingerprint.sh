#!/usr/bin/env bash
# fingerprint.sh: `simstore fingerprint`: output format, plain files, stdin,
# JSON Lines, paragraphs, options, every kind of bad input with FILE:LINE,
# exit codes, and the friso fallback.
. "$(dirname "$0")/lib.sh"

hexline='^[0-9a-f]{16}	'
expect_all_lines_match() {
    if grep -qvE "$1" "$T/out"; then fail "a stdout line does not match $1"; else ok; fi
}

# --help, usage errors
run fingerprint --help
expect_status 0; expect_out_has "Usage: simstore fingerprint"; expect_err_empty
run fingerprint --bogus
expect_status 2; expect_err_has "simstore fingerprint: unknown option '--bogus'"
run fingerprint --shingle
expect_status 2; expect_err_has "option '--shingle' needs a value"
run fingerprint --shingle 0 /dev/null
expect_status 2; expect_err_has "--shingle: '0' is not a number in 1..32"
run fingerprint --shingle 33 /dev/null
expect_status 2
run fingerprint --weights idf /dev/null
expect_status 2; expect_err_has "--weights: 'idf' is not tf, length or log"
run fingerprint --fp-version 4 /dev/null
expect_status 2; expect_err_has "--fp-version: '4' is not 1, 2 or 3"
run fingerprint --fp-version 0 /dev/null
expect_status 2
run fingerprint --cjk-shingle 0 /dev/null
expect_status 2; expect_err_has "--cjk-shingle: '0' is not a number in 1..32"
run fingerprint --fp-version 1 --weights log /dev/null
expect_status 2; expect_err_has "--weights log needs --fp-version 2"
run fingerprint --fp-version 1 --cjk-shingle 2 /dev/null
expect_status 2; expect_err_has "--cjk-shingle applies only with --fp-version 2"
run fingerprint --weights length --lambda -1 /dev/null
expect_status 2; expect_err_has "--lambda: '-1' is not a number in 0..1000"
run fingerprint --lambda 2 /dev/null
expect_status 2; expect_err_has "--lambda applies only with --weights length"
run fingerprint --cjk klingon /dev/null
expect_status 2

# Plain files: one document each, id = path; the spec's test vector.
printf 'The quick brown fox jumps over the lazy dog.' >"$T/fox.txt"
printf 'Hello' >"$T/hello.txt"
run fingerprint "$T/fox.txt" "$T/hello.txt"
expect_status 0; expect_err_empty
expect_out "5cc1c8efc0c9b905	$T/fox.txt
9555e8555c62dcfd	$T/hello.txt"
run fingerprint --shingle 1 "$T/fox.txt"
expect_out "8212868318d29267	$T/fox.txt"
run fingerprint --shingle 1 --weights length --lambda 0.5 "$T/fox.txt"
expect_out "8612868318d29263	$T/fox.txt"

# Standard input: no FILE, or '-'; id '-'.
run_in "$T/fox.txt" fingerprint
expect_status 0; expect_out "5cc1c8efc0c9b905	-"
run_in "$T/fox.txt" fingerprint "$T/hello.txt" -
expect_out "9555e8555c62dcfd	$T/hello.txt
5cc1c8efc0c9b905	-"

# A missing file fails, the others are still printed.
run fingerprint "$T/nope.txt" "$T/hello.txt"
expect_status 1; expect_err_has "simstore fingerprint: $T/nope.txt: No such file or directory"
expect_out "9555e8555c62dcfd	$T/hello.txt"

# A directory is not a document.
run fingerprint "$T"
expect_status 1; expect_err_has "simstore fingerprint: $T: Is a directory"

# Empty documents: fingerprint 0 and a warning naming the id.
: >"$T/empty.txt"
printf '!!! ... ---\n' >"$T/punct.txt"
run fingerprint "$T/empty.txt" "$T/punct.txt"
expect_status 0
expect_out "0000000000000000	$T/empty.txt
0000000000000000	$T/punct.txt"
expect_err_has "warning: $T/empty.txt: document '$T/empty.txt' has no words: fingerprint 0000000000000000"

# Ill-formed UTF-8 in a plain file: read as separators, with a warning.
printf 'bad \xC0\xAF bytes \xED\xA0\x80 here \xF4\x90\x80\x80 and \xE4\xB8' >"$T/bad.txt"
run fingerprint --cjk bigram "$T/bad.txt"
expect_status 0; expect_out "a3818a0214402810	$T/bad.txt"
expect_err_has "invalid UTF-8 read as U+FFFD"

# A path that cannot be an id (newline in the name).
nl="$T/new
line.txt"
printf 'text' >"$nl"
run fingerprint "$nl"
expect_status 1; expect_err_has "the path cannot be a document id: id contains a control character"

# JSON Lines: good records printed, bad ones reported with FILE:LINE and skipped.
cat >"$T/in.jsonl" <<'JSON'
{"id": "doc-a", "text": "The quick brown fox jumps over the lazy dog."}
{"id": 17, "text": "Hello", "meta": {"source": "test"}}
{"id": "broken", "text": "no end}

{"id": "tab	inside", "text": "x"}
{"text": "no id"}
{"id": "doc-b", "text": "", "meta": [1, 2]}
{"id": ["x"], "text": "y"}
{"id": "last", "text": "still printed"}
JSON
run fingerprint --jsonl "$T/in.jsonl"
expect_status 1
expect_out "5cc1c8efc0c9b905	doc-a
9555e8555c62dcfd	17
0000000000000000	doc-b
$("$SIMSTORE" fingerprint - <<<'still printed' | cut -f1)	last"
expect_err_has "simstore fingerprint: $T/in.jsonl:3: invalid JSON"
expect_err_has "simstore fingerprint: $T/in.jsonl:5: invalid JSON"
expect_err_has "simstore fingerprint: $T/in.jsonl:6: missing member \"id\""
expect_err_has "simstore fingerprint: $T/in.jsonl:8: \"id\" must be a string or an integer, not an array"
expect_err_has "warning: $T/in.jsonl:7: document 'doc-b' has no words"
# A raw tab inside a JSON string is invalid JSON; an escaped one is a bad id.
printf '{"id": "a\\tb", "text": "x"}\n' >"$T/tab.jsonl"
run fingerprint --jsonl "$T/tab.jsonl"
expect_status 1; expect_err_has "$T/tab.jsonl:1: id contains a control character (tab, newline, ...): 'a\\x09b'"
# Invalid UTF-8 inside JSON is an error naming the line.
printf '{"id": "ok", "text": "fine"}\n{"id": "u", "text": "\xff"}\n' >"$T/utf8.jsonl"
run fingerprint --jsonl "$T/utf8.jsonl"
expect_status 1; expect_err_has "$T/utf8.jsonl:2: invalid UTF-8"; expect_out_lines 1
# JSON Lines from standard input.
run_in "$T/in.jsonl" fingerprint --jsonl
expect_status 1; expect_err_has "simstore fingerprint: <stdin>:3: invalid JSON"
expect_out_has "	doc-a"

# Paragraphs: ID#N for each paragraph with words.
printf 'First paragraph here.\n\nSecond one,\nwith two lines.\n \t\n***\n\nThird.\n' >"$T/p.txt"
run fingerprint --paragraphs "$T/p.txt"
expect_status 0; expect_out_lines 3; expect_all_lines_match "$hexline$T/p.txt#[1-3]\$"
expect_out_has "$("$SIMSTORE" fingerprint - <<<'Third.' | cut -f1)	$T/p.txt#3"
printf '{"id": "j", "text": "one two three\\n\\nfour five six"}\n' >"$T/p.jsonl"
run fingerprint --jsonl --paragraphs "$T/p.jsonl"
expect_status 0
expect_out "$(printf 'one two three' | "$SIMSTORE" fingerprint | cut -f1)	j#1
$(printf 'four five six' | "$SIMSTORE" fingerprint | cut -f1)	j#2"
run fingerprint --paragraphs "$T/empty.txt"
expect_status 0; expect_out_lines 0; expect_err_has "no paragraphs printed"

# A 10 MB single-line JSON record.
awk 'BEGIN { printf "{\"id\": \"big\", \"text\": \""; for (i = 0; i < 1100000; i++) printf "word%d ", i % 5000; print "\"}" }' >"$T/big.jsonl"
run fingerprint --jsonl "$T/big.jsonl"
expect_status 0; expect_all_lines_match "${hexline}big\$"

# CJK: character bigrams by default; friso words on request (auto: when
# its dictionary loads, else bigrams with a warning). The spec's vectors:
# version 1 (9, 10), version 2 (4, 5), the same in version 3 (the default).
printf '我们是中国人' >"$T/zh.txt"
run fingerprint --fp-version 1 --cjk bigram "$T/zh.txt"
expect_out "e607871d2ad8e16a	$T/zh.txt"
run fingerprint --fp-version 2 --cjk bigram "$T/zh.txt"
expect_out "c059a641416449f8	$T/zh.txt"
run fingerprint --cjk bigram "$T/zh.txt"
expect_out "c059a641416449f8	$T/zh.txt"
# Version 3 (the default) joins Han across spaces; version 2 does not (the
# spec's version 3 vector 1).
printf '我 们 是 中 国 人' >"$T/zh-spaced.txt"
run fingerprint --cjk bigram "$T/zh-spaced.txt"
expect_out "c059a641416449f8	$T/zh-spaced.txt"
run fingerprint --fp-version 3 "$T/zh-spaced.txt"
expect_out "c059a641416449f8	$T/zh-spaced.txt"
run fingerprint --fp-version 2 --cjk bigram "$T/zh-spaced.txt"
expect_out "880c0218d0edfd75	$T/zh-spaced.txt"
# The default: bigrams, without a word about friso.
run fingerprint "$T/zh.txt"
expect_status 0; expect_err_empty; expect_out "c059a641416449f8	$T/zh.txt"
run fingerprint --fp-version 1 "$T/zh.txt"
expect_status 0; expect_err_empty; expect_out "e607871d2ad8e16a	$T/zh.txt"
run fingerprint --verbose "$T/zh.txt"
expect_err_has "simstore fingerprint: options: --fp-version 3 --shingle 3 --cjk-shingle 2 --weights tf --cjk bigram"
run fingerprint --fp-version 2 --verbose "$T/zh.txt"
expect_err_has "simstore fingerprint: options: --fp-version 2 --shingle 3 --cjk-shingle 2 --weights tf --cjk bigram"
if "$SIMSTORE" --version | grep -q "CJK segmenter: friso"; then
    run fingerprint --fp-version 1 --cjk auto "$T/zh.txt"
    expect_status 0; expect_err_empty; expect_out "baa4ca39912ecf47	$T/zh.txt"
    run fingerprint --cjk auto "$T/zh.txt"
    expect_status 0; expect_err_empty; expect_out "60783d10123e8464	$T/zh.txt"
    run fingerprint --cjk friso "$T/zh.txt"
    expect_status 0; expect_err_empty; expect_out "60783d10123e8464	$T/zh.txt"
    run fingerprint --fp-version 2 --cjk friso "$T/zh.txt"
    expect_status 0; expect_err_empty; expect_out "60783d10123e8464	$T/zh.txt"
    run fingerprint --cjk auto --verbose "$T/zh.txt"
    expect_err_has "simstore fingerprint: options: --fp-version 3 --shingle 3 --cjk-shingle 2 --weights tf --cjk auto"
    expect_err_has "simstore fingerprint: CJK segmenter: friso 1.6.4"
    expect_err_has "1 document, 1 line printed"
fi
SIMSTORE_FRISO_INI=/nonexistent/friso.ini run fingerprint --cjk friso "$T/zh.txt"
expect_status 1
expect_err_has "friso dictionary not loadable: /nonexistent/friso.ini: No such file or directory"
SIMSTORE_FRISO_INI=/nonexistent/friso.ini run fingerprint --fp-version 1 --cjk auto "$T/zh.txt"
expect_status 0; expect_out "e607871d2ad8e16a	$T/zh.txt"
SIMSTORE_FRISO_INI=/nonexistent/friso.ini run fingerprint --cjk auto "$T/zh.txt"
expect_status 0; expect_out "c059a641416449f8	$T/zh.txt"
expect_err_has "warning: Han text is segmented into character bigrams (friso dictionary not loadable: /nonexistent/friso.ini"
# --cjk friso loads the dictionary at the first Han text, not before: with a
# friso.ini whose lexicon index lists no lexicon (readable, so the loading
# waits), Latin text is fingerprinted, and only Han text meets the failure.
mkdir -p "$T/emptydict"
: >"$T/emptydict/friso.lex.ini"
printf 'friso.lex_dir = %s/emptydict/\nfriso.charset = 0\n' "$T" >"$T/empty.ini"
printf 'the quick brown fox\n' >"$T/latin.txt"
SIMSTORE_FRISO_INI="$T/empty.ini" run fingerprint --cjk friso "$T/latin.txt"
expect_status 0; expect_err_empty; expect_out "4884401b808c8001	$T/latin.txt"
SIMSTORE_FRISO_INI="$T/empty.ini" run fingerprint --cjk friso "$T/zh.txt"
expect_status 1
expect_err_has "friso dictionary not loadable: $T/emptydict/friso.lex.ini lists no __LEX_CJK_WORDS__ lexicon"

# Version 2: NFC, NFD, a ligature, full-width letters and capitals are one
# text; a hard-wrapped Chinese copy is the unwrapped one. Version 1 tells
# them apart (no normalization, line breaks separate).
printf 'caf\xc3\xa9 fine wine\n' >"$T/nfc.txt"
printf 'cafe\xcc\x81 fine wine\n' >"$T/nfd.txt"
printf 'CAF\xc3\x89 \xef\xac\x81ne \xef\xbd\x97\xef\xbd\x89\xef\xbd\x8e\xef\xbd\x85\n' >"$T/lig.txt"
printf '研究生命起源是一个古老的问题' >"$T/zh1.txt"
printf '研究生\n命起源是一\r\n  个古老的问题' >"$T/zh2.txt"
for cjk in bigram auto; do
    run fingerprint --cjk $cjk "$T/nfc.txt" "$T/nfd.txt" "$T/lig.txt"
    expect_status 0
    if [ "$(cut -f1 "$T/out" | sort -u | wc -l)" = 1 ]; then ok; else fail "--cjk $cjk: NFC, NFD, ligature variants differ under version 2"; fi
    run fingerprint --cjk $cjk "$T/zh1.txt" "$T/zh2.txt"
    if [ "$(cut -f1 "$T/out" | sort -u | wc -l)" = 1 ]; then ok; else fail "--cjk $cjk: wrapped Chinese differs under version 2"; fi
    run fingerprint --fp-version 1 --cjk $cjk "$T/nfc.txt" "$T/nfd.txt" "$T/zh1.txt" "$T/zh2.txt"
    if [ "$(cut -f1 "$T/out" | sort -u | wc -l)" = 4 ]; then ok; else fail "--cjk $cjk: version 1 should tell the variants apart"; fi
done
# --weights log: version 2's sublinear weight.
run fingerprint --weights log --shingle 1 "$T/fox.txt"
expect_status 0; expect_all_lines_match "$hexline"

# Write errors are failures.
if [ -w /dev/full ]; then
    "$SIMSTORE" fingerprint "$T/fox.txt" >/dev/full 2>"$T/err"
    status=$?
    : >"$T/out"
    expect_status 1; expect_err_has "writing standard output"
fi
finish
