#!/usr/bin/env bash
# store.sh: `simstore build`, `query` and `stats`: outputs, every error with
# its file and line, exit codes, all-or-nothing builds, and exactness through
# the CLI for k = 0..7 against `simstore pairs` (a brute-force scan).
. "$(dirname "$0")/lib.sh"

sample="$SRC/tests/data/sample.jsonl"

# ---- build, stats, query on the sample ------------------------------------
# friso words: at the store's k (3) every planted pair is found (with the
# default bigrams one planted Chinese edit lands 6 bits away: sample.sh).
run build "$T/s" --cjk friso "$sample"
expect_status 0
expect_out_has "built $T/s: 92 documents"
expect_out_has "4 tables"
run stats "$T/s"
expect_status 0; expect_err_empty
expect_out_has "documents: 92"
expect_out_has "k: 3"
expect_out_has "kind: documents"
expect_out_has "segments: 1"
run stats "$T/s" --json
expect_status 0
expect_out_has '"documents":92'
expect_out_has '"k":3'

# Every planted pair is found by querying each sample document's text.
run query "$T/s" --queries "$sample"
expect_status 0; expect_err_empty
awk -F'\t' '$1 != $2 { print ($1 < $2) ? $1 "\t" $2 : $2 "\t" $1 }' "$T/out" | LC_ALL=C sort -u >"$T/found"
if cmp -s "$T/found" "$SRC/tests/data/sample.pairs"; then ok; else
    fail "query --queries pairs differ from the planted pairs:
$(diff "$T/found" "$SRC/tests/data/sample.pairs" | head)"
fi

# --no-verify (no block checksums, no LMDB walk) answers the same.
cp "$T/out" "$T/verified"
run query "$T/s" --queries "$sample" --no-verify
expect_status 0
cmp -s "$T/out" "$T/verified" && ok || fail "--no-verify changed the answers"
# --huge-pages (the page-cache advice) answers the same.
run query "$T/s" --queries "$sample" --huge-pages
expect_status 0
cmp -s "$T/out" "$T/verified" && ok || fail "--huge-pages changed the answers"

# --skip-self leaves exactly the planted pairs, each seen from both sides.
run query "$T/s" --queries "$sample" --skip-self
expect_status 0
expect_out_lines $(( $(wc -l <"$SRC/tests/data/sample.pairs") * 2 ))

# A single query by fingerprint, text and file.
run fingerprint --jsonl "$sample"
head -1 "$T/out" >"$T/first.fp"
fp=$(cut -f1 "$T/first.fp")
id=$(cut -f2 "$T/first.fp")
run query "$T/s" --fp "$fp"
expect_status 0
head -1 "$T/out" | grep -q "^-	$id	$fp	0\$" && ok || fail "query --fp does not list $id at distance 0 first"
run query "$T/s" --fp "$fp" --k 0 --json
expect_status 0
expect_out_has "{\"query\":\"-\",\"id\":\"$id\",\"fp\":\"$fp\",\"distance\":0}"
run query "$T/s" --fp 0000000000000000 --k 0
expect_status 0; expect_out_lines 0
# --meta shows metadata stored with --jsonl input.
printf '{"id": "m1", "text": "alpha beta gamma delta", "meta": {"url": "http://x/"}}\n' >"$T/meta.jsonl"
run build "$T/m" "$T/meta.jsonl"
expect_status 0
run query "$T/m" --text "alpha beta gamma delta" --json --meta
expect_status 0
expect_out_has '"id":"m1"'
expect_out_has '"meta":{"url":"http://x/"}'
run query "$T/m" --file "$T/meta.jsonl" --k 3
expect_status 0
printf 'alpha beta gamma delta' >"$T/doc.txt"
run query "$T/m" --file "$T/doc.txt"
expect_status 0
expect_out_has "-	m1	"
run_in "$T/doc.txt" query "$T/m" --file -
expect_status 0
expect_out_has "-	m1	"

# Queries files: TSV, fingerprint lines, JSON Lines; a bad line is reported
# and skipped, the rest answered, exit 1.
printf 'q1\t%s\nq2\tnothex\nq3\t%s\n' "$fp" "$fp" >"$T/q.tsv"
run query "$T/s" --queries "$T/q.tsv"
expect_status 1
expect_err_has "$T/q.tsv:2:"
expect_out_has "q1	$id	$fp	0"
expect_out_has "q3	$id	$fp	0"
cp "$T/first.fp" "$T/q.fp"
run query "$T/s" --queries "$T/q.fp"
expect_status 0
expect_out_has "$id	$id	$fp	0"
run query "$T/s" --queries "$T/q.txt"
expect_status 2
expect_err_has "cannot tell the format"

# ---- query errors ----------------------------------------------------------
run query "$T/s" --fp 123
expect_status 2; expect_err_has "--fp takes 16 hex digits"
# Above the store's k (3 here): as exact, the tables probed at every prefix
# near the query's (README, "Distances above the store's k").
run query "$T/s" --fp "$fp" --k 4
expect_status 0
expect_out_has "$fp	0"
run query "$T/s" --fp "$fp" --k 9
expect_status 2
run query "$T/s"
expect_status 2; expect_err_has "exactly one of"
run query "$T/s" --fp "$fp" --text x
expect_status 2; expect_err_has "exactly one of"
run query "$T/missing" --fp "$fp"
expect_status 1; expect_err_has "no such store"
run query "$T/s" --fp "$fp" --bogus
expect_status 2; expect_err_has "unknown option '--bogus'"
run query "$T/s" --meta --fp "$fp"
expect_status 2; expect_err_has "--meta needs --json"
run query --help
expect_status 0; expect_out_has "Usage: simstore query"
run stats
expect_status 2; expect_err_has "missing STORE"
run stats "$T/nothing"
expect_status 1
run stats --help
expect_status 0; expect_out_has "Usage: simstore stats"

# ---- build errors: all or nothing -----------------------------------------
run build --help
expect_status 0; expect_out_has "Usage: simstore build"
run build "$T/s" "$sample"
expect_status 1; expect_err_has "already exists"
run build "$T/b"
expect_status 2; expect_err_has "missing INPUT"
run build "$T/b" --k 8 "$sample"
expect_status 2
run build "$T/b" --block-bytes 1000 "$sample"
expect_status 2; expect_err_has "power of two"
run build "$T/b" --tables 3 "$sample"
expect_status 1; expect_err_has "available table counts: 4, 10, 16"
[ ! -e "$T/b" ] && ok || fail "a failed build left $T/b"

printf 'a\t0123456789abcdef\nb\t0123456789abcdeg\nc\t0000000000000001\n' >"$T/bad.tsv"
run build "$T/b" "$T/bad.tsv"
expect_status 1
expect_err_has "$T/bad.tsv:2:"
expect_err_has "not created"
[ ! -e "$T/b" ] && ok || fail "a build with a bad record left $T/b"

printf 'a\t0123456789abcdef\nb\t0000000000000002\na\t0000000000000003\n' >"$T/dup.tsv"
run build "$T/b" "$T/dup.tsv"
expect_status 1
expect_err_has "$T/dup.tsv:3: duplicate document id 'a' (first at $T/dup.tsv:1)"
[ ! -e "$T/b" ] && ok || fail "a build with a duplicate id left $T/b"

printf '{"id": "x", "text": "ok"}\n{"id": "y", "text": \n' >"$T/bad.jsonl"
run build "$T/b" "$T/bad.jsonl"
expect_status 1
expect_err_has "$T/bad.jsonl:2:"
[ ! -e "$T/b" ] && ok || fail "a build with invalid JSON left $T/b"

long=$(printf 'x%.0s' $(seq 512))
printf '%s\t0000000000000001\n' "$long" >"$T/long.tsv"
run build "$T/b" "$T/long.tsv"
expect_status 1
expect_err_has "$T/long.tsv:1:"
[ ! -e "$T/b" ] && ok || fail "a build with an oversized id left $T/b"

run build "$T/b" "$T/no-such-file.tsv"
expect_status 1
expect_err_has "no-such-file.tsv"
run build "$T/b" "$T/doc.txt"
expect_status 1
expect_err_has "cannot tell the format"
run build "$T/b" --fingerprint-only "$T/dup.tsv"
expect_status 1
expect_err_has "a fingerprint-only store reads --format hex or u64"
[ ! -e "$T/b" ] && ok || fail "failed builds left $T/b"
ls "$T" | grep -q '\.tmp-' && fail "a failed build left a temporary directory" || ok

# --replace swaps a store atomically; the old one is gone afterwards.
printf 'only\t00000000000000ff\n' >"$T/one.tsv"
run build "$T/s" --replace "$T/one.tsv"
expect_status 0
expect_out_has "1 document, 1 distinct fingerprint;"
run query "$T/s" --fp 00000000000000ff --k 0
expect_out "-	only	00000000000000ff	0"

# stdin with --format; fingerprint output piped into build.
run fingerprint --jsonl "$sample"
cp "$T/out" "$T/sample.fp"
run_in "$T/sample.fp" build "$T/p" --format fp -
expect_status 0
expect_out_has "92 documents"
run_in "$T/sample.fp" build "$T/p2" -
expect_status 1
expect_err_has "cannot tell the format"

# Fingerprint-only stores: hex lines.
cut -f1 "$T/sample.fp" >"$T/sample.hex"
run build "$T/h" --fingerprint-only "$T/sample.hex"
expect_status 0
run query "$T/h" --fp "$fp" --k 0
expect_out "-	-	$fp	0"
run stats "$T/h"
expect_out_has "kind: fingerprint-only"

# Fingerprinting threads change nothing: the same answers, the same messages.
for t in 1 3; do
    run build "$T/t$t" --threads "$t" "$sample"
    expect_status 0
    run query "$T/t$t" --queries "$sample"
    cp "$T/out" "$T/answers.t$t"
done
cmp -s "$T/answers.t1" "$T/answers.t3" && ok || fail "--threads 1 and 3 give different stores"
awk 'NR == 50 { print; print } NR != 50' "$sample" >"$T/dup-big.jsonl"
for t in 1 3; do
    run build "$T/d$t" --threads "$t" "$T/dup-big.jsonl"
    expect_status 1
    grep -v '^simstore build: .* not created' "$T/err" >"$T/err.t$t"
done
expect_err_has "$T/dup-big.jsonl:51: duplicate document id"
cmp -s "$T/err.t1" "$T/err.t3" && ok || fail "messages depend on the thread count"

# ---- exactness through the CLI for k = 0..7 --------------------------------
# A deterministic clustered set (64-bit LCG in bash arithmetic): centres with
# neighbours 0..9 bits away, plus queries near and far.
gen() {
    local n=$1 seed=$2 prefix=$3 x c i b
    x=$seed
    for ((i = 0; i < n; i++)); do
        x=$((x * 6364136223846793005 + 1442695040888963407))
        if ((i % 6 == 0)); then c=$x; fi
        v=$c
        for ((b = 0; b < (i % 6) * 2 - 1; b++)); do
            x=$((x * 6364136223846793005 + 1442695040888963407))
            v=$((v ^ (1 << ((x >> 33) & 63))))
        done
        printf '%s%d\t%016x\n' "$prefix" "$i" "$v"
    done
}
gen 1500 12345 d >"$T/docs.tsv"
gen 120 777 q >"$T/queries.tsv"
# Queries near stored fingerprints too: reuse stored ones with a bit flipped.
awk -F'\t' 'NR % 10 == 0 { print "r" NR "\t" $2 }' "$T/docs.tsv" >>"$T/queries.tsv"
awk -F'\t' '{ print $2 "\t" $1 }' "$T/docs.tsv" "$T/queries.tsv" >"$T/all.fp"
for k in 0 1 2 3 4 5 6 7; do
    run build "$T/k$k" --k "$k" --block-bytes 256 "$T/docs.tsv"
    expect_status 0
    run query "$T/k$k" --queries "$T/queries.tsv"
    expect_status 0
    LC_ALL=C sort "$T/out" | cut -f1,2,4 | LC_ALL=C sort >"$T/got"
    "$SIMSTORE" pairs --k "$k" "$T/all.fp" |
        awk -F'\t' '($1 ~ /^[qr]/) != ($2 ~ /^[qr]/) { if ($1 ~ /^[qr]/) print $1 "\t" $2 "\t" $3; else print $2 "\t" $1 "\t" $3 }' |
        LC_ALL=C sort >"$T/want"
    if cmp -s "$T/got" "$T/want"; then ok; else
        fail "k=$k: query answers differ from brute force ($(wc -l <"$T/got") vs $(wc -l <"$T/want") lines)"
    fi
done
[ "$(wc -l <"$T/want")" -gt 100 ] && ok || fail "the k=7 oracle found too few pairs to mean much"
# Distances above a store's k: the same brute-force answers, from the
# batch path (which answers them one by one) and from --strategy
# one-by-one; and byte for byte what a store built for that k prints.
for pair in "0 2" "1 4" "3 5" "3 7" "6 7"; do
    set -- $pair
    k=$1 k2=$2
    "$SIMSTORE" pairs --k "$k2" "$T/all.fp" |
        awk -F'\t' '($1 ~ /^[qr]/) != ($2 ~ /^[qr]/) { if ($1 ~ /^[qr]/) print $1 "\t" $2 "\t" $3; else print $2 "\t" $1 "\t" $3 }' |
        LC_ALL=C sort >"$T/want"
    for strategy in auto one-by-one; do
        run query "$T/k$k" --k "$k2" --strategy "$strategy" --queries "$T/queries.tsv"
        expect_status 0; expect_err_empty
        cut -f1,2,4 "$T/out" | LC_ALL=C sort >"$T/got"
        if cmp -s "$T/got" "$T/want"; then ok; else
            fail "store k=$k, --k $k2 ($strategy): answers differ from brute force ($(wc -l <"$T/got") vs $(wc -l <"$T/want") lines)"
        fi
    done
    cp "$T/out" "$T/beyond"
    run query "$T/k$k2" --queries "$T/queries.tsv"
    expect_status 0
    cmp -s "$T/out" "$T/beyond" && ok || fail "store k=$k at --k $k2 prints otherwise than a store built for $k2"
done
# Fingerprint versions: each store records its own, and text queries are
# fingerprinted with it after any reopen: a version 1 store as version 1
# forever, a version 2 store as version 2, a new store (version 3 by
# default) as version 3. stats and inspect (and --json) show it.
printf '{"id":"nfc","text":"caf\xc3\xa9 cr\xc3\xa8me fine wine list"}\n{"id":"zh","text":"研究生命起源是一个古老的问题"}\n' >"$T/v.jsonl"
run build "$T/fv1" -q --cjk bigram --fp-version 1 "$T/v.jsonl"
expect_status 0
run build "$T/fv2" -q --cjk bigram --fp-version 2 "$T/v.jsonl"
expect_status 0
run build "$T/fvd" -q --cjk bigram "$T/v.jsonl"
expect_status 0
# Spaced Han: in the default store (version 3) a text and its copy with
# spaces between the characters are one fingerprint; a version 2 store,
# queried by text with default options, fingerprints the query with version
# 2 (its own), as `fingerprint --fp-version 2` does: the spaced copy finds
# itself at distance 0 and not the unspaced text.
spaced=$(printf '研究 生命 起源 是 一个 古老 的 问题')
printf '{"id":"zh","text":"研究生命起源是一个古老的问题"}\n{"id":"zs","text":"%s"}\n' "$spaced" >"$T/sp.jsonl"
run build "$T/fsp2" -q --cjk bigram --fp-version 2 "$T/sp.jsonl"
expect_status 0
run build "$T/fspd" -q --cjk bigram "$T/sp.jsonl"
expect_status 0
v2spaced=$(printf '%s' "$spaced" | "$SIMSTORE" fingerprint --fp-version 2 --cjk bigram | cut -f1)
v3spaced=$(printf '%s' "$spaced" | "$SIMSTORE" fingerprint --cjk bigram | cut -f1)
v2plain=$(printf '研究生命起源是一个古老的问题' | "$SIMSTORE" fingerprint --fp-version 2 --cjk bigram | cut -f1)
[ "$v2spaced" != "$v3spaced" ] && [ "$v2spaced" != "$v2plain" ] && ok || fail "spaced Han: versions 2 and 3 agree"
run query "$T/fsp2" --k 0 --text "$spaced"
expect_status 0; expect_out_lines 1; expect_out_has "	zs	$v2spaced	0"
run query "$T/fsp2" --k 0 --text "研究生命起源是一个古老的问题"
expect_status 0; expect_out_lines 1; expect_out_has "	zh	$v2plain	0"
run query "$T/fspd" --k 0 --text "$spaced"
expect_status 0; expect_out_lines 2; expect_out_has "	zh	$v3spaced	0"; expect_out_has "	zs	$v3spaced	0"
run stats "$T/fsp2"
expect_out_has "fingerprint version: 2"
run stats "$T/fspd"
expect_out_has "fingerprint version: 3"
run stats "$T/fvd" --json
expect_out_has '"fingerprint_version":3,"text_options":{"fp_version":3,"shingle":3,"cjk_shingle":2,"weights":"tf","lambda":null,"cjk":"bigram"}'
nfd=$(printf 'CAFE\xcc\x81 cre\xcc\x80me \xef\xac\x81ne wine list')
wrapped=$(printf '研究生\n命起源是一\n个古老的问题')
run query "$T/fv2" --k 0 --text "$nfd"
expect_status 0; expect_out_has "	nfc	"
run query "$T/fv2" --k 0 --text "$wrapped"
expect_status 0; expect_out_has "	zh	"
run query "$T/fv1" --k 0 --text "$nfd"
expect_status 0; expect_out_lines 0
run query "$T/fv1" --k 0 --text "$(printf 'caf\xc3\xa9 cr\xc3\xa8me fine wine list')"
expect_status 0; expect_out_has "	nfc	"
# The query's fingerprint is the version 1 one: the same as `fingerprint --fp-version 1`.
v1fp=$(printf '研究生命起源是一个古老的问题' | "$SIMSTORE" fingerprint --fp-version 1 --cjk bigram | cut -f1)
run query "$T/fv1" --k 0 --text "研究生命起源是一个古老的问题"
expect_status 0; expect_out_has "	zh	$v1fp	0"
# A text option given changes only itself: the version stays the store's.
run query "$T/fv1" --k 0 --shingle 3 --text "$nfd"
expect_status 0; expect_out_lines 0
run query "$T/fv1" --k 0 --fp-version 2 --text "$nfd"
expect_err_has "the store's texts were fingerprinted with --fp-version 1"
# An add to a version 1 store fingerprints as version 1.
printf '{"id":"zh2","text":"研究生命起源是一个古老的问题"}\n' >"$T/v2.jsonl"
run add "$T/fv1" -q "$T/v2.jsonl"
expect_status 0
run query "$T/fv1" --k 0 --fp "$v1fp"
expect_out_has "	zh2	"
run stats "$T/fv1"
expect_out_has "fingerprint version: 1"
expect_out_has "text options: --fp-version 1 --shingle 3 --weights tf --cjk bigram"
run stats "$T/fv2" --json
expect_out_has '"fingerprint_version":2,"text_options":{"fp_version":2,"shingle":3,"cjk_shingle":2,"weights":"tf","lambda":null,"cjk":"bigram"}'
run build "$T/fv3" -q --cjk bigram --cjk-shingle 3 --weights log --fp-version 2 "$T/v.jsonl"
expect_status 0
run inspect "$T/fv3" --brief
expect_out_has "fingerprint version: 2"
expect_out_has "text options: --fp-version 2 --shingle 3 --cjk-shingle 3 --weights log --cjk bigram"
run build "$T/fv5" -q --cjk bigram --cjk-shingle 3 --weights log "$T/v.jsonl"
expect_status 0
run inspect "$T/fv5" --brief
expect_out_has "fingerprint version: 3"
expect_out_has "text options: --fp-version 3 --shingle 3 --cjk-shingle 3 --weights log --cjk bigram"
run inspect "$T/fv1" --brief --json
expect_out_has '"fingerprint_version":1,"text_options":{"fp_version":1,"shingle":3,"cjk_shingle":null,"weights":"tf","lambda":null,"cjk":"bigram"}'
run build "$T/fv4" -q --fp-version 1 --weights log "$T/v.jsonl"
expect_status 2; expect_err_has "--weights log needs --fp-version 2"
finish
