#!/usr/bin/env python3
# thresholds.py: issue 36's measurement on corpora made by corpora.py: exact word 5-shingle Jaccard truth down to J = 0.5, recall per band, families fully found and precision at J = 0.7, 0.8, 0.9 for simstore (--min-similarity J, plain defaults) and a MinHash LSH tuned per J, and how often estimates fall below t just above it; see bench/quality/README.md.
#
#   thresholds.py CORPUSDIR OUTDIR [--build BUILD] [--only NAME,...] [--threads N] [--seed S]
#
# Truth (the one rule, in build/bench/quality_features --words 5): the text
# NFKC-normalized with case folding, lib/text's tokens with every Han or kana
# character a token of its own, features the runs of 5 consecutive tokens.
# Every pair with J >= 0.5 is found, exactly, by quality.py's all-pairs
# prefix filter (exhaustive: no pair with J >= 0.5 can escape it; smoke.py
# checks it against brute force).
#
# Writes OUTDIR/report.md (the tables, also printed), OUTDIR/results.json
# (every figure) and OUTDIR/near.tsv (every true pair with J in [t, t + 0.05)
# and both methods' estimates).
import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quality as Q  # noqa: E402

WORDS = 5                       # word shingles of the truth and of the MinHash baseline
FLOOR = 0.5                     # truth holds every pair with J >= FLOOR
BANDS = [("0.5-0.7", 0.5, 0.7), ("0.7-0.8", 0.7, 0.8), ("0.8-0.9", 0.8, 0.9),
         ("0.9-0.95", 0.9, 0.95), ("0.95-1", 0.95, 1.0), ("1.0", 1.0, None)]
THRESHOLDS = [0.7, 0.8, 0.9]
SLACK = 0.1                     # precision: a reported pair is false when J < t - SLACK
PERMUTATIONS = 128
CANDIDATE_P = 0.99              # LSH: P(candidate | J = t) at least this
NEAR = [(0.0, 0.02), (0.02, 0.05)]  # near-threshold bands [t + lo, t + hi)
SKETCH_BINS = 2048              # minhash256, the default sketch (format/sketch.md)
EPS = 1e-9


def band_of(j):
    if j >= 1.0 - EPS:
        return "1.0"
    for name, lo, hi in BANDS[:-1]:
        if lo - EPS <= j < hi - EPS:
            return name
    return None


def lsh_params(t, permutations=PERMUTATIONS, p=CANDIDATE_P):
    """Bands b and rows r (b = floor(n / r)): the most rows, so the fewest
    candidates, with P(candidate | J = t) = 1 - (1 - t^r)^b >= p."""
    best = (permutations, 1)
    for r in range(1, permutations + 1):
        b = permutations // r
        if 1 - (1 - t ** r) ** b >= p:
            best = (b, r)
    return best


def minhash_estimate(sigs, i, j):
    a, b = sigs[i], sigs[j]
    return sum(1 for u, v in zip(a, b) if u == v) / len(a)


def norm_cdf(x):
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def p_below_sketch(j, t, bins=SKETCH_BINS):
    """P(Ĵ < t) for the 1-bit sketch of m bins at true J (format/sketch.md
    section 6): agreeing bins ~ Binomial(m, (1 + J) / 2), Ĵ = 2 A / m - 1."""
    p = (1 + j) / 2
    need = math.ceil((t + 1) * bins / 2 - EPS)  # A >= need <=> Ĵ >= t
    sd = math.sqrt(bins * p * (1 - p))
    return norm_cdf((need - 0.5 - bins * p) / sd) if sd else float(j < t)


def p_below_minhash(j, t, n=PERMUTATIONS):
    """P(estimate < t) for n-permutation MinHash: equal minima ~ Binomial(n, J)."""
    need = math.ceil(t * n - EPS)
    return sum(math.comb(n, k) * j ** k * (1 - j) ** (n - k) for k in range(need))


def store_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


def read_pairs(path, index_of, with_estimate=False):
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            i, j = index_of[fields[0]], index_of[fields[1]]
            if i != j:
                est = float(fields[3]) if with_estimate and fields[3] != "-" else None
                out[(min(i, j), max(i, j))] = est
    return out


def families_of(docs_tsv, index_of):
    """Document index -> family (its source's index; a source is its own)."""
    fam = {}
    with open(docs_tsv, encoding="utf-8") as f:
        next(f)
        for line in f:
            eid, src = line.split("\t")[:2]
            fam[index_of[eid]] = index_of[src] if src != "-" else index_of[eid]
    return fam


def evaluate(truth_j, reported, t, family):
    """Recall per band, recall at J >= t, families fully found at t, precision."""
    by_band = Counter(band_of(j) for j in truth_j.values())
    found = Counter(band_of(truth_j[p]) for p in reported if p in truth_j)
    at_t = [p for p, j in truth_j.items() if j >= t - EPS]
    fam_pairs = defaultdict(list)
    for p in at_t:
        if family[p[0]] == family[p[1]]:
            fam_pairs[family[p[0]]].append(p)
    full = sum(1 for ps in fam_pairs.values() if all(p in reported for p in ps))
    good = sum(1 for p in reported if truth_j.get(p, 0.0) >= t - SLACK - EPS)
    return {
        "reported": len(reported),
        "bands": {name: {"truth": by_band[name], "found": found[name],
                         "recall": found[name] / by_band[name] if by_band[name] else None}
                  for name, _, _ in BANDS},
        "recall_t": sum(1 for p in at_t if p in reported) / len(at_t) if at_t else None,
        "families": len(fam_pairs),
        "families_full": full / len(fam_pairs) if fam_pairs else None,
        "precision": good / len(reported) if reported else None,
    }


def run_corpus(name, a, simstore, features_tool, work):
    corpus = os.path.join(a.corpusdir, f"{name}.jsonl")
    ids = Q.read_ids(corpus)
    index_of = {x: i for i, x in enumerate(ids)}
    family = families_of(os.path.join(a.corpusdir, f"{name}.docs.tsv"), index_of)
    n = len(ids)

    # Truth: word 5-shingles, every pair with J >= FLOOR.
    t0 = time.monotonic()
    feat_path = os.path.join(work, f"{name}.w{WORDS}.features")
    Q.run([features_tool, "--words", str(WORDS), "--features", feat_path, corpus])
    feats = Q.read_features(feat_path, n)
    truth, wsets = Q.jaccard_pairs(feats, FLOOR)
    del feats
    truth_j = {p: inter / union for p, (inter, union) in truth.items()}
    truth_seconds = time.monotonic() - t0
    print(f"thresholds.py: {name}: {n} documents, {len(truth_j)} pairs with J >= {FLOOR} "
          f"({truth_seconds:.1f} s)", file=sys.stderr)
    res = {"documents": n, "truth_pairs": len(truth_j), "truth_seconds": truth_seconds,
           "truth_bands": {b: c for b, c in Counter(band_of(j) for j in truth_j.values()).items()},
           "methods": []}

    found_by = {}

    def add(method, t, reported, seconds, bytes_per_doc, extra=None):
        found_by[method] = reported
        e = evaluate(truth_j, reported, t, family)
        res["methods"].append(dict({"name": method, "t": t, "seconds": seconds,
                                    "bytes_per_doc": bytes_per_doc, "eval": e}, **(extra or {})))
        print(f"thresholds.py: {name}: {method} at t={t}: {len(reported)} pairs, "
              f"{seconds:.1f} s", file=sys.stderr)

    # simstore: one store at the defaults (minhash256 sketches), then pairs.
    store = os.path.join(work, "store")
    out = os.path.join(work, "pairs.tsv")
    build_s = Q.run([simstore, "build", store, "--replace", "--quiet",
                     "--threads", str(a.threads), corpus])
    per_doc = store_bytes(store) / n
    res["simstore_build_seconds"] = build_s
    threads = ["--threads", str(a.threads)]
    s = Q.run([simstore, "pairs", store] + threads, out)
    plain = set(read_pairs(out, index_of))
    for t in THRESHOLDS:
        add("simstore defaults", t, plain, build_s + s, per_doc, {"pairs_seconds": s})
    for t in THRESHOLDS:
        s = Q.run([simstore, "pairs", store, "--min-similarity", str(t)] + threads, out)
        add(f"simstore --min-similarity {t}", t, set(read_pairs(out, index_of)), build_s + s,
            per_doc, {"pairs_seconds": s})
        # The band candidates with the store's own k (3) beside them: what
        # the join within 7 bits adds to the bands (format/sketch.md 6.2).
        s = Q.run([simstore, "pairs", store, "--k", "3", "--min-similarity", str(t)] + threads,
                  out)
        add(f"simstore --k 3 --min-similarity {t}", t, set(read_pairs(out, index_of)),
            build_s + s, per_doc, {"pairs_seconds": s})
    # Every candidate within the defaults' k = 7, with its sketch estimate.
    Q.run([simstore, "pairs", store, "--k", "7", "--similarity", "--min-similarity", "0"]
          + threads, out)
    sim_est = read_pairs(out, index_of, with_estimate=True)

    # MinHash LSH over the truth's features, bands tuned per threshold.
    sig_path = os.path.join(work, f"{name}.signatures")
    sig_s = Q.run([features_tool, "--words", str(WORDS), "--minhash", str(PERMUTATIONS),
                   "--signatures", sig_path, "--seed", str(a.seed), corpus])
    sigs = Q.read_signatures(sig_path, n, PERMUTATIONS)
    for t in THRESHOLDS:
        bands, rows = lsh_params(t)
        start = time.monotonic()
        cands = Q.lsh_candidates(sigs, bands, rows)
        need = t * PERMUTATIONS - EPS
        reported = {(i, j) for i, j in cands
                    if sum(1 for u, v in zip(sigs[i], sigs[j]) if u == v) >= need}
        seconds = sig_s + time.monotonic() - start
        add(f"MinHash LSH t={t} (b={bands}, r={rows})", t, reported, seconds,
            8 * PERMUTATIONS + 8 * bands,
            {"candidates": len(cands), "p_candidate_at_t": 1 - (1 - t ** rows) ** bands})

    # Decisions near the threshold.
    near, near_rows = [], []
    for t in THRESHOLDS:
        for lo, hi in NEAR:
            pairs = [(p, j) for p, j in truth_j.items() if t + lo - EPS <= j < t + hi - EPS]
            not_cand = sum(1 for p, _ in pairs if p not in sim_est)
            sim_below = sum(1 for p, _ in pairs if p in sim_est and sim_est[p] is not None
                            and sim_est[p] < t - EPS)
            mh = [minhash_estimate(sigs, *p) for p, _ in pairs]
            mh_below = sum(1 for e in mh if e < t - EPS)
            mid = t + (lo + hi) / 2
            near.append({"t": t, "band": [t + lo, t + hi], "pairs": len(pairs),
                         "simstore_not_candidate": not_cand, "simstore_below": sim_below,
                         "minhash_below": mh_below,
                         "sketch_se": math.sqrt((1 - mid * mid) / SKETCH_BINS),
                         "sketch_p_below": sum(p_below_sketch(j, t) for _, j in pairs) / len(pairs)
                         if pairs else None,
                         "minhash_se": math.sqrt(mid * (1 - mid) / PERMUTATIONS),
                         "minhash_p_below": sum(p_below_minhash(j, t) for _, j in pairs) / len(pairs)
                         if pairs else None})
            for (p, j), e in zip(pairs, mh):
                near_rows.append((name, ids[p[0]], ids[p[1]], f"{j:.4f}", str(t),
                                  "-" if p not in sim_est else str(sim_est[p]), f"{e:.4f}"))
    res["near"] = near

    # Planted pairs by edit.
    kinds = defaultdict(list)
    for e, src, kind, _ in Q.planted(os.path.join(a.corpusdir, f"{name}.docs.tsv"), index_of):
        p = (min(e, src), max(e, src))
        if p in truth_j:
            kinds[kind].append((p, truth_j[p]))
        else:
            inter, union = Q.exact_jaccard(wsets, *p)
            kinds[kind].append((p, inter / union if union else 1.0))
    res["edits"] = {}
    for kind, pairs in kinds.items():
        js = sorted(j for _, j in pairs)
        row = {"pairs": len(pairs), "median_j": js[len(js) // 2], "at": {}}
        for t in THRESHOLDS:
            sim = found_by[f"simstore --min-similarity {t}"]
            mh = next(v for k, v in found_by.items() if k.startswith(f"MinHash LSH t={t} "))
            hit = [p for p, j in pairs if j >= t - EPS]
            row["at"][str(t)] = {
                "pairs": len(hit),
                "simstore": sum(p in sim for p in hit) / len(hit) if hit else None,
                "minhash": sum(p in mh for p in hit) / len(hit) if hit else None}
        res["edits"][kind] = row
    del sigs, wsets

    # The same for simstore against its sketch's own set (fingerprint
    # version 2 features: word 3-shingles, Han as bigram pairs; quality.py's
    # truth), which is what the sketch estimates: its error alone.
    feat_path = os.path.join(work, f"{name}.v2.features")
    Q.run([features_tool, "--features", feat_path, corpus])
    feats = Q.read_features(feat_path, n)
    v2, _ = Q.jaccard_pairs(feats, min(THRESHOLDS))
    del feats
    near_v2 = []
    for t in THRESHOLDS:
        for lo, hi in NEAR:
            js = [(p, i / u) for p, (i, u) in v2.items() if t + lo - EPS <= i / u < t + hi - EPS]
            mid = t + (lo + hi) / 2
            near_v2.append({"t": t, "band": [t + lo, t + hi], "pairs": len(js),
                            "simstore_not_candidate": sum(1 for p, _ in js if p not in sim_est),
                            "simstore_below": sum(1 for p, _ in js if p in sim_est and
                                                  sim_est[p] is not None and sim_est[p] < t - EPS),
                            "sketch_se": math.sqrt((1 - mid * mid) / SKETCH_BINS),
                            "sketch_p_below": sum(p_below_sketch(j, t) for _, j in js) / len(js)
                            if js else None})
    res["near_sketch_set"] = near_v2
    return res, near_rows


def fmt(x, digits=3):
    return "–" if x is None else f"{x:.{digits}f}"


def corpus_report(name, res):
    tb = res["truth_bands"]
    lines = [f"### {name}: {res['documents']} documents, {res['truth_pairs']} pairs with "
             f"J ≥ {FLOOR} (" + ", ".join(f"{b} {tb.get(b, 0)}" for b, _, _ in BANDS) + ")", "",
             "| method | t | " + " | ".join(b.replace("-", "–").replace("1.0", "= 1")
                                          for b, _, _ in BANDS) +
             " | recall J ≥ t | families full | precision | pairs | seconds | bytes/doc |",
             "|---|---|" + "---|" * (len(BANDS) + 6)]
    order = ("simstore --min", "simstore --k 3", "simstore defaults", "MinHash")
    for m in sorted(res["methods"], key=lambda m: (m["t"], [m["name"].startswith(o)
                                                              for o in order].index(True))):
        e = m["eval"]
        cells = [fmt(e["bands"][b]["recall"]) for b, _, _ in BANDS]
        lines.append(f"| {m['name']} | {m['t']} | " + " | ".join(cells) +
                     f" | {fmt(e['recall_t'])} | {fmt(e['families_full'])} ({e['families']}) | "
                     f"{fmt(e['precision'])} | {e['reported']} | {m['seconds']:.1f} | "
                     f"{m['bytes_per_doc']:.0f} |")
    return lines


def share_of(x, n):
    return f"{x / n:.3f} ({x})" if n else "–"


def near_cells(name, r):
    """The cells both near-threshold tables share, up to simstore's theory."""
    n = r["pairs"]
    cand = n - r["simstore_not_candidate"]
    return (f"| {name} | {r['t']} | [{r['band'][0]:.2f}, {r['band'][1]:.2f}) | {n} | "
            f"{share_of(r['simstore_not_candidate'], n)} | "
            f"{share_of(r['simstore_below'], cand)} | "
            f"{share_of(r['simstore_not_candidate'] + r['simstore_below'], n)} | "
            f"{fmt(r['sketch_p_below'])}")


def near_report(results):
    lines = ["| corpus | t | true J | pairs | simstore: not a candidate (d > 7) | simstore: "
             "estimate < t, of candidates | simstore: missed (either) | minhash256 theory "
             "P(Ĵ < t) | MinHash-128: estimate < t | MinHash-128 theory | SE minhash256 / "
             "MinHash-128 |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, res in results.items():
        for r in res["near"]:
            lines.append(near_cells(name, r) + f" | {share_of(r['minhash_below'], r['pairs'])} | "
                         f"{fmt(r['minhash_p_below'])} | {r['sketch_se']:.4f} / "
                         f"{r['minhash_se']:.4f} |")
    return lines


def near_v2_report(results):
    lines = ["| corpus | t | true J (v2 features) | pairs | not a candidate (d > 7) | "
             "estimate < t, of candidates | missed (either) | theory P(Ĵ < t) | SE minhash256 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, res in results.items():
        for r in res["near_sketch_set"]:
            lines.append(near_cells(name, r) + f" | {r['sketch_se']:.4f} |")
    return lines


def edits_report(name, res):
    """Planted pairs (an edited copy and its source) by edit: how many, their
    median J, and at each t the recall among those with J >= t of simstore
    --min-similarity t and of MinHash LSH t."""
    head = "".join(f" J ≥ {t} | simstore | MinHash |" for t in THRESHOLDS)
    lines = [f"#### {name}: planted pairs by edit", "",
             "| edit | pairs | median J |" + head,
             "|---|---|---|" + "---|---|---|" * len(THRESHOLDS)]
    for kind, row in sorted(res["edits"].items()):
        cells = []
        for t in THRESHOLDS:
            x = row["at"][str(t)]
            cells += [str(x["pairs"]), fmt(x["simstore"]), fmt(x["minhash"])]
        lines.append(f"| {kind} | {row['pairs']} | {fmt(row['median_j'])} | " +
                     " | ".join(cells) + " |")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpusdir")
    ap.add_argument("outdir")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--build", default=os.path.join(here, "..", "..", "build"))
    ap.add_argument("--only", default="templated,spaced_chinese,chinese,short")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1, help="the MinHash permutations' seed")
    a = ap.parse_args()
    simstore = os.path.join(a.build, "simstore")
    features_tool = os.path.join(a.build, "bench", "quality_features")
    for tool in (simstore, features_tool):
        if not os.access(tool, os.X_OK):
            sys.exit(f"thresholds.py: {tool} is missing: build the tree first")
    work = os.path.join(a.outdir, "work")
    os.makedirs(work, exist_ok=True)
    commit = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    version = subprocess.run([simstore, "--version"], capture_output=True, text=True).stdout
    results = {"simstore": version.strip(), "commit": commit or None,
               "date": time.strftime("%Y-%m-%d"), "words": WORDS, "floor": FLOOR,
               "thresholds": THRESHOLDS, "permutations": PERMUTATIONS, "corpora": {}}
    manifest = os.path.join(a.corpusdir, "manifest.json")
    if os.path.exists(manifest):
        with open(manifest) as f:
            results["manifest"] = json.load(f)
    report, near_rows = [], []
    for name in a.only.split(","):
        res, rows = run_corpus(name, a, simstore, features_tool, work)
        results["corpora"][name] = res
        near_rows += rows
        report += corpus_report(name, res) + [""] + edits_report(name, res) + [""]
    report += ["### Decisions near the threshold (true J: word 5-shingles)", ""] + \
        near_report(results["corpora"]) + ["", "### simstore near the threshold of its sketch's "
                                           "own set (true J: fingerprint version 2 features)",
                                           ""] + near_v2_report(results["corpora"])
    with open(os.path.join(a.outdir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(a.outdir, "near.tsv"), "w") as f:
        f.write("corpus\tdoc_a\tdoc_b\tjaccard\tt\tsimstore_estimate\tminhash_estimate\n")
        for r in near_rows:
            f.write("\t".join(r) + "\n")
    with open(os.path.join(a.outdir, "report.md"), "w") as f:
        f.write("\n".join(report) + "\n")
    print("\n".join(report))


if __name__ == "__main__":
    main()
