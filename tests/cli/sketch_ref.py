#!/usr/bin/env python3
"""sketch_ref.py: brute-force references for tests/cli/sketch.sh, computed
from the sketches `simstore fingerprint --sketch KIND --jsonl` prints (the
ones the store keeps), and the generator of its corpus.

  sketch_ref.py gen N SEED            a corpus of about N JSON Lines records:
                                      groups of texts edited at rates giving
                                      Jaccard similarities from about 0.4 to 1
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
max(0, (m - 2 D) / m) for D differing bits of m; printed as C's %.17g."""
import json
import random
import sys


def load(path):
    docs = []
    with open(path) as f:
        for line in f:
            fp, ident, sk = line.rstrip("\n").split("\t")
            docs.append((ident, int(fp, 16), bytes.fromhex(sk)))
    return docs


def dist(a, b):
    return bin(a ^ b).count("1")


def sim(a, b):
    m = 8 * len(a)
    d = sum(bin(x ^ y).count("1") for x, y in zip(a, b))
    return max(0.0, (m - 2 * d) / m)


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


def pairs(k, j, docs):
    rows = []
    for x in range(len(docs)):
        for y in range(x + 1, len(docs)):
            a, b = docs[x], docs[y]
            d, s = dist(a[1], b[1]), sim(a[2], b[2])
            if d > k or (j > 0 and s < j):
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

    for x in range(n):
        for y in range(x + 1, n):
            if dist(docs[x][1], docs[y][1]) <= k and sim(docs[x][2], docs[y][2]) >= j:
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
    with open(out_path, "wb") as out, open(removed_path, "w") as removed:
        for line, d in zip(lines, docs):
            best = None
            for order, c in enumerate(kept):
                dd, s = dist(d[1], c[1]), sim(d[2], c[2])
                if dd <= k and s >= j and (best is None or (dd, order) < best[:2]):
                    best = (dd, order, c, s)
            if best is None:
                kept.append(d)
                out.write(line)
            else:
                removed.write("%s\t%s\t%d\t%s\n" % (d[0], best[2][0], best[0], fmt(best[3])))


def main():
    cmd = sys.argv[1]
    if cmd == "gen":
        gen(int(sys.argv[2]), int(sys.argv[3]))
        return
    k, j = int(sys.argv[2]), float(sys.argv[3])
    if cmd == "dedup":
        dedup(k, j, sys.argv[4], load(sys.argv[5]), sys.argv[6], sys.argv[7])
        return
    docs = load(sys.argv[4])
    {"pairs": pairs, "query": query, "clusters": clusters}[cmd](k, j, docs)


if __name__ == "__main__":
    main()
