#!/usr/bin/env python3
# smoke.py: the quality benchmark's own check (ctest test_quality_smoke), needing no extra packages: quality_features against tests/text/reference.py (and its --words 5 truth), the prefix-filtered truth against brute force, MinHash estimates, the templated and spaced_chinese corpus code on the sample's words and texts, and quality.py and thresholds.py end to end on small corpora.
#
#   smoke.py BUILD_DIR
import json
import os
import random
import re
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "text"))
import corpora as C  # noqa: E402
import edits as E  # noqa: E402
import quality as Q  # noqa: E402
import reference as R  # noqa: E402
import templated as T  # noqa: E402
import thresholds as TH  # noqa: E402

failures, passes = [], []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    (passes if ok else failures).append(what)


def reference_features(text):
    """Version 2 features, bigram mode, w = 3, c = 2, from the spec's second
    implementation (its shingle rule, section 13.3)."""
    pairs = R.tokenize(text.encode("utf-8"), 2)
    tokens, n, reached, out = [t for t, _ in pairs], len(pairs), False, set()
    for i, (_, cjk) in enumerate(pairs):
        end = i + (2 if cjk else 3)
        if end > n:
            if reached:
                continue
            end = n
        if end == n:
            reached = True
        out.add(R.xxh3(" ".join(tokens[i:end]).encode("utf-8")))
    return out


def make_corpus(path, docs_tsv, seed=1):
    """The sample corpus's texts of 80 tokens or more (32, in English, German,
    French, Spanish, Japanese and Chinese) with two edited copies each."""
    rng = random.Random(seed)
    with open(os.path.join(ROOT, "tests", "data", "sample.jsonl"), encoding="utf-8") as f:
        sample = [json.loads(line) for line in f if line.strip()]
    sample = sorted((r for r in sample if E.token_count(r["text"]) >= 80),
                    key=lambda r: str(r["id"]))
    sentences = [s for r in sample for p in E.paragraphs(r["text"]) for s in E.sentences_of(p)]
    with open(path, "w", encoding="utf-8") as out, open(docs_tsv, "w", encoding="utf-8") as tsv:
        tsv.write("id\tsource\tedit\tparams\torigin\n")
        for r in sample:
            script = "han" if sum(E.is_cjk(c) for c in r["text"]) > 50 else "latin"
            ctx = E.EditContext(script, sentences, [("Home | Next", "Footer line")])
            doc = E.Doc("", r["text"], "")
            sid = str(r["id"])
            out.write(json.dumps({"id": sid, "text": r["text"]}, ensure_ascii=False) + "\n")
            tsv.write(f"{sid}\t-\tsource\t-\tsample\n")
            for kind in rng.sample(list(E.EDITS), 2):
                text, params = E.EDITS[kind](rng, doc, ctx)
                out.write(json.dumps({"id": f"{sid}.{kind}", "text": text},
                                     ensure_ascii=False) + "\n")
                tsv.write(f"{sid}.{kind}\t{sid}\t{kind}\t{params}\tsample\n")


def sample_records():
    with open(os.path.join(ROOT, "tests", "data", "sample.jsonl"), encoding="utf-8") as f:
        return sorted((json.loads(line) for line in f if line.strip()), key=lambda r: str(r["id"]))


def make_templated(tmp, families=40):
    """corpora.py's templated corpus, its words taken from the sample texts
    (the word list may not be installed): smoke_templated."""
    entries = sorted({w for r in sample_records() for w in re.findall(r"[A-Za-z]+", r["text"])})
    words = T.Words(entries=entries)
    return C.build_templated(tmp, families, 1, name="smoke_templated", words=words)


def make_spaced(tmp, seed=1):
    """spaced_chinese's copies (corpora.spaced_copies) of the sample's Chinese
    and Japanese texts: smoke_spaced."""
    rng = random.Random(seed)
    han = [r for r in sample_records() if sum(E.is_cjk(c) for c in r["text"]) > 50]
    sentences = [s for r in han for p in E.paragraphs(r["text"]) for s in E.sentences_of(p)]
    ctx = E.EditContext("han", sentences, [])
    rows = []
    with open(os.path.join(tmp, "smoke_spaced.jsonl"), "w", encoding="utf-8") as out:
        for r in han:
            sid = f"s{r['id']}"
            out.write(json.dumps({"id": sid, "text": r["text"]}, ensure_ascii=False) + "\n")
            rows.append((sid, "-", "source", "-", "sample"))
            for kind, text, params in C.spaced_copies(rng, E.Doc("", r["text"], ""), ctx):
                out.write(json.dumps({"id": f"{sid}.{kind}", "text": text},
                                     ensure_ascii=False) + "\n")
                rows.append((f"{sid}.{kind}", sid, kind, params, "sample"))
    C.write_docs_tsv(tmp, "smoke_spaced", rows)
    return rows


def word_features(tool, tmp, texts, words=5):
    path = os.path.join(tmp, "w.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for i, t in enumerate(texts):
            f.write(json.dumps({"id": str(i), "text": t}, ensure_ascii=False) + "\n")
    subprocess.run([tool, "--words", str(words), "--features", path + ".f", path], check=True)
    return [set(a) for a in Q.read_features(path + ".f", len(texts))]


def check_words(tool, tmp, texts):
    """The --words 5 truth: word 5-shingles of reference.py's tokens on Latin
    text, Han characters as words, and spacing or line breaks between Han
    characters change nothing."""
    latin = [t for t in texts if not any(E.is_cjk(c) for c in t)]
    got = word_features(tool, tmp, latin)
    bad = 0
    for t, g in zip(latin, got):
        toks = [w for w, _ in R.tokenize(t.encode("utf-8"), 2)]
        shingles = [" ".join(toks[i:i + 5]) for i in range(max(1, len(toks) - 4))]
        bad += g != {R.xxh3(x.encode("utf-8")) for x in shingles}
    check(latin and not bad, f"--words 5 = reference.py's 5-shingles on {len(latin)} Latin texts")
    example = word_features(tool, tmp, ["中文字测试 Hello", "中 文 字\n测 试 HELLO!"])
    want = {R.xxh3(x.encode("utf-8")) for x in ("中 文 字 测 试", "文 字 测 试 hello")}
    check(example[0] == want and example[1] == want, "--words 5: Han characters are words")
    han = [t for t in texts if sum(E.is_cjk(c) for c in t) > 50]
    rng = random.Random(3)
    variants = [E.space_han(rng, t, 1.0) for t in han] + [E.space_han(rng, t, 0.5) for t in han] \
        + [E.rewrap_text(t, 17) for t in han]
    a, b = word_features(tool, tmp, han * 3), word_features(tool, tmp, variants)
    check(han and a == b, f"--words 5: {len(han)} Han texts spaced, half spaced, re-wrapped: the same")


def main():
    build = sys.argv[1]
    tool = os.path.join(build, "bench", "quality_features")
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "smoke.jsonl")
        make_corpus(corpus, os.path.join(tmp, "smoke.docs.tsv"))
        with open(corpus, encoding="utf-8") as f:
            texts = [json.loads(line)["text"] for line in f]
        feat = os.path.join(tmp, "f.bin")
        sig = os.path.join(tmp, "s.bin")
        subprocess.run([tool, "--features", feat, "--minhash", "128", "--signatures", sig,
                        corpus], check=True)
        feats = Q.read_features(feat, len(texts))

        # 1. The features are the spec's: reference.py agrees on every document.
        bad = [i for i, t in enumerate(texts) if set(feats[i]) != reference_features(t)]
        check(not bad, f"quality_features = reference.py on {len(texts)} documents"
              + (f" (differ: {bad[:5]})" if bad else ""))
        check(all(list(a) == sorted(set(a)) for a in feats), "features sorted and distinct")

        # 2. The prefix filter finds exactly the pairs brute force finds.
        sets = [set(a) for a in feats]
        for floor in (0.3, 0.5, 0.8, 0.95):
            brute = {}
            for i in range(len(sets)):
                for j in range(i + 1, len(sets)):
                    inter = len(sets[i] & sets[j])
                    union = len(sets[i] | sets[j])
                    if union and inter >= floor * union - 1e-9:
                        brute[(i, j)] = (inter, union)
            fast, _ = Q.jaccard_pairs(feats, floor)
            check(fast == brute, f"truth at J >= {floor}: {len(fast)} pairs, brute force "
                  f"{len(brute)}")

        # 3. MinHash estimates within 0.2 of the truth, equal sets equal.
        sigs = Q.read_signatures(sig, len(texts), 128)
        worst = 0.0
        for (i, j), (inter, union) in Q.jaccard_pairs(feats, 0.3)[0].items():
            est = sum(1 for u, v in zip(sigs[i], sigs[j]) if u == v) / 128
            worst = max(worst, abs(est - inter / union))
        check(worst < 0.2, f"MinHash estimates within 0.2 (worst {worst:.3f})")
        check(Q.lsh_params(0.8, 128) == (9, 13), "LSH bands for t = 0.8: 9 x 13")
        ok = True
        for t in TH.THRESHOLDS:
            b, r = TH.lsh_params(t)
            b2 = 128 // (r + 1)
            ok &= 1 - (1 - t ** r) ** b >= 0.99 and 1 - (1 - t ** (r + 1)) ** b2 < 0.99
        check(ok and TH.lsh_params(0.7) == (32, 4),
              "thresholds.py's bands: P(candidate | J = t) >= 0.99 with the most rows")
        check_words(tool, tmp, texts)

        # 3b. The new corpora's code on the sample.
        made = make_templated(tmp)
        with open(os.path.join(tmp, "smoke_templated.jsonl"), encoding="utf-8") as f:
            tdocs = [json.loads(line) for line in f]
        counts = [len(d["text"].split()) for d in tdocs]
        check(made["sources"] == 40 and 3 * 40 <= len(tdocs) <= 5 * 40 and
              min(counts) >= T.WORDS_MIN - 10 and max(counts) <= T.WORDS_MAX + 25,
              f"templated: 40 families, {len(tdocs)} documents of {min(counts)}..{max(counts)} "
              "words")
        tf = word_features(tool, tmp, [d["text"] for d in tdocs])
        brute = {(i, j) for i in range(len(tf)) for j in range(i + 1, len(tf))
                 if len(tf[i] & tf[j]) >= 0.5 * len(tf[i] | tf[j]) - 1e-9}
        fast = set(Q.jaccard_pairs([sorted(x) for x in tf], 0.5)[0])
        check(fast == brute and brute, f"templated: truth at J >= 0.5 over 5-shingles: "
              f"{len(fast)} pairs, brute force {len(brute)}")
        spaced = make_spaced(tmp)
        with open(os.path.join(tmp, "smoke_spaced.jsonl"), encoding="utf-8") as f:
            sdocs = {json.loads(line)["id"]: json.loads(line)["text"] for line in f}
        pairs = [(sdocs[r[1]], sdocs[r[0]]) for r in spaced if r[2] == "spaced"]
        fa = word_features(tool, tmp, [p[0] for p in pairs])
        fb = word_features(tool, tmp, [p[1] for p in pairs])
        check(pairs and fa == fb and all(a != b for a, b in pairs),
              f"spaced_chinese: {len(pairs)} spaced copies, J = 1 to their sources")

        # 4. The whole run: a report with every method.
        out = os.path.join(tmp, "out")
        r = subprocess.run([sys.executable, os.path.join(HERE, "quality.py"), tmp, out,
                            "--build", build, "--only", "smoke"], capture_output=True, text=True)
        check(r.returncode == 0, "quality.py runs" + ("" if r.returncode == 0 else
                                                         ":\n" + r.stderr[-2000:]))
        if r.returncode == 0:
            with open(os.path.join(out, "results.json")) as f:
                res = json.load(f)["corpora"]["smoke"]
            names = [m["name"] for m in res["methods"]]
            check("simstore defaults" in names and "simstore v2 k=3" in names and
                  any(n.startswith("MinHash") for n in names),
                  f"methods measured: {len(names)}")
            exact = next(m for m in res["methods"] if m["name"] == "simstore v2 k=3")
            check(exact["eval"]["bands"]["1.0"]["recall"] in (None, 1.0),
                  "k = 3 finds every pair with J = 1 in the smoke corpus")

        # 5. thresholds.py (issue 36) on the three small corpora.
        out = os.path.join(tmp, "out36")
        names = "smoke,smoke_templated,smoke_spaced"
        r = subprocess.run([sys.executable, os.path.join(HERE, "thresholds.py"), tmp, out,
                            "--build", build, "--only", names], capture_output=True, text=True)
        check(r.returncode == 0, "thresholds.py runs" + ("" if r.returncode == 0 else
                                                           ":\n" + r.stderr[-2000:]))
        if r.returncode == 0:
            with open(os.path.join(out, "results.json")) as f:
                res = json.load(f)["corpora"]
            rows = {n: len(res[n]["methods"]) for n in names.split(",")}
            # Per threshold (3): --min-similarity t, --k 3 --min-similarity t,
            # the defaults and MinHash LSH.
            check(all(v == 12 for v in rows.values()), f"thresholds.py rows: {rows}")
            sp = res["smoke_spaced"]
            check(sp["truth_bands"].get("1.0", 0) >= len(pairs),
                  f"smoke_spaced: {sp['truth_bands'].get('1.0', 0)} pairs at J = 1")
            mh = next(m for m in res["smoke_templated"]["methods"]
                      if m["name"].startswith("MinHash LSH t=0.9"))
            check(mh["eval"]["precision"] in (None, 1.0) and mh["eval"]["reported"] > 0,
                  f"templated: MinHash t=0.9 reports {mh['eval']['reported']} pairs, all right")
            check(len(res["smoke"]["near"]) == 6, "near-threshold table: 3 thresholds x 2 bands")
    print(f"{len(passes)} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
