#!/usr/bin/env python3
# smoke.py: the quality benchmark's own check (ctest test_quality_smoke), needing no extra packages: quality_features against tests/text/reference.py, the prefix-filtered truth against brute force, MinHash estimates, and quality.py end to end on a small corpus of the sample texts and their generated edits.
#
#   smoke.py BUILD_DIR
import json
import os
import random
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "text"))
import edits as E  # noqa: E402
import quality as Q  # noqa: E402
import reference as R  # noqa: E402

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
    print(f"{len(passes)} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
