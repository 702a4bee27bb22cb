#!/usr/bin/env python3
# bands.py: issue 36's probe for candidates from the stored sketches: LSH bands of r consecutive bits of each document's minhash256 sketch (2048 one-bit bins, format/sketch.md), b = 2048 // r bands; how many pairs share a band, and what share of the truth's pairs (word 5-shingle Jaccard, thresholds.py's rule) per band of J.
#
#   bands.py CORPUSDIR [--build BUILD] [--only NAME,...] [--bits 24,32,40] [--work DIR]
#
# A pair is a candidate of shape r when the two sketches agree on every bit
# of at least one band [k r, (k + 1) r). With one-bit bins two documents
# agree on a bin with probability (1 + J') / 2, J' the Jaccard similarity of
# their own feature sets (fingerprint features: word 3-shingles), so with
# independent bins P(candidate) = 1 - (1 - ((1 + J') / 2)^r)^b, printed as
# "theory" at J' = 0.7, 0.8 and 0.9; a random pair (J' = 0) shares a band
# with probability about b 2^-r. Only Python's standard library, the tree's
# simstore (fingerprint --sketch) and build/bench/quality_features are used.
import argparse
import os
import subprocess
import sys
from collections import Counter

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quality as Q  # noqa: E402
import thresholds as T  # noqa: E402

SKETCH_BITS = 2048


def sketches(simstore, corpus, index_of):
    out = subprocess.run([simstore, "fingerprint", "--jsonl", "--sketch", "minhash256", corpus],
                         capture_output=True, text=True, check=True).stdout
    sk = [0] * len(index_of)
    for line in out.splitlines():
        _, doc, hexa = line.split("\t")
        sk[index_of[doc]] = int(hexa, 16)
    return sk


def candidates(sk, r):
    """Every pair (i, j), i < j, whose sketches agree on a whole band of r bits."""
    mask = (1 << r) - 1
    return Q.pairs_sharing_keys([(v >> (k * r)) & mask for v in sk]
                                for k in range(SKETCH_BITS // r))


def theory(j, r):
    return 1 - (1 - ((1 + j) / 2) ** r) ** (SKETCH_BITS // r)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpusdir")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--build", default=os.path.join(here, "..", "..", "build"))
    ap.add_argument("--only", default="templated,spaced_chinese,chinese,short")
    ap.add_argument("--bits", default="24,32,40", help="band widths r to try")
    ap.add_argument("--work", default=None, help="where the features go (default: a temporary "
                    "directory under CORPUSDIR)")
    a = ap.parse_args()
    simstore = os.path.join(a.build, "simstore")
    features_tool = os.path.join(a.build, "bench", "quality_features")
    work = a.work or os.path.join(a.corpusdir, "bands-work")
    os.makedirs(work, exist_ok=True)
    names = [b[0] for b in T.BANDS]
    print("| corpus | r | b | candidate pairs | share of all pairs | theory J'=0.7 / 0.8 / 0.9 | "
          + " | ".join(names) + " |")
    print("|---|---|---|---|---|---|" + "---|" * len(names))
    for name in a.only.split(","):
        corpus = os.path.join(a.corpusdir, f"{name}.jsonl")
        ids = Q.read_ids(corpus)
        index_of = {x: i for i, x in enumerate(ids)}
        feat_path = os.path.join(work, f"{name}.w{T.WORDS}.features")
        Q.run([features_tool, "--words", str(T.WORDS), "--features", feat_path, corpus])
        truth, _ = Q.jaccard_pairs(Q.read_features(feat_path, len(ids)), T.FLOOR)
        band = {p: T.band_of(i / u) for p, (i, u) in truth.items()}
        total = Counter(band.values())
        sk = sketches(simstore, corpus, index_of)
        all_pairs = len(ids) * (len(ids) - 1) // 2
        for r in (int(x) for x in a.bits.split(",")):
            cand = candidates(sk, r)
            hit = Counter(b for p, b in band.items() if p in cand)
            cells = [f"{hit[n] / total[n]:.3f}" if total[n] else "-" for n in names]
            th = " / ".join(f"{theory(j, r):.3f}" for j in (0.7, 0.8, 0.9))
            print(f"| {name} | {r} | {SKETCH_BITS // r} | {len(cand)} | "
                  f"{len(cand) / max(1, all_pairs):.2e} | {th} | " + " | ".join(cells) + " |",
                  flush=True)


if __name__ == "__main__":
    main()
