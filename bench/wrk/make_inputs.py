#!/usr/bin/env python3
"""make_inputs.py: the request inputs of bench/serve_load.sh, deterministic
for a seed.

Reads stored fingerprints (hex16 a line, a sample of the store's) on stdin
and writes to DIR:
  queries.hex   COUNT k-query fingerprints, as bench_query makes them: half a
                stored fingerprint with 0..K bits flipped (hits), half random
                (misses), shuffled
  texts.txt     TEXTS texts of 40..80 words drawn from a 2,000-word
                vocabulary, one a line (the in-process baseline reads these)
  texts.jsonl   the same as POST /v1/query bodies: {"text": ..., "k": K}

Usage: make_inputs.py DIR [--count N] [--texts N] [--k K] [--seed S] < sample.hex
"""
import argparse
import json
import os
import random
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--count", type=int, default=65536)
    ap.add_argument("--texts", type=int, default=8192)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--seed", type=int, default=15)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    stored = [int(line, 16) for line in sys.stdin if line.strip()]
    if not stored:
        sys.exit("make_inputs.py: no stored fingerprints on stdin")
    queries = []
    for i in range(a.count):
        if i % 2:
            queries.append(rng.getrandbits(64))
        else:
            fp = rng.choice(stored)
            for _ in range(rng.randint(0, a.k)):
                fp ^= 1 << rng.randrange(64)
            queries.append(fp)
    rng.shuffle(queries)
    os.makedirs(a.dir, exist_ok=True)
    with open(os.path.join(a.dir, "queries.hex"), "w") as f:
        f.writelines("%016x\n" % q for q in queries)

    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = sorted({"".join(rng.choice(letters) for _ in range(rng.randint(2, 10)))
                         for _ in range(2000)})
    with open(os.path.join(a.dir, "texts.txt"), "w") as plain, \
            open(os.path.join(a.dir, "texts.jsonl"), "w") as bodies:
        for _ in range(a.texts):
            words = [rng.choice(vocabulary) for _ in range(rng.randint(40, 80))]
            text = " ".join(words).capitalize() + "."
            plain.write(text + "\n")
            bodies.write(json.dumps({"text": text, "k": a.k}) + "\n")


if __name__ == "__main__":
    main()
