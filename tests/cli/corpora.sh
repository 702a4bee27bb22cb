#!/usr/bin/env bash
# corpora.sh: JSON Lines as corpora ship it: other members ignored (or
# refused with --strict), --id-field/--text-field/--meta-fields (nested
# names), --id-from-line, integer ids given back as integers, ids that are
# not UTF-8 refused whatever the format, --json output valid UTF-8.
source "$(dirname "$0")/lib.sh"

# A C4/FineWeb-shaped file: extra members, other names, nested metadata.
cat >"$T/c4.jsonl" <<'EOF'
{"text": "the quick brown fox jumps over the lazy dog again and again", "timestamp": "2019-04-25T12:57:54Z", "url": "https://a.example/1", "doc_id": 17, "source": {"name": "cc", "crawl": 3}}
{"text": "the quick brown fox jumps over the lazy dog again and again", "timestamp": "2019-04-26T00:00:00Z", "url": "https://b.example/2", "doc_id": "b-2", "source": {"name": "web"}}
{"text": "an entirely different document about compressed tables and sorted blocks", "url": "https://c.example/3", "doc_id": -4}
EOF

# Unknown members are ignored by default; the ids are in doc_id, not id.
run build "$T/s1" "$T/c4.jsonl"
expect_status 1
expect_err_has "c4.jsonl:1: missing member \"id\" (--id-field NAME picks another member, --id-from-line makes ids FILE:LINE)"
[ ! -e "$T/s1" ] && ok || fail "a failed build left a store"
run build "$T/s1" --id-field doc_id --meta-fields url,source.name "$T/c4.jsonl"
expect_status 0
expect_out_has "3 documents, 2 distinct fingerprints"
# --strict keeps the old refusal, naming the member and what is allowed.
run build "$T/s2" --strict --id-field doc_id "$T/c4.jsonl"
expect_status 1
expect_err_has "c4.jsonl:1: unexpected member 'timestamp' (--strict allows only doc_id, text and meta)"

# Integer ids come back as integers, string ids as strings; the metadata is
# the members picked, nested names as written.
run query "$T/s1" --json --meta --text "the quick brown fox jumps over the lazy dog again and again"
expect_status 0
expect_out '{"query":"-","id":17,"fp":"'"$(cut -d'"' -f10 "$T/out" | head -n1)"'","distance":0,"meta":{"url":"https://a.example/1","source.name":"cc"}}
{"query":"-","id":"b-2","fp":"'"$(cut -d'"' -f10 "$T/out" | head -n1)"'","distance":0,"meta":{"url":"https://b.example/2","source.name":"web"}}'
run query "$T/s1" --json --queries "$T/c4.jsonl" --id-field doc_id --k 0
expect_status 0
expect_out_has '{"query":-4,"id":-4,'
expect_out_has '{"query":17,"id":"b-2",'
expect_out_has '{"query":"b-2","id":17,'
# Text output is unchanged: ids as they are.
run query "$T/s1" --queries "$T/c4.jsonl" --id-field doc_id --k 0
expect_out_has "$(printf '17\tb-2\t')"
# add keeps the flag too.
printf '{"id": 99, "text": "yet another text of several words"}\n' >"$T/more.jsonl"
run add "$T/s1" "$T/more.jsonl"
expect_status 0
run query "$T/s1" --json --text "yet another text of several words"
expect_out_has '"id":99,'

# Records without ids: FILE:LINE with --id-from-line.
printf '{"text": "first text with words"}\n\n{"text": "second text with words", "id": "own"}\n{"text": "third one here"}\n' >"$T/noid.jsonl"
run build "$T/s3" --id-from-line "$T/noid.jsonl"
expect_status 0
expect_out_has "3 documents"
run query "$T/s3" --text "third one here" --k 0
expect_out_has "$(printf '%s\t' "$T/noid.jsonl:4")"
run query "$T/s3" --text "second text with words" --k 0
expect_out_has "$(printf '\town\t')"
run_in "$T/noid.jsonl" build "$T/s4" --id-from-line --format jsonl -
expect_status 0
run query "$T/s4" --text "first text with words" --k 0
expect_out_has "$(printf '\t<stdin>:1\t')"
# fingerprint takes the same options.
run fingerprint --jsonl --id-from-line "$T/noid.jsonl"
expect_status 0
expect_out_lines 3
expect_out_has "$(printf '\t%s' "$T/noid.jsonl:1")"
run fingerprint --id-field x "$T/noid.jsonl"
expect_status 2
expect_err_has "need --jsonl"
run build "$T/s5" --id-field "a..b" "$T/noid.jsonl"
expect_status 2
expect_err_has "has an empty component"
run build "$T/s5" --meta-fields "url," "$T/noid.jsonl"
expect_status 2

# Ids that are not UTF-8 are refused in every format, so --json stays JSON.
printf 'caf\xe9\t00000000000000ff\nok\t00000000000000fe\n' >"$T/latin1.tsv"
run build "$T/s6" "$T/latin1.tsv"
expect_status 1
expect_err_has "latin1.tsv:1: id is not valid UTF-8: 'caf\\xe9'"
printf '00000000000000ff\t\xff\xfe\n' >"$T/bad.fp"
run build "$T/s6" "$T/bad.fp"
expect_status 1
expect_err_has "bad.fp:1: id is not valid UTF-8"
run pairs "$T/bad.fp"
expect_status 1
expect_err_has "id is not valid UTF-8"
# Valid UTF-8 of every length is kept as it is.
printf 'caf\xc3\xa9-\xe4\xb8\xad-\xf0\x9f\x98\x80\t00000000000000ff\n' >"$T/utf8.tsv"
run build "$T/s7" "$T/utf8.tsv"
expect_status 0
run query "$T/s7" --json --fp 00000000000000ff
expect_out "$(printf '{"query":"-","id":"caf\xc3\xa9-\xe4\xb8\xad-\xf0\x9f\x98\x80","fp":"00000000000000ff","distance":0}')"

finish
