#!/usr/bin/python3
"""dedup_sample.py [CORPUS.jsonl]: de-duplicate a JSON Lines corpus (by
default the shipped sample) with the simstore module: build a store, take its
near-duplicate clusters at distance 3, write the records each cluster keeps
(and those in no cluster) to stdout, and the counts to stderr, as
`simstore build` + `simstore clusters` would give them."""
import json, os, sys, tempfile
import simstore

corpus = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "sample.jsonl")
docs = [json.loads(line) for line in open(corpus, encoding="utf-8") if line.strip()]
with tempfile.TemporaryDirectory() as tmp:
    with simstore.Store.build(os.path.join(tmp, "store"), docs, k=3) as store:
        members = list(store.clusters())  # kept document first in each cluster
drop = {m.id for m in members if not m.kept}
for d in docs:
    if d["id"] not in drop:
        print(json.dumps(d, ensure_ascii=False))
print(f"{len(members)} documents in {sum(m.kept for m in members)} clusters, {len(drop)} to drop",
      file=sys.stderr)
