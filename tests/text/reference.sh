#!/usr/bin/env bash
# reference.sh: `simstore fingerprint --cjk bigram` and tests/text/reference.py
# (the spec implemented again, in Python) must print the same lines, over the
# sample corpus, ill-formed bytes and generated texts, for several options of
# fingerprint versions 1, 2 and 3 (spaced Han and kana among the generated
# texts), the sketches of format/sketch.md, and over a
# templated corpus with its boilerplate removed (a store's recorded set
# against the reference's own).
# Sampled (the sanitizer pass of tests/run.sh: SIMSTORE_SAMPLED without
# SIMSTORE_DENSE): every other option set of each sweep, versions 1, 2 and
# 3 among them; the Python side, not the instrumented one, is most of the
# time.
# Usage: reference.sh PATH/TO/simstore PATH/TO/python3
set -u
dense() { [ -n "${SIMSTORE_DENSE:-}" ] && [ "$SIMSTORE_DENSE" != 0 ]; }
sampled() { [ -n "${SIMSTORE_SAMPLED:-}" ] && [ "$SIMSTORE_SAMPLED" != 0 ] && ! dense; }
# skip N: option set N (from 0) of a sweep is left out of the sample.
skip() { sampled && [ $(($1 % 2)) = 1 ]; }
SIMSTORE=$1
PY=$2
SRC=${SIMSTORE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
REF=$SRC/tests/text/reference.py
T=$(mktemp -d "${TMPDIR:-/tmp}/simstore-ref-XXXXXX")
trap 'rm -rf "$T"' EXIT

if ! "$PY" -c 'import unicodedata, sys; sys.exit(unicodedata.unidata_version != "14.0.0")'; then
    echo "SKIP: this python3 does not have Unicode 14.0.0"
    exit 0
fi

# Generated inputs: every kind of ill-formed UTF-8, scripts, long lines.
"$PY" - "$T" <<'PYEOF'
import os, random, sys
out = sys.argv[1]
rnd = random.Random(4242)
words = ["alpha", "Beta", "GAMMA", "déjà", "vu", "Straße", "ΣΟΦΊΑ", "中国", "人民", "ひらがな",
         "안녕", "２０２３", "soft\u00adhyphen", "emoji\U0001F600", "x", "yz", "naïve", "Œuvre",
         "cafe\u0301", "\ufb01ne", "ＡＢＣ", "ｶﾀｶﾅ", "\u1112\u1161\u11ab", "a\u0323\u0302", "㊥"]
seps = [" ", " ", "\n", "\n\n", ", ", ". ", "\t", " \u3000 ", "\r\n\r\n", "\n", " \n ", "\r\n",
        "", "\u2028", "，"]
for i in range(40):
    parts = []
    for _ in range(rnd.randrange(0, 400)):
        parts.append(rnd.choice(words))
        parts.append(rnd.choice(seps))
    data = "".join(parts).encode("utf-8")
    if i % 3 == 0:
        # splice in raw bytes, valid or not
        b = bytearray(data)
        for _ in range(rnd.randrange(1, 20)):
            pos = rnd.randrange(0, len(b) + 1)
            b[pos:pos] = bytes(rnd.randrange(0x80, 0x100) if rnd.random() < 0.8 else
                               rnd.randrange(0, 0x80) for _ in range(rnd.randrange(1, 5)))
        data = bytes(b)
    with open(os.path.join(out, f"gen{i:02d}.txt"), "wb") as f:
        f.write(data)
# Spaced CJK (version 3 joins Han and kana across White_Space holding at most
# one line break): single characters and short runs between every kind of
# White_Space run, line break, ignorable and near-space that is not one.
cjk = ["中", "国", "人民", "我们是", "々", "〇", "ひ", "らが", "カタ", "ｶﾀ", "ー", "丽", "⼀",
       "\u4e00\ufe00", "\U00020000", "a", "Ab", "1", "é", "，", "。"]
gaps = [" ", "  ", "\t", "\u3000", "\u00a0", " \u3000\t ", "\n", " \n ", "\r\n", "\r",
        "\n\n", "\r\n\r\n", "\n \n", "\u2028", "\u2029", "\u0085", "\u000b\u000c",
        "\u1680", "\u2000\u200a", "\u202f\u205f", "\u200b", " \u00ad ", "\u00ad",
        " \u200d", "\u2060 ", "\ufeff", "", "", " ", " ", " \ufe0f "]
for i in range(24):
    parts = []
    for _ in range(rnd.randrange(1, 300)):
        parts.append(rnd.choice(cjk))
        parts.append(rnd.choice(gaps))
    data = "".join(parts).encode("utf-8")
    if i % 4 == 3:
        b = bytearray(data)
        for _ in range(rnd.randrange(1, 6)):
            pos = rnd.randrange(0, len(b) + 1)
            b[pos:pos] = bytes([rnd.randrange(0x80, 0x100)])
        data = bytes(b)
    with open(os.path.join(out, f"gen-cjk{i:02d}.txt"), "wb") as f:
        f.write(data)
PYEOF

# A templated corpus for boilerplate (spec section 15): 160 pages of three
# templates whose lines come back in other case, spacing, punctuation,
# full-width forms, a CR or a ligature, around bodies of paragraphs (Han next
# to Han template lines), a few pages of template alone.
"$PY" - "$T" <<'PYEOF'
import json, os, random, sys
out = sys.argv[1]
rnd = random.Random(77)
words = ["alpha", "Beta", "déjà", "vu", "Straße", "中国", "人民", "ひらがな", "안녕", "２０２３",
         "naïve", "Œuvre", "cafe\u0301", "\ufb01ne", "ＡＢＣ", "x", "yz", "river", "stone"]
def line(n):
    return " ".join(rnd.choice(words) for _ in range(n))
templates = [[line(rnd.randint(1, 6)) for _ in range(6)] for _ in range(3)]
templates[0][2] = "\u65b0\u95fb\u4e2d\u5fc3"  # Han alone: joins Han around it (version 2)
templates[1][4] = "Home | \ufb01ne Print | ＣＯＮＴＡＣＴ"
def variant(l):
    r = rnd.random()
    if r < 0.2:
        return l.upper()
    if r < 0.4:
        return "  " + l.replace(" ", "  ,  ") + " !"
    if r < 0.5:
        return l + "\r"
    return l
with open(os.path.join(out, "templated.jsonl"), "w") as f:
    for i in range(160):
        t = templates[i % 3] if i % 10 else templates[rnd.randrange(3)]
        body = []
        for _ in range(rnd.randint(0 if i % 17 == 0 else 1, 4)):
            body.append("\n".join(line(rnd.randint(1, 9)) for _ in range(rnd.randint(1, 3))))
            if rnd.random() < 0.3:
                body[-1] += "\n" + variant(rnd.choice(t))
        text = "\n".join(variant(l) for l in t[:3]) + "\n\n" + "\n\n".join(body)
        text += "\n" + "\n".join(variant(l) for l in t[3:]) + ("\n" if i % 2 else "")
        if i % 13 == 0:
            text = "\u4eba\u6c11\n" + text
        f.write(json.dumps({"id": "t%03d" % i, "text": text}, ensure_ascii=False) + "\n")
PYEOF

failures=0
compare() {
    local what=$1
    shift
    "$SIMSTORE" fingerprint --cjk bigram "$@" >"$T/c.out" 2>/dev/null
    "$PY" "$REF" "$@" >"$T/p.out"
    if ! cmp -s "$T/c.out" "$T/p.out"; then
        echo "FAIL: $what: simstore and reference.py differ:"
        diff "$T/c.out" "$T/p.out" | head -10
        failures=$((failures + 1))
    fi
}
for opts in "--fp-version 1" "--fp-version 1 --shingle 1" \
            "--fp-version 1 --shingle 2 --weights length --lambda 0.75" \
            "--fp-version 1 --weights length" "--fp-version 1 --shingle 5 --weights length --lambda 7" \
            "--fp-version 2" "--fp-version 2 --shingle 1" "--fp-version 2 --cjk-shingle 3 --weights log" \
            "--fp-version 2 --shingle 2 --cjk-shingle 1" \
            "--fp-version 2 --shingle 5 --cjk-shingle 2 --weights length --lambda 7" \
            "--fp-version 2 --shingle 1 --cjk-shingle 4 --weights log" \
            "" "--fp-version 3 --shingle 1" "--fp-version 3 --cjk-shingle 3 --weights log" \
            "--fp-version 3 --shingle 2 --cjk-shingle 1 --weights length --lambda 7"; do
    i=$((${i:--1} + 1))
    skip $i && continue
    # shellcheck disable=SC2086
    compare "sample ($opts)" $opts --jsonl "$SRC/tests/data/sample.jsonl"
    # shellcheck disable=SC2086
    compare "generated ($opts)" $opts "$T"/gen*.txt
    # shellcheck disable=SC2086
    compare "generated paragraphs ($opts)" $opts --paragraphs "$T"/gen*.txt
done
# Boilerplate: a store built with --boilerplate auto records the set; the
# reference finds it itself from the same corpus.
for opts in "--fp-version 1" "--fp-version 2" "" "--fp-version 1 --shingle 1" \
            "--fp-version 2 --shingle 2 --weights log" "--shingle 2 --weights log"; do
    j=$((${j:--1} + 1))
    skip $j && continue
    for fraction in 0.1 0.3; do
        rm -rf "$T/store"
        # shellcheck disable=SC2086
        "$SIMSTORE" build "$T/store" --quiet --cjk bigram $opts --boilerplate auto \
            --boilerplate-fraction "$fraction" "$T/templated.jsonl" >/dev/null 2>&1
        for mode in "" --paragraphs; do
            "$SIMSTORE" fingerprint --store "$T/store" $mode --jsonl "$T/templated.jsonl" \
                >"$T/c.out" 2>/dev/null
            # shellcheck disable=SC2086
            "$PY" "$REF" $opts $mode --boilerplate-fraction "$fraction" --boilerplate-min-docs 100 \
                --jsonl "$T/templated.jsonl" >"$T/p.out"
            if [ ! -s "$T/c.out" ] || ! cmp -s "$T/c.out" "$T/p.out"; then
                echo "FAIL: boilerplate ($opts $mode, fraction $fraction): simstore and reference.py differ:"
                diff "$T/c.out" "$T/p.out" | head -10
                failures=$((failures + 1))
            fi
        done
    done
done
# format/sketch.md: the sketches of whole documents, each kind, a few options.
for opts in "--sketch minhash64 --fp-version 2" "--sketch minhash16 --fp-version 1" \
            "--sketch minhash32 --shingle 1 --cjk-shingle 3 --weights log --fp-version 2" \
            "--sketch minhash128 --fp-version 2" "--sketch minhash256 --weights log --fp-version 2" \
            "--sketch minhash64" "--sketch minhash32 --shingle 1 --cjk-shingle 3 --weights log" \
            "--sketch minhash256 --weights log"; do
    l=$((${l:--1} + 1))
    skip $l && continue
    # shellcheck disable=SC2086
    compare "sample ($opts)" $opts --jsonl "$SRC/tests/data/sample.jsonl"
    # shellcheck disable=SC2086
    compare "generated ($opts)" $opts "$T"/gen*.txt
done
n=$(wc -l <"$T/c.out")
echo "compared $n lines per run; $failures failures"
[ "$failures" = 0 ]
