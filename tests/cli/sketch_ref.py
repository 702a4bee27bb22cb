#!/usr/bin/env python3
"""sketch_ref.py: brute-force references for tests/cli/sketch.sh, computed
from the sketches `simstore fingerprint --sketch KIND --jsonl` prints (the
ones the store keeps), and the generator of its corpus.

  sketch_ref.py gen N SEED            a corpus of about N JSON Lines records:
                                      groups of texts edited at rates giving
                                      Jaccard similarities from about 0.4 to 1
  sketch_ref.py templates N SEED      N short records (40-80 words): templates
                                      and copies of them with one word
                                      substituted, shuffled (near-duplicates
                                      often more than 7 bits apart)
  sketch_ref.py pairs K J FPS         ID_A<TAB>ID_B<TAB>DISTANCE<TAB>SIMILARITY for
                                      every pair within K whose similarity is
                                      at least J (0: all), as `pairs
                                      --similarity` orders them
  sketch_ref.py query K J FPS         QUERY<TAB>ID<TAB>HEX<TAB>DISTANCE<TAB>SIMILARITY,
                                      every record queried against all
  sketch_ref.py clusters K J FPS      components of the graph of pairs within K
                                      with similarity >= J, kept: first in input
                                      order (`clusters --min-similarity J
                                      --similarity`)
  sketch_ref.py dedup K J INPUT FPS OUT REMOVED
                                      `dedup --min-similarity J --similarity`:
                                      kept lines to OUT, ID<TAB>KEPT<TAB>D<TAB>SIM
                                      to REMOVED

FPS holds HEX16<TAB>ID<TAB>SKETCHHEX lines in input order. The estimate is
max(0, (m - 2 D) / m) for D differing bits of m; printed as C's %.17g.

Pairs, clusters and dedup judge by the whole near-duplicate rule: a pair is
a candidate within K or, with bands (on by default when J >= 0.5; --bands
off|on after the command), when its sketches agree on every bit of one of
the bands simstore_sketch_bands() derives from J (format/sketch.md 6.2,
recomputed here); query is within K alone (the store is asked one document
at a time, without bands)."""
import json
import random
import sys


BINS = 0  # of the sketches loaded: bit j of a sketch is bit j of its integer


def load(path):
    global BINS
    docs = []
    with open(path) as f:
        for line in f:
            fp, ident, sk = line.rstrip("\n").split("\t")
            raw = bytes.fromhex(sk)
            BINS = 8 * len(raw)
            docs.append((ident, int(fp, 16), int.from_bytes(raw, "little")))
    return docs


def popcount(x):
    return x.bit_count() if hasattr(x, "bit_count") else bin(x).count("1")


def dist(a, b):
    return popcount(a ^ b)


def sim(a, b):
    d = popcount(a ^ b)
    return max(0.0, (BINS - 2 * d) / BINS)


BANDS = None  # --bands: None (the rule's default), True or False


def fewest_bands(p, rows, limit):
    """sketch.c's fewest_bands: the same double products, no pow or log."""
    every = 1.0
    for _ in range(rows):
        every *= p
    miss = 1 - every
    none, b = miss, 1
    while none > 0.01 and b <= limit:
        none *= miss
        b += 1
    return b


def band_shape(bins, t):
    """simstore_sketch_bands(): (rows, count), (0, 0) for no bands."""
    r = b = 0
    if 0.5 <= t <= 1:
        p = (1 + t) / 2
        for cand in range(1, min(32, bins) + 1):
            need = fewest_bands(p, cand, bins)
            if need * cand <= bins:
                r, b = cand, need
    return r, b


def share_band(a, b, shape):
    rows, count = shape
    diff = a ^ b
    mask = (1 << rows) - 1
    return any((diff >> (i * rows)) & mask == 0 for i in range(count))


def rule_shape(j):
    on = BANDS if BANDS is not None else j >= 0.5
    return band_shape(BINS, j) if on else (0, 0)


def candidate(k, shape, a, b):
    """Within k, or sharing a band of the rule's (a, b: docs)."""
    return dist(a[1], b[1]) <= k or (shape[1] > 0 and share_band(a[2], b[2], shape))


def fmt(v):
    return "%.17g" % v


def key(s):
    return s.encode("utf-8")


def gen(n, seed):
    rnd = random.Random(seed)
    vocab = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(3, 9)))
             for _ in range(3000)]
    out, i = [], 0
    while len(out) < n:
        base = [rnd.choice(vocab) for _ in range(rnd.randint(60, 250))]
        for v in range(rnd.randint(2, 6)):
            rate = 0 if v == 0 else rnd.choice([0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.12])
            words = []
            for w in base:
                u = rnd.random()
                if u < rate / 3:
                    continue
                words.append(rnd.choice(vocab) if u < 2 * rate / 3 else w)
                if u > 1 - rate / 3:
                    words.append(rnd.choice(vocab))
            out.append(json.dumps({"id": "g%04d-%d" % (i, v), "text": " ".join(words)}))
        i += 1
    sys.stdout.write("\n".join(out) + "\n")


def templates(n, seed):
    rnd = random.Random(seed)
    vocab = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(3, 9)))
             for _ in range(2000)]
    out, t = [], 0
    while len(out) < n:
        base = [rnd.choice(vocab) for _ in range(rnd.randint(40, 80))]
        for v in range(rnd.randint(2, 8)):
            words = list(base)
            if v:
                words[rnd.randrange(len(words))] = rnd.choice(vocab)
            out.append(json.dumps({"id": "t%03d-%d" % (t, v), "text": " ".join(words)}))
        t += 1
    out = out[:n]
    rnd.shuffle(out)
    sys.stdout.write("\n".join(out) + "\n")


def pairs(k, j, docs):
    rows = []
    shape = rule_shape(j)
    for x in range(len(docs)):
        for y in range(x + 1, len(docs)):
            a, b = docs[x], docs[y]
            d, s = dist(a[1], b[1]), sim(a[2], b[2])
            if (j > 0 and s < j) or not candidate(k, shape, a, b):
                continue
            if key(a[0]) > key(b[0]):
                a, b = b, a
            rows.append((d, key(a[0]), key(b[0]), a[0], b[0], s))
    rows.sort()
    for d, _, _, ia, ib, s in rows:
        print("%s\t%s\t%d\t%s" % (ia, ib, d, fmt(s)))


def query(k, j, docs):
    for q in docs:
        rows = []
        for d in docs:
            dd, s = dist(q[1], d[1]), sim(q[2], d[2])
            if dd <= k and (j <= 0 or s >= j):
                rows.append((dd, key(d[0]), d))
        rows.sort()
        for dd, _, d in rows:
            print("%s\t%s\t%016x\t%d\t%s" % (q[0], d[0], d[1], dd, fmt(sim(q[2], d[2]))))


def clusters(k, j, docs):
    n = len(docs)
    parent = list(range(n))

    def root(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    shape = rule_shape(j)
    for x in range(n):
        for y in range(x + 1, n):
            if sim(docs[x][2], docs[y][2]) >= j and candidate(k, shape, docs[x], docs[y]):
                parent[root(y)] = root(x)
    members = {}
    for x in range(n):
        members.setdefault(root(x), []).append(x)
    rows = []
    for group in members.values():
        if len(group) < 2:
            continue
        kept = min(group)  # first in input order: the build's insertion order
        for x in group:
            rows.append((key(docs[kept][0]), x != kept, key(docs[x][0]), kept, x))
    rows.sort()
    for _, _, _, kept, x in rows:
        print("%s\t%s\t%d\t%d\t%s" % (docs[kept][0], docs[x][0], int(kept == x),
                                      dist(docs[x][1], docs[kept][1]),
                                      fmt(sim(docs[x][2], docs[kept][2]))))


def dedup(k, j, input_path, docs, out_path, removed_path):
    with open(input_path, "rb") as f:
        lines = [l + b"\n" for l in f.read().split(b"\n") if l.strip()]
    kept = []
    shape = rule_shape(j)
    with open(out_path, "wb") as out, open(removed_path, "w") as removed:
        for line, d in zip(lines, docs):
            best = None
            for order, c in enumerate(kept):
                dd, s = dist(d[1], c[1]), sim(d[2], c[2])
                if s >= j and (best is None or (dd, order) < best[:2]) and candidate(k, shape, d, c):
                    best = (dd, order, c, s)
            if best is None:
                kept.append(d)
                out.write(line)
            else:
                removed.write("%s\t%s\t%d\t%s\n" % (d[0], best[2][0], best[0], fmt(best[3])))


def main():
    global BANDS
    if len(sys.argv) > 3 and sys.argv[2] == "--bands":
        BANDS = {"on": True, "off": False}[sys.argv[3]]
        del sys.argv[2:4]
    cmd = sys.argv[1]
    if cmd in ("gen", "templates"):
        {"gen": gen, "templates": templates}[cmd](int(sys.argv[2]), int(sys.argv[3]))
        return
    k, j = int(sys.argv[2]), float(sys.argv[3])
    if cmd == "dedup":
        dedup(k, j, sys.argv[4], load(sys.argv[5]), sys.argv[6], sys.argv[7])
        return
    docs = load(sys.argv[4])
    {"pairs": pairs, "query": query, "clusters": clusters}[cmd](k, j, docs)


if __name__ == "__main__":
    main()
