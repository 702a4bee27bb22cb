#!/usr/bin/python3
"""test_python.py: the Python module `simstore` (python/simstore/, over its C
core python/_simstore/) against the simstore command on the same stores:
every call, answers equal to `simstore query --json`, `pairs`, `clusters`,
`get` and `stats`, errors as exceptions, threads sharing one store, and
reference counts that do not grow over 10^5 calls. Run by ctest
(tests/python/tests.cmake) with Debian's /usr/bin/python3 and PYTHONPATH
naming the built module:

    test_python.py SIMSTORE_CLI SOURCE_DIR [unittest names...]

numpy-specific checks are skipped when numpy does not import;
SIMSTORE_TEST_NO_NUMPY=1 hides numpy, to test the module without it."""
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import tracemalloc
import unittest
import warnings

if os.environ.get("SIMSTORE_TEST_NO_NUMPY") == "1":
    sys.modules["numpy"] = None  # import numpy fails, here and in the module

import simstore

try:
    import numpy
except ImportError:  # the checks that need it are skipped
    numpy = None

CLI = None
SRC = None
SAMPLE = None
DOCS = None


def cli(*args, check=True):
    """Run the simstore command; its stdout as text."""
    r = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"simstore {' '.join(map(str, args))}: exit {r.returncode}: {r.stderr}")
    return r.stdout


def cli_json(*args):
    return [json.loads(line) for line in cli(*args).splitlines() if line.strip()]


def hex16(fp):
    return f"{fp:016x}"


def load_sample():
    with open(SAMPLE, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="simstore-py-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def python_store(self, name="py.store", docs=None, **kw):
        return simstore.Store.build(self.path(name), DOCS if docs is None else docs, **kw)

    def cli_store(self, name="cli.store"):
        cli("build", self.path(name), SAMPLE)
        return self.path(name)


class TestFingerprints(Base):
    def cli_fingerprints(self, *opts):
        out = {}
        for line in cli("fingerprint", "--jsonl", *opts, SAMPLE).splitlines():
            h, ident = line.split("\t", 1)
            out[ident] = int(h, 16)
        return out

    def test_equal_to_cli(self):
        for opts, kw in [((), {}),
                         (("--fp-version", "1"), {"version": 1}),
                         (("--fp-version", "2"), {"version": 2}),
                         (("--fp-version", "3"), {"fp_version": 3}),
                         (("--shingle", "2", "--cjk-shingle", "1"), {"shingle": 2, "cjk_shingle": 1}),
                         (("--weights", "log"), {"weights": "log"}),
                         (("--weights", "length", "--lambda", "2.5"), {"weights": "length", "lambda_": 2.5}),
                         (("--cjk", "bigram"), {"cjk": "bigram"})]:
            want = self.cli_fingerprints(*opts)
            texts = [d["text"] for d in DOCS]
            got = [int(x) for x in simstore.fingerprints(texts, **kw)]
            self.assertEqual(got, [want[str(d["id"])] for d in DOCS], opts)
            for d in DOCS[:10]:
                self.assertEqual(simstore.fingerprint(d["text"], **kw), want[str(d["id"])], opts)
                self.assertEqual(simstore.fingerprint(d["text"].encode(), **kw), want[str(d["id"])])
        self.assertEqual(simstore.fingerprint("a b c", **{"lambda": 3.0, "weights": "length"}),
                         simstore.fingerprint("a b c", weights="length", lambda_=3.0))
        self.assertEqual(simstore.fingerprint(""), 0)

    def test_batch_types(self):
        fps = simstore.fingerprints(["one two three", b"four five six", ""], threads=2)
        if numpy is not None:
            self.assertIsInstance(fps, numpy.ndarray)
            self.assertEqual(fps.dtype, numpy.uint64)
        else:
            self.assertIsInstance(fps, list)
        self.assertEqual(len(fps), 3)
        self.assertEqual(int(fps[0]), simstore.fingerprint("one two three"))
        self.assertEqual(len(simstore.fingerprints([])), 0)

    def test_sketch_paragraphs_similarity_equal_to_cli(self):
        for kind in ("minhash16", "minhash64", "minhash256"):
            want = {}
            for line in cli("fingerprint", "--jsonl", "--sketch", kind, SAMPLE).splitlines():
                h, ident, sk = line.split("\t")
                want[ident] = (int(h, 16), sk)
            for d in DOCS[::7]:
                fp, sk = simstore.sketch(d["text"], kind=kind)
                self.assertEqual((fp, sk.hex()), want[str(d["id"])], kind)
        a, b = simstore.sketch(DOCS[0]["text"])[1], simstore.sketch(DOCS[1]["text"])[1]
        self.assertEqual(len(a), 256)  # the default kind, minhash256
        self.assertEqual(simstore.similarity(a, a), 1.0)
        self.assertGreaterEqual(simstore.similarity(a, b), 0.0)
        self.assertLess(simstore.similarity(a, b), 0.5)
        with self.assertRaises(ValueError):
            simstore.similarity(a, a[:16])
        with self.assertRaises(ValueError):
            simstore.sketch("x", kind="none")
        want = {}
        for line in cli("fingerprint", "--jsonl", "--paragraphs", "--shingle", "2", SAMPLE).splitlines():
            h, ident = line.split("\t")
            want[ident] = int(h, 16)
        for d in DOCS:
            paras = simstore.paragraphs(d["text"], shingle=2)
            self.assertEqual({f"{d['id']}#{p.number}": p.fp for p in paras},
                             {i: fp for i, fp in want.items() if i.rsplit("#", 1)[0] == str(d["id"])})
            raw = d["text"].encode()
            for p in paras:
                self.assertEqual(p.fp, simstore.fingerprint(raw[p.offset:p.offset + p.length], shingle=2))

    def test_docstrings(self):
        self.assertTrue(simstore.__doc__)
        for name in dir(simstore):
            if not name.startswith("_") and callable(getattr(simstore, name)):
                self.assertTrue(getattr(simstore, name).__doc__, name)
        for name in dir(simstore.Store):
            if not name.startswith("_"):
                self.assertTrue(getattr(simstore.Store, name).__doc__, f"Store.{name}")
        self.assertEqual(simstore.__version__, cli("--version").split()[1])

    def test_distance(self):
        self.assertEqual(simstore.distance(0, 2**64 - 1), 64)
        self.assertEqual(simstore.distance(0b1011, "0000000000000000"), 3)

    def test_spaced_cjk(self):
        # Version 3 (the default) joins Han across spaces; version 2 does not.
        plain, spaced = "我们是中国人", "我 们 是 中 国 人"
        self.assertEqual(simstore.fingerprint(spaced, cjk="bigram"), 0xc059a641416449f8)
        self.assertEqual(simstore.fingerprint(spaced, cjk="bigram", version=3),
                         simstore.fingerprint(plain, cjk="bigram", version=3))
        self.assertEqual(simstore.fingerprint(spaced, cjk="bigram", version=2), 0x880c0218d0edfd75)
        with self.assertRaises(ValueError):
            simstore.fingerprint("x", version=4)

    def test_store_keeps_its_version(self):
        # A version 2 store answers text queries with version 2, the default
        # (version 3) store with version 3, whatever the caller's default.
        plain, spaced = "研究生命起源是一个古老的问题", "研究 生命 起源 是 一个 古老 的 问题"
        docs = [{"id": "zh", "text": plain}, {"id": "zs", "text": spaced}]
        with self.python_store("v2.store", docs, version=2, cjk="bigram") as s:
            self.assertEqual(s.stats()["fingerprint_version"], 2)
            self.assertEqual(s.fingerprint(spaced),
                             simstore.fingerprint(spaced, version=2, cjk="bigram"))
            self.assertEqual([m.id for m in s.query(spaced, 0)], ["zs"])
        with self.python_store("v3.store", docs, cjk="bigram") as s:
            self.assertEqual(s.stats()["fingerprint_version"], 3)
            self.assertEqual([m.id for m in s.query(spaced, 0)], ["zh", "zs"])

    def test_errors(self):
        with self.assertRaises(TypeError):
            simstore.fingerprint(12)
        with self.assertRaises(TypeError):
            simstore.fingerprint("x", bogus=1)
        with self.assertRaises(ValueError):
            simstore.fingerprint("x", weights="bogus")
        with self.assertRaises(ValueError):
            simstore.fingerprint("x", shingle=0)
        with self.assertRaises(simstore.InvalidArgumentError) as cm:
            simstore.fingerprint("x", version=1, weights="log")
        self.assertEqual(cm.exception.code, -7)
        self.assertIsInstance(cm.exception, simstore.Error)
        self.assertIsInstance(cm.exception, ValueError)
        with self.assertRaises(TypeError):
            simstore.fingerprints("not a list")
        with self.assertRaises(TypeError):
            simstore.fingerprints(["ok", 3])
        with self.assertRaises(ValueError):
            simstore.distance("xyz", 0)


def py_match(m):
    d = {"id": m.id, "fp": hex16(m.fp), "distance": m.distance}
    if m.meta is not None:
        d["meta"] = m.meta
    return d


class TestCliParity(Base):
    """The same store answers the same through the module and the tool."""

    def stores(self):
        # A store the tool built, and one the module built from the same records.
        return [self.cli_store(), self.python_store().path]

    def queries_file(self, fps):
        p = self.path("q.fp")
        with open(p, "w") as f:
            for i, fp in enumerate(fps):
                f.write(f"{hex16(fp)}\tq{i}\n")
        return p

    def test_query_get_pairs_clusters_stats(self):
        for path in self.stores():
            with simstore.Store.open(path) as s:
                fps = sorted({m.fp for d in DOCS for m in s.query(d["text"], k=0)})
                fps += [0, 2**64 - 1, fps[0] ^ 0b111, fps[1] ^ 0b1]
                qf = self.queries_file(fps)
                for k in (3, 1, 0):
                    want = cli_json("query", path, "--queries", qf, "--json", "--meta",
                                    "--end-marker", "--k", k)
                    self.assertEqual(len(want), len(fps))
                    for i, fp in enumerate(fps):
                        got = [py_match(m) for m in s.query(fp, k=k, meta=True)]
                        self.assertEqual(got, want[i]["matches"], (path, k, hex16(fp)))
                        self.assertEqual([m.id for m in s.query(fp, k)],
                                         [m["id"] for m in want[i]["matches"]])
                    lims, ids, dists = s.query_batch(fps, k=k)
                    self.assertEqual(len(lims), len(fps) + 1)
                    for i in range(len(fps)):
                        a, b = int(lims[i]), int(lims[i + 1])
                        self.assertEqual(ids[a:b], [m["id"] for m in want[i]["matches"]])
                        self.assertEqual([int(x) for x in dists[a:b]],
                                         [m["distance"] for m in want[i]["matches"]])
                # Text queries, with the store's sketches.
                for d in DOCS[::9]:
                    want = cli_json("query", path, "--text", d["text"], "--json", "--similarity")
                    got = s.query(d["text"])
                    self.assertEqual([(m.id, hex16(m.fp), m.distance) for m in got],
                                     [(w["id"], w["fp"], w["distance"]) for w in want])
                    for g, w in zip(got, want):
                        self.assertAlmostEqual(g.similarity, w["similarity"], places=3)
                # pairs and clusters.
                # 5: above the store's design, joined in memory; no k and no
                # min_similarity: the near-duplicate setting (k 7, 0.9) on a
                # store that keeps sketches, as the tool's defaults.
                for args, kw in [(("--k", "5"), {"k": 5}), (("--k", "3"), {"k": 3}),
                                 (("--k", "1"), {"k": 1}), ((), {}),
                                 (("--min-similarity", "0.5"), {"min_similarity": 0.5}),
                                 (("--min-similarity", "0"), {"min_similarity": 0}),
                                 (("--bands", "off"), {"bands": False}),
                                 (("--min-similarity", "0.5", "--bands", "on"),
                                  {"min_similarity": 0.5, "bands": True})]:
                    want = cli_json("pairs", path, "--json", *args)
                    got = [{"a": p.a, "b": p.b, "distance": p.distance} for p in s.pairs(**kw)]
                    self.assertEqual(got, want, args)
                self.assertEqual(len(list(s.pairs())), 30)  # the sample's planted pairs
                self.assertEqual(len(list(s.pairs(k=3))), 28)  # one Chinese edit 6 bits off
                for args, kw in [((), {}), (("--k", "1"), {"k": 1}),
                                 (("--bands", "off"), {"bands": False}),
                                 (("--min-similarity", "0.6", "--bands", "on"),
                                  {"min_similarity": 0.6, "bands": True}),
                                 (("--mode", "star"), {"mode": "star"}),
                                 (("--keep", "min-id"), {"keep": "min_id"}),
                                 (("--singletons",), {"singletons": True})]:
                    want = cli_json("clusters", path, "--json", *args)
                    got = [{"cluster": m.cluster, "id": m.id, "kept": m.kept,
                            "distance": m.distance} for m in s.clusters(**kw)]
                    self.assertEqual(got, want, args)
                members = list(s.clusters())
                self.assertEqual(sum(m.kept for m in members), 11)
                self.assertEqual(sum(not m.kept for m in members), 20)
                # get, for every id and one missing.
                ids = [d["id"] for d in DOCS] + ["no-such-document"]
                r = subprocess.run([CLI, "get", path, "--json", *map(str, ids)],
                                   capture_output=True, text=True)
                self.assertEqual(r.returncode, 1)  # the missing one
                want = [json.loads(line) for line in r.stdout.splitlines()]
                got = []
                for i in ids:
                    doc = s.get(i)
                    if doc is None:
                        got.append({"id": i, "missing": True})
                        continue
                    g = {"id": doc.id, "fp": hex16(doc.fp), "segment": doc.segment}
                    if doc.meta is not None:
                        g["meta"] = doc.meta
                    got.append(g)
                self.assertEqual(got, want)
                self.assertIsInstance(s.get(1002).id, int)
                # stats: what stats --json says, but the per-document averages
                # and the boilerplate.
                want = json.loads(cli("stats", path, "--json"))
                got = s.stats()
                for key in got:
                    self.assertEqual(got[key], want[key], key)

    def test_bands(self):
        """pairs() and clusters() take the rule's bands as the tool does: on a
        corpus with near-duplicates more than 7 bits apart, the defaults (bands
        on) give the pairs beyond k that bands=False leaves out, each as
        `pairs --bands on|off` prints it; insert_if_new() judges without bands
        (one document at a time against a store) whatever the corpus."""
        near = os.path.join(SRC, "tests", "data", "near_rule.jsonl")
        path = self.path("near.store")
        cli("build", path, near)
        with simstore.Store.open(path) as s:
            def rows(it):
                return [{"a": p.a, "b": p.b, "distance": p.distance} for p in it]
            on, off = rows(s.pairs()), rows(s.pairs(bands=False))
            self.assertEqual(on, cli_json("pairs", path, "--json"))
            self.assertEqual(on, rows(s.pairs(bands=True)))
            self.assertEqual(off, cli_json("pairs", path, "--json", "--bands", "off"))
            self.assertTrue(all(p["distance"] <= 7 for p in off))
            self.assertTrue(any(p["distance"] > 7 for p in on))
            self.assertTrue(all(p in on for p in off))
            for bands, args in ((None, ()), (False, ("--bands", "off"))):
                got = [{"cluster": m.cluster, "id": m.id, "kept": m.kept, "distance": m.distance}
                       for m in s.clusters(bands=bands)]
                self.assertEqual(got, cli_json("clusters", path, "--json", *args))
        # insert_if_new: the same documents as dedup --bands off (and dedup
        # --store), not those of dedup's bands.
        with open(near, encoding="utf-8") as f:
            recs = [json.loads(line) for line in f if line.strip()]
        empty = self.path("empty.jsonl")
        open(empty, "w").close()
        cli("build", self.path("live.store"), empty)
        got = [r["id"] for r, ok in zip(recs, simstore.insert_if_new(self.path("live.store"), recs))
               if ok]
        want = [json.loads(line)["id"] for line in cli("dedup", "--bands", "off", near).splitlines()]
        self.assertEqual(got, want)
        banded = [json.loads(line)["id"] for line in cli("dedup", near).splitlines()]
        self.assertNotEqual(banded, want)

    def test_query_batch_texts(self):
        import math
        texts = [d["text"] for d in DOCS] + ["no words in common with anything stored here"]
        with self.python_store() as s:
            for k in (3, 1):
                lims, ids, dists, sims = s.query_batch(texts, k=k, similarity=True)
                self.assertEqual(len(lims), len(texts) + 1)
                for i, t in enumerate(texts):
                    a, b = int(lims[i]), int(lims[i + 1])
                    want = s.query(t, k=k)
                    self.assertEqual(list(zip(ids[a:b], [int(x) for x in dists[a:b]],
                                              [float(x) for x in sims[a:b]])),
                                     [(m.id, m.distance, m.similarity) for m in want])
            lims, ids, dists = s.query_batch([t.encode() for t in texts[:5]])
            self.assertEqual(ids[int(lims[0]):int(lims[1])], [m.id for m in s.query(texts[0])])
            _, _, _, sims = s.query_batch([s.fingerprint(texts[0])], similarity=True)
            self.assertTrue(all(math.isnan(float(x)) for x in sims))
            with self.assertRaises(TypeError):
                s.query_batch([texts[0], 12])

    def test_pair_similarity_is_sketch_similarity(self):
        with self.python_store() as s:
            sketches = {d["id"]: simstore.sketch(d["text"])[1] for d in DOCS}
            for p in s.pairs():
                self.assertEqual(p.similarity, simstore.similarity(sketches[p.a], sketches[p.b]))

    def test_paragraphs_and_store_fingerprint(self):
        cli_path = self.path("cli-paras.store")
        cli("build", cli_path, SAMPLE, "--paragraphs", "--shingle", "2")
        py = self.python_store("py-paras.store", paragraph_min_words=8, shingle=2)
        want_fp = {}
        for line in cli("fingerprint", "--jsonl", "--store", cli_path, SAMPLE).splitlines():
            h, ident = line.split("\t")
            want_fp[ident] = int(h, 16)
        for path in (cli_path, py.path):
            with simstore.Store.open(path) as s:
                self.assertEqual(s.stats()["paragraphs"], json.loads(cli("stats", path, "--json"))["paragraphs"])
                for d in DOCS:
                    self.assertEqual(s.fingerprint(d["text"]), want_fp[str(d["id"])])
                for d in DOCS[::10]:
                    for args, kw in [((), {}), (("--k", "1", "--min-fraction", "0.5", "--meta"),
                                               {"k": 1, "min_fraction": 0.5, "meta": True})]:
                        want = cli_json("query", path, "--paragraphs", "--text", d["text"], "--json", *args)
                        got = s.query_paragraphs(d["text"], **kw)
                        self.assertEqual([(m.id, m.shared, m.of, round(m.fraction, 4), m.meta) for m in got],
                                         [(w["id"], w["shared"], w["of"], w["fraction"], w.get("meta"))
                                          for w in want])
        with simstore.Store.open(self.cli_store()) as s:
            with self.assertRaises(simstore.InvalidArgumentError):
                s.query_paragraphs(DOCS[0]["text"])  # no paragraph index
        py.close()

    def test_boilerplate(self):
        nav = "Home | World | Business | Sport | Weather | Contact us"
        foot = "Copyright 2024 The Example Daily Courier. All rights reserved."
        words = ("river town council bridge school market harbour ferry museum library garden "
                 "festival railway station hospital orchard vineyard quarry mill castle").split()
        records = []
        for i in range(160):
            body = " ".join(words[(i * 7 + j * 3) % len(words)] + str((i * 31 + j) % 97) for j in range(40))
            records.append({"id": f"page-{i}", "text": f"{nav}\n{body}\n{foot}\n"})
        # The body of page 5 alone: the same document once the template goes.
        records.append({"id": "page-copy", "text": records[5]["text"].split("\n")[1] + "\n"})
        corpus = self.path("pages.jsonl")
        with open(corpus, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
        cli_path = self.path("cli-bp.store")
        cli("build", cli_path, corpus, "--boilerplate", "auto")
        with simstore.Store.build(self.path("py-bp.store"), iter(records), boilerplate="auto") as s:
            want = json.loads(cli("stats", cli_path, "--json"))
            self.assertEqual(s.stats()["boilerplate"], want["boilerplate"])
            self.assertEqual(s.stats()["boilerplate"]["lines"], 2)
            with simstore.Store.open(cli_path) as c:
                for r in records:
                    self.assertEqual(s.get(r["id"]).fp, c.get(r["id"]).fp)
                self.assertEqual(list(s.pairs()), list(c.pairs()))
            self.assertIn("page-copy", [m.id for m in s.query(records[5]["text"], k=0)])
            self.assertEqual(s.fingerprint(records[5]["text"]), s.get("page-5").fp)
        with simstore.Store.build(self.path("py-nobp.store"), records, boilerplate=None) as s:
            self.assertIsNone(s.stats()["boilerplate"])
        with simstore.Store.build(self.path("py-fewbp.store"), records, boilerplate=True,
                                  boilerplate_min_documents=1000, boilerplate_fraction=0.5) as s:
            self.assertEqual(s.stats()["boilerplate"]["lines"], 0)
            self.assertEqual(s.stats()["boilerplate"]["min_documents"], 1000)
        with self.assertRaises(ValueError):
            simstore.Store.build(self.path("bad"), records, boilerplate="sometimes")

    def test_open_huge_pages(self):
        # huge_pages=True: the same answers as the CLI's `query --huge-pages`
        # and as a plain open; an unknown keyword is still refused.
        path = self.cli_store()
        with simstore.Store.open(path) as plain, simstore.Store.open(path, huge_pages=True) as huge:
            for d in DOCS[::15]:
                want = cli_json("query", path, "--huge-pages", "--text", d["text"], "--json")
                for s in (plain, huge):
                    got = s.query(d["text"])
                    self.assertEqual([(m.id, m.distance) for m in got],
                                     [(w["id"], w["distance"]) for w in want])
        with self.assertRaises(TypeError):
            simstore.Store.open(path, huge_page=True)

    def test_documents_keys_replaced(self):
        path = self.cli_store()
        with simstore.Store.open(path) as s:
            for args, kw in [((), {}), (("--order", "insertion"), {"order": "insertion"})]:
                want = cli_json("export", path, "--json", *args)
                got = []
                for d in s.documents(**kw):
                    g = {"id": d.id, "fp": hex16(d.fp), "sketch": d.sketch.hex()}
                    if d.meta is not None:
                        g["meta"] = d.meta
                    got.append(g)
                self.assertEqual(got, want, args)
            self.assertEqual([d.id for d in s.documents(order="insertion")][:3],
                             [d["id"] for d in DOCS[:3]])
            self.assertEqual(s.get(DOCS[0]["id"]).sketch, simstore.sketch(DOCS[0]["text"])[1])
            self.assertFalse(s.replaced())
            cli("build", path, "--replace", SAMPLE)
            self.assertTrue(s.replaced())
            self.assertEqual(len(s.query(DOCS[0]["text"])), len(simstore.Store.open(path).query(DOCS[0]["text"])))
        # Keep rules by a key of the metadata, as --keep max-meta FIELD.
        docs = [{"id": d["id"], "text": d["text"], "meta": {"score": (i * 37) % 11}}
                for i, d in enumerate(DOCS)]
        with self.python_store("keys.store", docs=docs) as s:
            for rule, cli_rule in (("max_key", "max-meta"), ("min_key", "min-meta")):
                want = cli_json("clusters", s.path, "--json", "--keep", cli_rule, "score")
                got = [{"cluster": m.cluster, "id": m.id, "kept": m.kept, "distance": m.distance}
                       for m in s.clusters(keep=rule, key=lambda meta: meta["score"])]
                self.assertEqual(got, want, rule)
            with self.assertRaises(ValueError):
                s.clusters(keep="max_key")
            with self.assertRaises(ValueError):
                s.clusters(key=len)
            with self.assertRaises(ZeroDivisionError):
                s.clusters(keep="min_key", key=lambda meta: 1 / 0)

    def test_module_store_equals_cli_store(self):
        a = simstore.Store.open(self.cli_store())
        b = self.python_store()
        for d in DOCS:
            self.assertEqual(a.get(d["id"])[:3], b.get(d["id"])[:3])
        self.assertEqual(list(a.pairs()), list(b.pairs()))
        a.close()
        b.close()

    def test_add_delete(self):
        path = self.python_store(docs=DOCS[:60]).path
        with simstore.Store.open(path) as s:
            with self.assertRaises(simstore.ReadOnlyError):
                s.add(DOCS[60:])
            with self.assertRaises(simstore.ReadOnlyError):
                s.delete(DOCS[0]["id"])
        with simstore.Store.open(path, write=True) as s:
            self.assertEqual(s.add((d["id"], d["text"], d.get("meta")) for d in DOCS[60:]), 92)
            # A clash adds nothing.
            with self.assertRaises(simstore.InvalidArgumentError):
                s.add([{"id": "new-one", "text": "fresh words here"}, (DOCS[0]["id"], "again")])
            self.assertIsNone(s.get("new-one"))
            self.assertEqual(s.add([(DOCS[0]["id"], "again")], skip_existing=True), 92)
            self.assertEqual(s.stats()["segments"], 2)
            # Answers now equal those of the store built whole.
            want = cli_json("pairs", self.cli_store(), "--json")
            self.assertEqual([{"a": p.a, "b": p.b, "distance": p.distance} for p in s.pairs()], want)
            self.assertEqual(s.delete([DOCS[0]["id"], "no-such", DOCS[1]["id"]]), 2)
            self.assertEqual(s.delete(DOCS[2]["id"]), 1)
            self.assertIsNone(s.get(DOCS[0]["id"]))
            self.assertEqual(s.stats()["documents"], 89)
            s.compact()
            self.assertEqual(s.stats()["segments"], 1)
        r = subprocess.run([CLI, "get", path, str(DOCS[0]["id"])], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(cli_json("stats", path, "--json")[0]["documents"], 89)

    def test_fingerprint_only_and_fp_documents(self):
        fps = sorted({simstore.fingerprint(d["text"]) for d in DOCS})
        src = numpy.array(fps, dtype=numpy.uint64) if numpy is not None else fps
        with simstore.Store.build(self.path("fo"), src, fingerprint_only=True) as s:
            self.assertTrue(s.stats()["fingerprint_only"])
            want = json.loads(cli("stats", self.path("fo"), "--json"))
            for key, value in s.stats().items():
                self.assertEqual(value, want[key], key)
            for fp in fps[:20]:
                want = cli_json("query", self.path("fo"), "--fp", hex16(fp), "--json")
                self.assertEqual([{"id": m.id, "fp": hex16(m.fp), "distance": m.distance}
                                  for m in s.query(fp)],
                                 [{"id": w["id"], "fp": w["fp"], "distance": w["distance"]} for w in want])
            lims, ids, _ = s.query_batch(fps[:5])
            self.assertEqual(ids[int(lims[0]):int(lims[1])], [m.fp for m in s.query(fps[0])])
        # Documents given by fingerprint (no sketch: texts are not there).
        docs = [{"id": f"d{i}", "fp": hex16(fp), "meta": {"n": i}} for i, fp in enumerate(fps)]
        with simstore.Store.build(self.path("fpdocs"), docs, k=2) as s:
            self.assertEqual(s.stats()["sketch"], "none")
            self.assertEqual(s.get("d3").meta, {"n": 3})
            self.assertEqual(s.get("d3").fp, fps[3])
            self.assertEqual(s.query(fps[3], meta=True)[0].meta, {"n": 3})


class TestNumpy(Base):
    @unittest.skipIf(numpy is None, "numpy does not import")
    def test_numpy_arrays(self):
        texts = [d["text"] for d in DOCS]
        fps = simstore.fingerprints(texts)
        self.assertIsInstance(fps, numpy.ndarray)
        self.assertEqual(fps.dtype, numpy.uint64)
        self.assertEqual(fps.shape, (92,))
        fps[0] = 0  # a writable array of its own
        with self.python_store() as s:
            want = s.query_batch([int(x) for x in fps])
            for arr in (fps, fps.astype(numpy.int64), numpy.ascontiguousarray(fps[::-1])[::-1].copy()):
                lims, ids, dists = s.query_batch(arr)
                self.assertEqual(lims.dtype, numpy.int64)
                self.assertEqual(dists.dtype, numpy.int32)
                self.assertEqual(len(lims), 93)
                self.assertEqual(int(lims[-1]), len(ids))
                self.assertEqual((list(lims), ids, list(dists)),
                                 (list(want[0]), want[1], list(want[2])))
            self.assertEqual(s.query(fps[5]), s.query(int(fps[5])))
            with self.assertRaises((TypeError, BufferError, ValueError)):
                s.query_batch(fps[::2])  # not contiguous
            with self.assertRaises(TypeError):
                s.query_batch(fps.astype(numpy.uint32))
            lims, ids, dists = s.query_batch(numpy.zeros(0, dtype=numpy.uint64))
            self.assertEqual((list(lims), ids, list(dists)), ([0], [], []))


class TestErrors(Base):
    def test_errors(self):
        with self.assertRaises(simstore.NotFoundError) as cm:
            simstore.Store.open(self.path("missing"))
        self.assertEqual(cm.exception.code, -1)
        self.assertIn("missing", str(cm.exception))
        s = self.python_store()
        with self.assertRaises(simstore.ExistsError):
            self.python_store()
        self.python_store(replace=True).close()
        # Above the store's k (3) up to 7 the answers are as exact (slower);
        # past 7 there is no distance to answer.
        near = s.query(0, k=5)
        self.assertTrue(all(m.distance <= 5 for m in near))
        self.assertEqual([m for m in near if m.distance <= 3], s.query(0))
        with self.assertRaises(simstore.RangeError):
            s.query(0, k=8)
        with self.assertRaises(simstore.RangeError):
            s.query_batch([0], k=8)
        with self.assertRaises(simstore.RangeError):
            list(s.pairs(k=8))
        with self.assertRaises(ValueError):
            s.query(0, k=-1)
        with self.assertRaises(TypeError):
            s.query(1.5)
        with self.assertRaises(OverflowError):
            s.query(2**64)
        with self.assertRaises(TypeError):
            s.query_batch(b"12345678")  # bytes: not 64-bit items
        with self.assertRaises(ValueError):
            list(s.clusters(mode="bogus"))
        with self.assertRaises(TypeError):
            s.query(0, bogus=True)
        w = simstore.Store.open(s.path, write=True)
        with self.assertRaises(simstore.BusyError):
            simstore.Store.open(s.path, write=True)
        w.close()
        w.close()  # closing twice is fine
        with self.assertRaises(ValueError):
            w.query(0)
        self.assertTrue(w.closed)
        with self.assertRaises(TypeError):
            simstore.Store()
        with self.assertRaises(TypeError):
            simstore.Store.build(self.path("bad1"), [42])
        with self.assertRaises(ValueError):
            simstore.Store.build(self.path("bad2"), [{"id": "x"}])
        with self.assertRaises(simstore.InvalidArgumentError):
            simstore.Store.build(self.path("bad3"), [("", "empty id")])
        with self.assertRaises(simstore.InvalidArgumentError):
            simstore.Store.build(self.path("bad4"), [("a", "one two three"), ("a", "four five")])
        with self.assertRaises(simstore.InvalidArgumentError):
            # A store that keeps sketches takes texts, not fingerprints.
            simstore.Store.build(self.path("bad5"), [("a", "one two three"), ("b", 12)])
        for name in ("bad1", "bad2", "bad3", "bad4", "bad5"):
            self.assertFalse(os.path.exists(self.path(name)), name)
        # An exception raised by the documents' iterator aborts the build.
        def gen():
            yield ("a", "one two three")
            raise KeyError("from the iterator")
        with self.assertRaises(KeyError):
            simstore.Store.build(self.path("bad6"), gen())
        self.assertFalse(os.path.exists(self.path("bad6")))
        s.close()
        # Corrupt table blocks: an error, never a wrong answer.
        tables = [os.path.join(dp, f) for dp, _, fs in os.walk(s.path) for f in fs
                  if not f.endswith(".mdb") and not f.endswith(".lock") and os.path.getsize(os.path.join(dp, f)) > 512]
        self.assertTrue(tables)
        for t in tables:
            with open(t, "r+b") as f:
                data = bytearray(f.read())
                for i in range(64, len(data) - 64):
                    data[i] ^= 0x5A
                f.seek(0)
                f.write(data)
        with self.assertRaises(simstore.Error) as cm:
            with simstore.Store.open(s.path) as c:
                for d in DOCS:
                    c.query(d["text"])
        self.assertIsInstance(cm.exception, (simstore.CorruptError, simstore.VersionError))

    def test_close_while_busy(self):
        # The key function runs inside clusters(): the store is busy then.
        s = self.python_store()
        seen = []

        def key(meta):
            if not seen:
                try:
                    s.close()
                    seen.append("closed")
                except simstore.BusyError as e:
                    seen.append(e.code)
            return 0

        self.assertEqual(len(list(s.clusters(keep="min_key", key=key))), 31)
        self.assertEqual(seen, [-8])
        self.assertFalse(s.closed)
        s.close()
        self.assertTrue(s.closed)

    def test_context_manager(self):
        with self.python_store() as s:
            self.assertFalse(s.closed)
            self.assertEqual(s.k, 3)
            self.assertIn("k=3", repr(s))
        self.assertTrue(s.closed)
        with self.assertRaises(ValueError):
            s.stats()

    def test_messages(self):
        # Issue 34 (defect 14): every message says its range, filled in.
        cases = [
            (lambda: simstore.fingerprint("a b c", weights="length", lambda_=float("nan")),
             ValueError, ["lambda_", "0..1000", "nan"]),
            (lambda: simstore.fingerprint("a b c", weights="length", lambda_=-1.0),
             ValueError, ["lambda_", "0..1000", "-1.0"]),
            (lambda: simstore.fingerprints(["a"], threads=-1), ValueError, ["threads", "0..256", "-1"]),
            (lambda: simstore.Store.build(self.path("bf"), DOCS, boilerplate="auto", boilerplate_fraction=2),
             ValueError, ["boilerplate_fraction", "1e-06..0.999999", "2"]),
        ]
        with self.python_store() as s:
            self.assertEqual(s.k, 3)
            for k in (-1, 8, 2**70):
                for call in (lambda k=k: s.query(0, k=k), lambda k=k: s.query(0, k),
                             lambda k=k: s.query_batch([0], k=k), lambda k=k: list(s.pairs(k=k)),
                             lambda k=k: list(s.clusters(k=k)),
                             lambda k=k: s.query_paragraphs("a b c", k=k)):
                    # k 4..7 are answered (the slower path): the range is 0..7.
                    cases.append((call, simstore.RangeError, ["k must be a distance in 0..7", str(k)]))
            cases.append((lambda: list(s.pairs(min_similarity=float("nan"))), ValueError,
                          ["min_similarity", "0..1", "nan"]))
            cases.append((lambda: list(s.pairs(bands="on")), TypeError,
                          ["bands", "None, True or False", "str"]))
            cases.append((lambda: list(s.clusters(bands=1)), TypeError,
                          ["bands", "None, True or False", "int"]))
            # Bands derive from a minimum similarity of 0.5 or more.
            cases.append((lambda: list(s.pairs(k=3, bands=True)), simstore.Error,
                          ["bands need a minimum similarity of at least 0.5"]))
            cases.append((lambda: list(s.clusters(min_similarity=0.3, bands=True)),
                          simstore.Error, ["bands need a minimum similarity"]))
            cases.append((lambda: s.query_paragraphs("a", min_fraction=1.5), ValueError,
                          ["min_fraction", "0..1", "1.5"]))
            cases.append((lambda: simstore.distance("0123456789abcde\x1b", 0), ValueError,
                          ["16 hex digits", "'0123456789abcde\\x1b'"]))
            for call, cls, parts in cases:
                with self.assertRaises(cls) as cm:
                    call()
                msg = str(cm.exception)
                for part in parts:
                    self.assertIn(part, msg)
                self.assertNotIn("%", msg)
            for k in range(8):
                self.assertTrue(all(m.distance <= k for m in s.query(DOCS[0]["text"], k=k)))
            self.assertEqual(s.query(0, k=None), s.query(0, k=3))


class TestThreads(Base):
    def test_threads_equal_sequential(self):
        s = self.python_store()
        texts = [d["text"] for d in DOCS]
        fps = [m.fp for d in DOCS for m in s.query(d["text"], k=0)][:92]
        want_fp = [[(m.id, m.distance) for m in s.query(fp, meta=True)] for fp in fps]
        want_text = [[(m.id, m.distance, m.similarity) for m in s.query(t)] for t in texts]
        want_batch = s.query_batch(fps)
        want_fps = [int(x) for x in simstore.fingerprints(texts)]
        errors, results = [], {}

        def work(n):
            try:
                for _ in range(3):
                    got_fp = [[(m.id, m.distance) for m in s.query(fp, meta=True)] for fp in fps]
                    got_text = [[(m.id, m.distance, m.similarity) for m in s.query(t)] for t in texts]
                    lims, ids, dists = s.query_batch(fps, threads=1)
                    got_fps = [simstore.fingerprint(t) for t in texts]
                    results[n] = (got_fp == want_fp, got_text == want_text,
                                  list(lims) == list(want_batch[0]) and ids == want_batch[1],
                                  got_fps == want_fps,
                                  len(list(s.clusters())) == 31)
            except Exception as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(results, {n: (True,) * 5 for n in range(6)})
        s.close()


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class TestRefcount(Base):
    def test_no_growth_over_many_calls(self):
        s = self.python_store()
        w = simstore.Store.open(self.python_store("w.store").path)
        texts = [d["text"] for d in DOCS]
        fp = simstore.fingerprint(texts[0])

        paras = self.python_store("paras.store", paragraph_min_words=8)

        def rounds(n):
            for i in range(n):
                j = i % 12
                if j == 8:
                    simstore.sketch(texts[i % 92], kind="minhash16")
                elif j == 9:
                    simstore.paragraphs(texts[i % 92])
                elif j == 10:
                    s.fingerprint(texts[i % 92])
                elif j == 11:
                    paras.query_paragraphs(texts[i % 92], meta=True)
                if j == 0:
                    simstore.fingerprint(texts[i % 92])
                elif j == 1:
                    s.query(fp, meta=True)
                elif j == 2:
                    s.query(texts[i % 92])
                elif j == 3:
                    s.get(DOCS[i % 92]["id"])
                elif j == 4:
                    s.get("missing")
                elif j == 5:
                    s.query_batch([fp, fp ^ 1])
                    s.query_batch(texts[i % 92:i % 92 + 2], similarity=True)
                elif j == 6:
                    try:
                        s.query(fp, k=5)
                    except simstore.RangeError:
                        pass
                elif j == 7:
                    s.stats()
            simstore.fingerprints(texts[:4])
            list(w.pairs())
            list(w.clusters())
            list(w.clusters(keep="max_key", key=lambda meta: 1.0))
            list(w.documents())

        rounds(4000)  # warm up: caches, query contexts, numpy
        total = getattr(sys, "gettotalrefcount", None)
        ref0 = total() if total else 0
        rss0 = rss_bytes()
        tracemalloc.start()
        snap0 = tracemalloc.get_traced_memory()[0]
        rounds(100000)
        grown = tracemalloc.get_traced_memory()[0] - snap0
        tracemalloc.stop()
        rss_grown = rss_bytes() - rss0
        if total:
            self.assertLess(total() - ref0, 1000)
        self.assertLess(grown, 256 << 10, f"Python memory grew {grown} bytes over 10^5 calls")
        self.assertLess(rss_grown, 32 << 20, f"RSS grew {rss_grown} bytes over 10^5 calls")
        s.close()
        w.close()
        paras.close()


class TestExample(Base):
    def test_dedup_sample(self):
        ex = os.path.join(SRC, "python", "examples", "dedup_sample.py")
        r = subprocess.run([sys.executable, ex, SAMPLE], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        kept = [json.loads(line) for line in r.stdout.splitlines()]
        self.assertIn("11 clusters, 20 to drop", r.stderr)
        path = self.cli_store()
        drop = {m["id"] for m in cli_json("clusters", path, "--json") if not m["kept"]}
        self.assertEqual([d["id"] for d in kept], [d["id"] for d in DOCS if d["id"] not in drop])


# Issue 34: what Python writers store must follow the tool's rules, so that
# every output prints it as one field and reads it back.

# Ids the library's one rule (simstore_id_problem) refuses, with a piece of
# the reason and how the message shows the id (escaped).
BAD_IDS = [
    ("", "empty id", "''"),
    ("x" * 512, "longer than 511 bytes", "'xxxxxxxx"),
    ("\u00e9" * 256, "longer than 511 bytes", "'\u00e9\u00e9"),
    ("c\td", "control character", r"'c\td'"),
    ("x\nforged\t0000000000000000", "control character", r"'x\nforged\t0000000000000000'"),
    ("n\x00ul", "control character", r"'n\x00ul'"),
    ("esc\x1b[2J", "control character", r"'esc\x1b[2J'"),
    ("cr\r", "control character", r"'cr\r'"),
    ("del\x7f", "control character", r"'del\x7f'"),
    ("nel\x85", "U+0080..U+009F", r"'nel\x85'"),
    ("c1\x9f", "U+0080..U+009F", r"'c1\x9f'"),
    (b"e\xfff", "not valid UTF-8", r"b'e\xfff'"),
    (b"overlong\xc0\xaf", "not valid UTF-8", r"b'overlong\xc0\xaf'"),
    (b"surrogate\xed\xa0\x80", "not valid UTF-8", r"b'surrogate\xed\xa0\x80'"),
    (b"tab\tbytes", "control character", r"b'tab\tbytes'"),
    ("lone\ud800", "not valid UTF-8", r"'lone\ud800'"),
    ("escaped\udcff", "not valid UTF-8", r"'escaped\udcff'"),  # surrogateescape
    (-1, "0..2**63-1", "-1"),
    (2**63, "0..2**63-1", str(2**63)),
    (2**80, "0..2**63-1", str(2**80)),
]

# Ids it takes, and how they come back.
GOOD_IDS = [
    ("\u00e9" * 255 + "a", "\u00e9" * 255 + "a"),  # 511 bytes
    (b"caf\xc3\xa9", "caf\u00e9"),
    (" spaces and \u00a0nbsp ", " spaces and \u00a0nbsp "),
    ("line\u2028separator", "line\u2028separator"),
    ("\U0001f600", "\U0001f600"),
    (0, 0),
    (2**63 - 1, 2**63 - 1),
    ("-5", "-5"),
]


class TestIds(Base):
    def check_refused(self, cm, index, bad, why, shown):
        e = cm.exception
        self.assertIsInstance(e, ValueError)
        self.assertEqual(e.code, -7)
        msg = str(e)
        self.assertTrue(msg.startswith(f"docs[{index}]: document id {shown}"), msg)
        self.assertIn(why, msg)
        self.assertLess(len(msg), 200)

    def test_build_refuses_bad_ids(self):
        for i, (bad, why, shown) in enumerate(BAD_IDS):
            path = self.path(f"bad{i}")
            for docs in ([{"id": bad, "fp": 5}], [("ok", 4), (bad, 5)]):
                with self.assertRaises(simstore.InvalidArgumentError) as cm:
                    simstore.Store.build(path, docs, sketch="none")
                self.check_refused(cm, len(docs) - 1, bad, why, shown)
                self.assertFalse(os.path.exists(path), repr(bad))
            # With texts, in a store that keeps sketches, too.
            with self.assertRaises(simstore.InvalidArgumentError) as cm:
                simstore.Store.build(path, [(bad, "one two three")])
            self.check_refused(cm, 0, bad, why, shown)

    def test_add_refuses_bad_ids(self):
        path = self.python_store(docs=DOCS[:10]).path
        with simstore.Store.open(path, write=True) as s:
            for bad, why, shown in BAD_IDS:
                with self.assertRaises(simstore.InvalidArgumentError) as cm:
                    s.add([{"id": "fine", "text": "fresh words"}, {"id": bad, "text": "more words"}])
                self.check_refused(cm, 1, bad, why, shown)
                self.assertIsNone(s.get("fine"))  # nothing added
            self.assertEqual(s.stats()["documents"], 10)

    def test_good_ids_round_trip(self):
        docs = [{"id": i, "fp": n + 1, "meta": {"n": n}} for n, (i, _) in enumerate(GOOD_IDS)]
        path = self.path("good.store")
        with simstore.Store.build(path, docs, sketch="none") as s:
            for n, (_, back) in enumerate(GOOD_IDS):
                doc = s.get(back)
                self.assertIsNotNone(doc, repr(back))
                self.assertEqual((doc.id, doc.fp), (back, n + 1))
                self.assertIs(type(doc.id), type(back))
        # Every output prints each id as one field: the TSV export has one
        # line a document, and it builds the same store.
        lines = cli("export", path).split("\n")[:-1]  # not splitlines(): U+2028
        self.assertEqual(len(lines), len(GOOD_IDS))
        tsv = self.path("back.tsv")
        with open(tsv, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        cli("build", "--sketch", "none", self.path("back.store"), tsv)
        with simstore.Store.open(self.path("back.store")) as b:
            for n, (_, back) in enumerate(GOOD_IDS):
                self.assertEqual(b.get(str(back)).fp, n + 1)

    def test_lookups_take_any_id(self):
        # get() and delete() take any id of 1..511 bytes: a store an older
        # version wrote may hold one the rule refuses now.
        with simstore.Store.build(self.path("s"), [("a", 1)], sketch="none", write=True) as s:
            for bad, _, _ in BAD_IDS:
                # Empty, too long, or a str no stored id reads back as.
                if bad in ("", "x" * 512, "\u00e9" * 256, "lone\ud800", "escaped\udcff"):
                    continue
                self.assertIsNone(s.get(bad), repr(bad))
                self.assertEqual(s.delete(bad), 0, repr(bad))
            self.assertIsNone(s.get("escaped\udcff"))  # b'escaped\xff'
            self.assertEqual(s.delete(["a\tb", "a"]), 1)


# Metadata json.dumps takes but the tool's JSON cannot carry.
def deep(n):
    v = []
    for _ in range(n - 1):
        v = [v]
    return v


BAD_META = [
    (float("nan"), ValueError, "not JSON compliant"),
    (float("inf"), ValueError, "not JSON compliant"),
    ({"a": [1, float("-inf")]}, ValueError, "not JSON compliant"),
    ({float("nan"): 1}, ValueError, "not JSON compliant"),
    (2**63, ValueError, "2**63"),
    ({"n": [-2**63 - 1]}, ValueError, str(-2**63 - 1)),
    ({1: "a", "1": "b"}, ValueError, "'1'"),
    ({True: 1, "true": 2}, ValueError, "'true'"),
    ({"a\x00b": 1}, ValueError, "NUL"),
    ("lone \ud800", ValueError, "surrogates"),
    ({1, 2}, TypeError, "not JSON serializable"),
]

GOOD_META = [
    None, 0, -0.0, 1.5, 1e308, 5e-324, -2**63, 2**63 - 1, True, "",
    "tab\tnewline\nnul\x00 nel\x85 \u2028 \U0001f600 \"quoted\" \\", [], {}, [None, [1, [2, {}]]],
    {"b": 1, "a": {"z": [1.25, "x"], "1": 2}}, {1: "int key", "s": "str key"},
    {"score": 0.9, "tags": ["a", "b"], "n": 12345678901234},
]


class TestMetadata(Base):
    def test_refuses_what_json_readers_refuse(self):
        for i, (meta, cls, part) in enumerate(BAD_META):
            path = self.path(f"bad{i}")
            docs = [{"id": "ok", "fp": 1}, {"id": "doc-b", "fp": 2, "meta": meta}]
            with self.assertRaises(cls) as cm:
                simstore.Store.build(path, docs, sketch="none")
            if cls is ValueError:
                self.assertIsInstance(cm.exception, simstore.InvalidArgumentError)
            msg = str(cm.exception)
            self.assertTrue(msg.startswith("docs[1] (id 'doc-b'): metadata: "), msg)
            self.assertIn(part, msg)
            self.assertIsNotNone(cm.exception.__cause__)
            self.assertFalse(os.path.exists(path))
        with simstore.Store.build(self.path("w"), [("a", 1)], sketch="none", write=True) as s:
            with self.assertRaises(simstore.InvalidArgumentError):
                s.add([("b", 2, float("nan"))])
            self.assertIsNone(s.get("b"))

    def test_nesting_limit(self):
        # The tool reads a record (an object) of at most 2048 levels.
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(20000)
        try:
            with self.assertRaises(simstore.InvalidArgumentError) as cm:
                simstore.Store.build(self.path("deep"), [("a", 1, deep(2048))], sketch="none")
            self.assertIn("2047", str(cm.exception))
            path = self.path("deepest")
            simstore.Store.build(path, [("a", 1, deep(2047))], sketch="none").close()
            back = self.path("deepest.jsonl")
            with open(back, "w") as f:
                f.write(cli("export", "--json", path))
            cli("build", "--sketch", "none", self.path("deepest2"), back)
        finally:
            sys.setrecursionlimit(limit)

    def test_export_json_build_round_trip(self):
        docs = [{"id": n if n % 3 == 0 else f"m{n}", "fp": n + 1, "meta": m}
                for n, m in enumerate(GOOD_META)]
        docs.append({"id": 2**63 - 1, "fp": 99, "meta": {"big": 2**63 - 1}})
        path = self.path("meta.store")
        simstore.Store.build(path, docs, sketch="none").close()

        def strict(name):
            raise ValueError(f"{name} is not JSON")

        for args in (("export", "--json", path), ("get", "--json", path, *[str(d["id"]) for d in docs])):
            for line in cli(*args).split("\n")[:-1]:
                json.loads(line, parse_constant=strict)
        back = self.path("back.jsonl")
        with open(back, "w", encoding="utf-8") as f:
            f.write(cli("export", "--json", path))
        cli("build", "--sketch", "none", self.path("back.store"), back)
        with simstore.Store.open(path) as a, simstore.Store.open(self.path("back.store")) as b:
            for d in docs:
                x, y = a.get(d["id"]), b.get(d["id"])
                self.assertEqual((x.id, x.fp, x.meta), (y.id, y.fp, y.meta), d)
                want = d["meta"]
                if isinstance(want, dict):
                    want = json.loads(json.dumps(want))  # keys as JSON has them
                self.assertEqual(x.meta, want)


class TestRecovery(Base):
    """A writer after a server that was killed: the server's acknowledged
    changes are applied first, and a later start of the server keeps the
    writer's changes (issue 34, defect 2)."""

    def serve(self, path):
        proc = subprocess.Popen([CLI, "serve", path, "--listen", "127.0.0.1:0", "--log", os.devnull],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = proc.stdout.readline()
        if "listening on http://127.0.0.1:" not in line:
            proc.kill()
            raise AssertionError(f"serve did not start: {line!r} {proc.communicate()[1]!r}")
        self.addCleanup(lambda: proc.poll() is None and (proc.kill(), proc.wait()))
        self.addCleanup(proc.stdout.close)
        self.addCleanup(proc.stderr.close)
        return proc, int(line.split("http://127.0.0.1:")[1].split()[0])

    def request(self, port, method, url, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request(method, url, body=None if body is None else json.dumps(body),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        got = json.loads(resp.read() or b"null")
        conn.close()
        return resp.status, got

    def test_writer_after_killed_server(self):
        path = self.path("w.store")
        simstore.Store.build(path, [{"id": "base", "fp": 1}], sketch="none").close()
        proc, port = self.serve(path)
        acked = {}
        for i in range(20):
            doc = {"id": f"srv{i}", "fp": hex16(0x9E3779B97F4A7C15 * (i + 1) % 2**64)}
            st, _ = self.request(port, "POST", "/v1/documents", doc)
            self.assertEqual(st, 201)
            acked[doc["id"]] = int(doc["fp"], 16)
        st, _ = self.request(port, "DELETE", "/v1/documents/base")
        self.assertEqual(st, 200)
        proc.kill()  # kill -9: the changes are in the log only
        proc.wait()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            s = simstore.Store.open(path, write=True)
        with s:
            # Every acknowledged change of the server first...
            for i, fp in acked.items():
                self.assertEqual(getattr(s.get(i), "fp", None), fp, i)
            self.assertIsNone(s.get("base"))
            self.assertEqual(s.stats()["documents"], 20)
            # ... then the writer's: replace srv0, delete srv1, add new ones.
            with self.assertRaises(simstore.InvalidArgumentError):
                s.add([{"id": "srv0", "fp": 7}])  # stored: the server's
            self.assertEqual(s.delete(["srv0", "srv1"]), 2)
            s.add([{"id": "srv0", "fp": 7}, {"id": "py", "fp": 8}])
            rec = s.recovery
        self.assertEqual([str(w.message) for w in caught if w.category is simstore.RecoveryWarning],
                         [f"{path}: applied 21 changes that a stopped server had acknowledged and "
                          "logged in live.wal but not written into the store, as its next start would"])
        self.assertEqual(tuple(rec), (21, 0, 0, None))
        self.assertEqual((rec.applied, rec.torn_bytes), (21, 0))
        # Nothing left to apply: a second writer opens quietly.
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with simstore.Store.open(path, write=True) as s:
                self.assertIsNone(s.recovery)
        # A later start of the server keeps the writer's changes.
        proc, port = self.serve(path)
        self.assertEqual(self.request(port, "GET", "/v1/documents/srv0")[1]["fp"], hex16(7))
        self.assertEqual(self.request(port, "GET", "/v1/documents/srv1")[0], 404)
        self.assertEqual(self.request(port, "GET", "/v1/documents/py")[1]["fp"], hex16(8))
        self.assertEqual(self.request(port, "GET", "/v1/documents/base")[0], 404)
        for i, fp in acked.items():
            if i not in ("srv0", "srv1"):
                self.assertEqual(self.request(port, "GET", f"/v1/documents/{i}")[1]["fp"], hex16(fp), i)
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(), 0)
        with simstore.Store.open(path) as s:
            self.assertEqual(s.stats()["documents"], 20)
            self.assertEqual(s.get("srv0").fp, 7)
        r = subprocess.run([CLI, "verify", path], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_open_while_serving_and_read_only(self):
        path = self.path("r.store")
        simstore.Store.build(path, [{"id": "base", "fp": 1}], sketch="none").close()
        proc, port = self.serve(path)
        self.assertEqual(self.request(port, "POST", "/v1/documents", {"id": "x", "fp": hex16(2)})[0], 201)
        # A running server holds the store: no writer, the log untouched.
        with self.assertRaises(simstore.BusyError):
            simstore.Store.open(path, write=True)
        # Readers see what is in the store's files, and change nothing.
        with simstore.Store.open(path) as s:
            self.assertIsNone(s.recovery)
            self.assertIsNone(s.get("x"))
        proc.kill()
        proc.wait()
        with simstore.Store.open(path) as s:
            self.assertIsNone(s.get("x"))
        # Once the server is gone, a writer applies its change first; with
        # warnings as errors the warning is raised, the change applied and
        # the store left closed (its lock free for the next writer).
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with self.assertRaises(simstore.RecoveryWarning):
                simstore.Store.open(path, write=True)
            with simstore.Store.open(path, write=True) as s:
                self.assertIsNone(s.recovery)
                self.assertEqual(s.get("x").fp, 2)


if __name__ == "__main__":
    CLI, SRC = sys.argv[1], sys.argv[2]
    SAMPLE = os.path.join(SRC, "tests", "data", "sample.jsonl")
    DOCS = load_sample()
    unittest.main(argv=[sys.argv[0], "-v", *sys.argv[3:]])
