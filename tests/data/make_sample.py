#!/usr/bin/env python3
# make_sample.py: writes tests/data/sample.jsonl (the sample corpus of the
# README's quick start) and tests/data/sample.pairs (its planted near-duplicate
# pairs, one "id_a<TAB>id_b" per line, id_a < id_b in byte order, sorted).
#
# Each long article of sample_texts.py is the base of a group; the variants
# below are made from it by one small edit each (a typo fixed or made, a word
# changed, whitespace re-wrapped, punctuation or letter case changed). Every
# pair inside a group is planted; documents of different groups and the short
# documents are unrelated, except one short notice posted twice.
#
# A one-word edit of a ~500-word article moves its 3-shingle simhash by about
# 0 to 6 bits, so not every edit stays within k = 3: the edits below were
# picked among candidates so that all planted pairs do, with friso and with
# the bigram fallback (sample.sh checks both).
# tests/cli/sample.sh checks that `simstore pairs --k 3` finds exactly the
# planted pairs.
#
#   python3 tests/data/make_sample.py   (from the top of the tree)
import json
import os
import random
import sys
import textwrap

sys.dont_write_bytecode = True
import sample_texts as T  # noqa: E402


def rewrap(text, width=58):
    """The same words, laid out differently: hard-wrapped lines, blank lines
    doubled, two spaces after full stops."""
    paras = [" ".join(p.split()) for p in text.split("\n\n")]
    paras = [p.replace(". ", ".  ") for p in paras]
    return "\n\n\n".join(textwrap.fill(p, width) for p in paras) + "\n"


def replace_once(text, old, new):
    assert text.count(old) >= 1, old
    return text.replace(old, new, 1)


def heading_upper(text):
    head, rest = text.split("\n", 1)
    return head.upper() + "\n" + rest


def cjk_punct_ascii(text):
    for a, b in (("，", ", "), ("。", ". "), ("、", ", "), ("：", ": ")):
        text = text.replace(a, b)
    return text


GROUPS = [
    ("lighthouse-carrow-point", T.LIGHTHOUSE, [
        ("typo-fixed", lambda t: replace_once(t, "harder then anyone", "harder than anyone")),
        ("rewrapped", rewrap),
        ("headline-caps", heading_upper),
    ]),
    ("alder-valley-flood-plan", T.RIVER, [
        ("word-changed", lambda t: replace_once(t, "more than four hundred homes",
                                                 "more than five hundred homes")),
        ("rewrapped", rewrap),
    ]),
    ("linden-street-bakery", T.BAKERY, [
        ("punctuation", lambda t: t.replace(", ", "; ").replace("'", "\u2019")),
        ("typo", lambda t: replace_once(t, "sourdough starter", "sourdough stater")),
    ]),
    ("lossless-compression-explainer", T.COMPRESSION, [
        ("word-changed", lambda t: replace_once(t, "copy twenty bytes", "copy thirty bytes")),
    ]),
    ("riverside-chess-club", T.CHESS, [
        ("rewrapped", rewrap),
        ("typo-fixed", lambda t: replace_once(t, "a horseshoe of tables", "a horseshoe of tabels")),
    ]),
    ("fr-marche-saint-aubin", T.FRENCH, [
        ("titre-majuscules", heading_upper),
        ("coquille", lambda t: replace_once(t, "Une fromagère raconte", "Une fromagére raconte")),
    ]),
    ("de-fahrradbruecke", T.GERMAN, [
        ("umbruch", rewrap),
        ("tippfehler", lambda t: replace_once(t, "knapp zwei Jahren Bauzeit",
                                              "knapp zwei Jahren Bauzet")),
    ]),
    ("es-biblioteca-san-lorenzo", T.SPANISH, [
        ("cifra", lambda t: replace_once(t, "cuarenta mil volúmenes", "cincuenta mil volúmenes")),
    ]),
    ("zh-shancun-chayuan", T.CHINESE_TEA, [
        ("biaodian", cjk_punct_ascii),
        ("xiugai", lambda t: replace_once(t, "翻了一番", "涨了一倍")),
    ]),
    ("zh-chengji-tielu", T.CHINESE_TRAIN, [
        ("huanhang", lambda t: t.replace("。", "。\n\n")),
        ("xiugai", lambda t: replace_once(t, "八个车站", "九个车站")),
    ]),
]

EXACT_REPOSTS = [("notice-pool-closure", "notice-pool-closure-repost")]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    records = []
    planted = []
    for base_id, text, variants in GROUPS:
        ids = [base_id]
        records.append({"id": base_id, "text": text})
        for suffix, edit in variants:
            vid = f"{base_id}-{suffix}"
            ids.append(vid)
            records.append({"id": vid, "text": edit(text)})
        for i in range(len(ids)):
            for j in range(i + 1, len(ids)):
                planted.append(tuple(sorted((ids[i], ids[j]), key=lambda s: s.encode())))
    for doc_id, meta, text in T.SHORT:
        rec = {"id": doc_id, "text": text}
        if meta is not None:
            rec["meta"] = meta
        records.append(rec)
    for a, b in EXACT_REPOSTS:
        planted.append(tuple(sorted((a, b), key=lambda s: s.encode())))
    # Near-duplicates are not neighbours in the file.
    random.Random(20240601).shuffle(records)
    with open(os.path.join(here, "sample.jsonl"), "w", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    planted.sort(key=lambda p: (p[0].encode(), p[1].encode()))
    with open(os.path.join(here, "sample.pairs"), "w", encoding="utf-8") as f:
        for a, b in planted:
            f.write(f"{a}\t{b}\n")
    print(f"{len(records)} documents, {len(planted)} planted pairs")


if __name__ == "__main__":
    main()
