#!/usr/bin/env python3
# model_test.py: a model-based test of the live store through the real
# binaries. Random operations (HTTP inserts, insert-if-new, checks, batches,
# deletes, gets, queries, stats; the CLI's add, delete, compact, compact
# --shrink, dedup --add on the stopped store, its query, get, export, stats
# and verify on the stopped store and beside the server; SIGTERM stops,
# kill -9 with and without requests in flight, a damaged log, a read-only
# server beside CLI writers) run against `simstore serve` and the store's
# directory, and every answer is compared with an in-memory model (id ->
# fingerprint, metadata) answered by brute force.
#
# Usage: python3 model_test.py SIMSTORE_BINARY
# Environment:
#   SIMSTORE_MODEL_SEED   the seed (default: a random one, printed)
#   SIMSTORE_MODEL_OPS    operations (default 3000; 600 when
#                         SIMSTORE_SAMPLED=1 and SIMSTORE_DENSE is not set,
#                         as ctest sets it for a sanitizer build, whose
#                         processes are ten times slower)
#   SIMSTORE_MODEL_KILLS  kill -9s among them (default 60; 12 sampled)
#   SIMSTORE_MODEL_MAX_MISMATCHES  stop after this many mismatches (default
#                         1); above 1 the model takes the store's word after
#                         each one and goes on (for a survey of a broken tree)
#   SIMSTORE_MODEL_KEEP   keep the working directory even on success
#   SIMSTORE_MODEL_SKIP   operations left out, comma-separated, to look past a
#                         known defect: batch-check, cli-after-kill (CLI
#                         writers after a kill -9), damage (a damaged log),
#                         read-only (serve --read-only beside CLI writers)
# The long run: SIMSTORE_MODEL_OPS=10000 SIMSTORE_MODEL_KILLS=200.
#
# The model holds what was acknowledged: an HTTP write answered, a CLI writer
# that exited 0. A write whose answer never came (a kill raced it) is
# unknown: after the restart its ids may show any prefix of its changes
# (a batch is not atomic, format/wal.md "Batches"), and the model takes
# what the store says. Every other difference is a mismatch, reported with
# the seed, the operation's index and the operations before it; the exit
# status is then 1. A run is reproducible from its seed up to the moments
# of kills among concurrent requests (which requests were in flight).
#
# Nothing waits for time to pass: the server's port comes from its first
# line, kills follow answers (or a request's bytes leaving), and the two
# waits for something the server does on its own (a compaction, a
# read-only server noticing a swapped store) poll with a deadline.
import collections
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

SIMSTORE = os.path.abspath(sys.argv[1])
MAX_SEGMENTS = 8           # the store's policy (simstore_maybe_compact)
JOURNAL_LINES = 40         # operations shown before a mismatch
POLL_DEADLINE = 60.0       # seconds, for the waits above


def env_int(name, default):
    v = os.environ.get(name, "")
    return int(v) if v.strip() else default


def popcount(x):
    return bin(x).count("1")


def canon(obj):
    """Metadata as one comparable string (None: no metadata)."""
    if obj is None:
        return None
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def hexfp(fp):
    return "%016x" % fp


Doc = collections.namedtuple("Doc", "fp meta is_int")  # meta: canon() string or None


def id_json(key, is_int):
    return int(key) if is_int else key


def id_of(value):
    """(key, is_int) of an id as JSON gives it."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError("bad id %r" % (value,))
    return (str(value), True) if isinstance(value, int) else (value, False)


def near(view, fp, k):
    """Brute force: {(key, is_int, fp, distance)} of the documents within k."""
    out = set()
    for key, d in view.items():
        dist = popcount(d.fp ^ fp)
        if dist <= k:
            out.add((key, d.is_int, d.fp, dist))
    return out


def decide(view, op, key, doc, k):
    """One change as the live store decides it, applied to view (key -> Doc).
    op: insert, iin (insert-if-new), check, delete. Returns (status, near):
    near is the near-duplicate set for iin and check, else None."""
    if op == "delete":
        if key in view:
            del view[key]
            return 200, None
        return 404, None
    if op == "insert":
        if key in view:
            return 409, None
        view[key] = doc
        return 201, None
    found = near(view, doc.fp, k)
    if op == "check" or found:
        return 200, found
    if key in view:
        return 409, None
    view[key] = doc
    return 201, found


class Abort(Exception):
    pass


class NotSent(Exception):
    """The request never reached the server (connection refused)."""


class Unknown(Exception):
    """The request may have reached the server; its answer never came."""


class Client:
    """One keep-alive connection (the server runs with a long --timeout,
    so a connection never closes under a live server)."""

    def __init__(self, port):
        self.port = port
        self.conn = None

    def close(self):
        if self.conn:
            self.conn.close()
            self.conn = None

    def request(self, method, path, body=None, raw=None):
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            try:
                self.conn.connect()
            except OSError as e:
                self.conn = None
                raise NotSent(str(e))
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        headers = {"Content-Type": "application/json"} if data is not None else {}
        try:
            self.conn.request(method, path, body=data, headers=headers)
            resp = self.conn.getresponse()
            payload = resp.read()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise Unknown("%s: %s" % (type(e).__name__, e))
        ctype = resp.getheader("Content-Type", "")
        if ctype.startswith("application/json"):
            return resp.status, json.loads(payload)
        return resp.status, payload.decode("utf-8", "replace")


def has_line(text, start):
    """Does a line of text start so (a summary among other lines)?"""
    return any(line.startswith(start) for line in text.splitlines())


def doc_path(key):
    return "/v1/documents/" + urllib.parse.quote(key, safe="")


class UnknownOp:
    """A write whose answer never came: states[p] is the state of its ids
    after the first p of its changes (p = 0 .. n), as decided on the view
    it was sent against."""

    def __init__(self, what, view, changes):
        self.what = what
        self.keys = list(dict.fromkeys(c[1] for c in changes))
        sim = dict(view)
        self.states = [{key: sim.get(key) for key in self.keys}]
        for c in changes:
            decide(sim, *c)
            self.states.append({key: sim.get(key) for key in self.keys})


class Server:
    def __init__(self, test, store, memtable, read_only=False):
        self.test = test
        test.server_starts += 1
        n = test.server_starts
        self.log = os.path.join(test.work, "access-%d.log" % n)
        self.errpath = os.path.join(test.work, "serve-%d.err" % n)
        args = [SIMSTORE, "serve", store, "--listen", "127.0.0.1:0", "--log", self.log,
                "--threads", "2", "--timeout", "600", "--memtable", memtable]
        if read_only:
            args.append("--read-only")
        self.err = open(self.errpath, "w")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.err, text=True)
        line = self.proc.stdout.readline()
        self.port = None
        if "listening on http://127.0.0.1:" in line:
            self.port = int(line.split("http://127.0.0.1:")[1].split()[0])
        else:
            self.rc = self.proc.wait()
            self.proc.stdout.close()
            self.err.close()

    def started(self):
        return self.port is not None

    def stderr_text(self):
        with open(self.errpath) as f:
            return f.read()

    def alive(self):
        return self.proc.poll() is None

    def kill(self):
        self.proc.kill()
        return self._reap()

    def term(self):
        self.proc.send_signal(signal.SIGTERM)
        return self._reap()

    def _reap(self):
        rc = self.proc.wait()
        self.proc.stdout.close()
        self.err.close()
        return rc


class ModelTest:
    def __init__(self):
        seed = os.environ.get("SIMSTORE_MODEL_SEED", "").strip()
        self.seed = int(seed) if seed else random.SystemRandom().randrange(1, 10**9)
        on = lambda name: os.environ.get(name, "0") not in ("", "0")
        sampled = on("SIMSTORE_SAMPLED") and not on("SIMSTORE_DENSE")
        self.n_ops = env_int("SIMSTORE_MODEL_OPS", 600 if sampled else 3000)
        self.n_kills = env_int("SIMSTORE_MODEL_KILLS", 12 if sampled else 60)
        self.max_mismatches = max(1, env_int("SIMSTORE_MODEL_MAX_MISMATCHES", 1))
        self.rng = random.Random(self.seed)
        self.work = tempfile.mkdtemp(prefix="simstore-model-")
        self.store = os.path.join(self.work, "m.store")
        self.model = {}                   # key -> Doc: the acknowledged state
        self.history = collections.defaultdict(set)  # key -> {(fp, is_int)} ever possible
        self.absent = set()               # keys known absent since the last full comparison
        self.unknowns = []                # UnknownOp, resolved at the next exact read
        self.centres = []
        self.next_id = 0
        self.ops = 0
        self.kills = 0
        self.restarts = 0
        self.server_starts = 0
        self.answers = 0
        self.mismatches = 0
        self.journal = collections.deque(maxlen=JOURNAL_LINES)
        self.server = None
        self.client = None
        self.files = 0
        self.counts = collections.Counter()
        self.k = self.rng.choice([2, 3, 3, 4])
        self.skip = {w.strip() for w in os.environ.get("SIMSTORE_MODEL_SKIP", "").split(",")
                     if w.strip()}

    # ---- bookkeeping -------------------------------------------------------

    def note(self, what):
        self.journal.append("#%d %s" % (self.ops, what))

    def op(self, what):
        self.ops += 1
        words = what.split(" ")
        if words[0] != "kill":
            self.counts["-".join(words[:2]) if words[0] == "cli" else words[0]] += 1
        self.note(what)

    def checked(self, n=1):
        self.answers += n

    def mismatch(self, what, keys=(), full=False):
        self.mismatches += 1
        print("MISMATCH %d at operation %d (seed %d): %s" % (self.mismatches, self.ops,
                                                              self.seed, what), flush=True)
        print("  the last operations:", flush=True)
        for line in self.journal:
            print("    " + line, flush=True)
        print("  reproduce: SIMSTORE_MODEL_SEED=%d SIMSTORE_MODEL_OPS=%d SIMSTORE_MODEL_KILLS=%d%s "
              "python3 tests/live/model_test.py %s" %
              (self.seed, self.n_ops, self.n_kills,
               " SIMSTORE_MODEL_SKIP=" + ",".join(sorted(self.skip)) if self.skip else "",
               SIMSTORE), flush=True)
        if self.mismatches >= self.max_mismatches:
            raise Abort()
        # Going on: the model takes the store's word.
        if full:
            self.resync_all()
        else:
            self.resync(keys)

    def expect(self, cond, what, keys=()):
        self.checked()
        if not cond:
            self.mismatch(what, keys)
        return cond

    def set_doc(self, key, doc):
        if doc is None:
            if key in self.model:
                del self.model[key]
                self.absent.add(key)
        else:
            self.model[key] = doc
            self.absent.discard(key)
            self.history[key].add((doc.fp, doc.is_int))

    def path(self, name):
        self.files += 1
        return os.path.join(self.work, "%d-%s" % (self.files, name))

    # ---- generators --------------------------------------------------------

    def fresh_key(self, rng, allow_int=True):
        self.next_id += 1
        n = self.next_id
        r = rng.random()
        if allow_int and r < 0.08:
            return str(1000000 + n), True
        forms = ["d%d", "d%d", "d%d", "d%d", "doc/%d", "a b%d", "\u00e9t\u00e9-%d", "x%%%d",
                 "q?%d&r=1", "p+%d", "\u6587%d"]
        return rng.choice(forms) % n, False

    def random_meta(self, rng):
        r = rng.random()
        if r < 0.4:
            return None
        if r < 0.6:
            return canon({"n": rng.randrange(10**6)})
        if r < 0.75:
            return canon({"tag": "caf\u00e9 %d" % rng.randrange(1000), "list": [1, 2, rng.randrange(9)]})
        if r < 0.7:
            return canon("s%d" % rng.randrange(1000))
        if r < 0.73:
            return canon(rng.randrange(-1000, 1000))
        if r < 0.75:
            return canon([])
        # Large values: the in-memory table fills (16K) after a few dozen
        # changes, so servers flush between restarts.
        return canon({"pad": "m" * rng.randrange(1000, 4000), "n": rng.randrange(1000)})

    def flip(self, rng, fp, bits):
        for b in rng.sample(range(64), bits):
            fp ^= 1 << b
        return fp

    def flips(self, rng):
        return rng.choices([0, 1, 2, 3, 4, 5, 6, 8], [15, 20, 20, 15, 10, 8, 7, 5])[0]

    def gen_fp(self, rng):
        """Fingerprints in clusters, so that near-duplicates are frequent."""
        r = rng.random()
        if r < 0.2 or not self.centres:
            fp = rng.getrandbits(64)
            if len(self.centres) < 300:
                self.centres.append(fp)
            return fp
        if r < 0.55 and self.model:
            base = self.model[rng.choice(list(self.model))].fp
        else:
            base = rng.choice(self.centres)
        return self.flip(rng, base, self.flips(rng))

    def query_fp(self, rng):
        r = rng.random()
        if r < 0.45 and self.model:
            return self.flip(rng, self.model[rng.choice(list(self.model))].fp, self.flips(rng))
        if r < 0.75 and self.centres:
            return self.flip(rng, rng.choice(self.centres), self.flips(rng))
        if r < 0.9:
            return rng.getrandbits(64)
        return self.texts[rng.randrange(len(self.texts))][1]

    def query_k(self, rng):
        """None (the store's k), a k up to it, or one above it up to 7."""
        r = rng.random()
        if r < 0.35:
            return None
        if r < 0.75:
            return rng.randint(0, self.k)
        return rng.randint(self.k + 1, 7)

    def existing_key(self, rng):
        return rng.choice(list(self.model)) if self.model else None

    def make_texts(self):
        """A pool of texts and variants with their fingerprints (simstore
        fingerprint), for text inserts, text queries and dedup --add."""
        rng = random.Random(self.seed ^ 0x5eed)
        syll = ["ka", "lo", "mi", "ren", "to", "sa", "vel", "dor", "an", "is", "ur", "pe", "qui",
                "zo", "bra", "ne", "fi", "gu"]
        vocab = sorted({"".join(rng.choice(syll) for _ in range(rng.randint(2, 4)))
                        for _ in range(400)})
        texts = []
        for _ in range(50):
            base = [rng.choice(vocab) for _ in range(rng.randint(18, 30))]
            texts.append(" ".join(base))
            for _ in range(3):
                words = list(base)
                for _ in range(rng.randint(1, 2)):
                    i = rng.randrange(len(words))
                    if rng.random() < 0.5:
                        words[i] = rng.choice(vocab)
                    else:
                        words.insert(i, rng.choice(vocab))
                texts.append(" ".join(words))
        path = os.path.join(self.work, "texts.jsonl")
        with open(path, "w") as f:
            for i, t in enumerate(texts):
                f.write(json.dumps({"id": "t%d" % i, "text": t}) + "\n")
        p = subprocess.run([SIMSTORE, "fingerprint", "--jsonl", path], capture_output=True,
                           text=True)
        if p.returncode != 0:
            raise RuntimeError("simstore fingerprint: %s" % p.stderr)
        fps = {}
        for line in p.stdout.splitlines():
            h, tid = line.split("\t")
            fps[tid] = int(h, 16)
        self.texts = [(t, fps["t%d" % i]) for i, t in enumerate(texts)]

    # ---- running the tool --------------------------------------------------

    def cli(self, *args, what=None):
        self.op("cli " + (what or " ".join(args[:1])))
        return subprocess.run([SIMSTORE, *args], capture_output=True, text=True, timeout=900)

    # ---- the server --------------------------------------------------------

    def start(self, expect_ok=True):
        memtable = self.rng.choice(["16K", "16K", "16K", "16K", "32K", "1M"])
        srv = Server(self, self.store, memtable)
        if not srv.started():
            if expect_ok:
                self.note("serve failed: exit %d: %s" % (srv.rc, srv.stderr_text()[-500:]))
                self.mismatch("simstore serve did not start (exit %d): %s" %
                              (srv.rc, srv.stderr_text()[-800:]))
                raise Abort()
            return srv
        self.server = srv
        self.client = Client(srv.port)
        self.note("serve started (--memtable %s, port %d)" % (memtable, srv.port))
        return srv

    def request(self, method, path, body=None, raw=None):
        """A request of the main thread to a server that must answer."""
        try:
            return self.client.request(method, path, body, raw)
        except (NotSent, Unknown) as e:
            alive = self.server.alive()
            rc = None if alive else self.server.proc.wait()
            self.mismatch("no answer to %s %s from a live server (%s; server %s)" %
                          (method, path, e, "running" if alive else "exited %s: %s" %
                           (rc, self.server.stderr_text()[-800:])))
            raise Abort()

    def stop_server(self):
        """SIGTERM: the requests in flight finish, the changes are flushed."""
        live = self.live_stats()["live"]
        self.counts["server-flushes"] += live["flushes"]
        self.counts["server-compactions"] += live["compactions"]
        self.client.close()
        rc = self.server.term()
        self.op("sigterm")
        self.server_errors()
        self.expect(rc == 0, "SIGTERM: serve exited %d: %s" % (rc, self.server.stderr_text()[-800:]))
        self.server = None

    def kill_server(self):
        self.client.close()
        self.server.kill()
        self.kills += 1
        self.server_errors()
        self.server = None

    def server_errors(self):
        """A flush or compaction of the server's own that failed (its answers
        may still be right): stderr names it."""
        bad = [line for line in self.server.stderr_text().splitlines()
               if ": compacting" in line or ": flushing" in line]
        self.expect(not bad, "serve reported: %s" % "; ".join(bad[:4]))

    def live_stats(self):
        st, body = self.request("GET", "/v1/stats")
        self.expect(st == 200 and isinstance(body, dict) and "live" in body,
                    "GET /v1/stats answered %d %r" % (st, body))
        return body

    # ---- reading the store back --------------------------------------------

    def http_get_doc(self, key):
        """The document as GET /v1/documents/ID says: Doc or None."""
        st, body = self.request("GET", doc_path(key))
        if st == 404:
            return None
        if st != 200:
            self.mismatch("GET %s answered %d %r" % (key, st, body))
            return None
        gkey, is_int = id_of(body["id"])
        if gkey != key:
            self.mismatch("GET %s answered the id %r" % (key, body["id"]))
        return Doc(int(body["fp"], 16), canon(body.get("meta")), is_int)

    def cli_export(self):
        """key -> Doc of `simstore export --json`, or None when it failed."""
        p = self.cli("export", self.store, "--json")
        if p.returncode != 0:
            self.mismatch("export exited %d: %s" % (p.returncode, p.stderr[-800:]))
            return None
        out = {}
        for line in p.stdout.splitlines():
            rec = json.loads(line)
            key, is_int = id_of(rec["id"])
            if key in out:
                self.mismatch("export lists the id %r twice" % key)
            out[key] = Doc(int(rec["fp"], 16), canon(rec.get("meta")), is_int)
        return out

    def resync(self, keys):
        """After a mismatch, when going on: the store's word for these ids."""
        for key in keys:
            if self.server is not None:
                self.set_doc(key, self.http_get_doc(key))
            else:
                p = subprocess.run([SIMSTORE, "get", self.store, key, "--json"],
                                   capture_output=True, text=True)
                rec = json.loads(p.stdout.splitlines()[0]) if p.stdout else {"missing": True}
                self.set_doc(key, None if rec.get("missing") else
                             Doc(int(rec["fp"], 16), canon(rec.get("meta")), id_of(rec["id"])[1]))

    def resync_all(self):
        if self.server is not None:
            self.resync(list(self.model) + list(self.absent))
            return
        got = self.cli_export() or {}
        for key in list(self.model):
            if key not in got:
                self.set_doc(key, None)
        for key, d in got.items():
            self.set_doc(key, d)

    def resolve_unknowns(self, actual_of, where):
        """Each unknown write shows one of its prefixes; the model takes it."""
        for u in self.unknowns:
            actual = {key: actual_of(key) for key in u.keys}
            self.checked()
            prefixes = [p for p, s in enumerate(u.states) if s == actual]
            if not prefixes:
                self.mismatch("%s: the unanswered %s left its ids as %r, which no prefix of its "
                              "changes gives (%r)" % (where, u.what, actual, u.states), u.keys)
                continue
            self.note("unknown %s: %d of %d changes applied" % (u.what, prefixes[0],
                                                                 len(u.states) - 1))
            self.counts["unknown-applied" if prefixes[0] else "unknown-lost"] += 1
            for key, d in actual.items():
                self.set_doc(key, d)
                if d is None:
                    self.absent.add(key)   # read back at the next restarts too
        self.unknowns = []

    def compare_full(self, got, where):
        """A whole state read back (export) against the model."""
        if got is None:
            return
        if self.unknowns:
            self.resolve_unknowns(lambda key: got.get(key), where)
        bad = []
        for key in set(got) | set(self.model):
            self.checked()
            if got.get(key) != self.model.get(key):
                bad.append(key)
        if bad:
            bad.sort()
            lines = ["%r: store %r, model %r" % (key, got.get(key), self.model.get(key))
                     for key in bad[:12]]
            self.mismatch("%s: %d of %d documents differ from the acknowledged state:\n    %s" %
                          (where, len(bad), len(self.model), "\n    ".join(lines)), full=True)
        else:
            self.absent = set()

    def sweep(self, where):
        """After a restart: every acknowledged document, and every id
        acknowledged absent since the last full comparison, read back."""
        if self.unknowns:
            self.resolve_unknowns(self.http_get_doc, where)
        bad = []
        for key in sorted(self.model) + sorted(self.absent):
            got = self.http_get_doc(key)
            self.checked()
            if got != self.model.get(key):
                bad.append((key, got, self.model.get(key)))
        if bad:
            self.mismatch("%s: %d acknowledged documents read back wrong:\n    %s" %
                          (where, len(bad), "\n    ".join("%r: store %r, model %r" % b
                                                          for b in bad[:12])),
                          [b[0] for b in bad])

    # ---- answers -----------------------------------------------------------

    def parse_matches(self, matches):
        out = []
        for m in matches:
            key, is_int = id_of(m["id"])
            out.append((key, is_int, int(m["fp"], 16), m["distance"], canon(m.get("meta"))))
        return out

    def compare_matches(self, where, fp, k, got, with_meta, exact=True):
        """A query's answer: exactly the brute force's (exact), or only
        documents that were once stored with that fingerprint (a reader of
        the flushed state beside a running server)."""
        self.checked()
        keys = [g[0] for g in got]
        problems = []
        if len(set(keys)) != len(keys):
            problems.append("an id answered twice")
        order = [(g[3], g[0].encode()) for g in got]
        if order != sorted(order):
            problems.append("not sorted by distance, then id")
        if exact:
            want = near(self.model, fp, k)
            have = {g[:4] for g in got}
            if have != want:
                problems.append("missing %s, extra %s" % (sorted(want - have)[:8],
                                                          sorted(have - want)[:8]))
            if with_meta:
                for g in got:
                    d = self.model.get(g[0])
                    if d is not None and g[4] != d.meta:
                        problems.append("meta of %r: %r, model %r" % (g[0], g[4], d.meta))
        else:
            for g in got:
                if (g[2], g[1]) not in self.history.get(g[0], ()) or \
                        popcount(g[2] ^ fp) != g[3] or g[3] > k:
                    problems.append("%r was never stored so (or a wrong distance)" % (g[:4],))
        if problems:
            self.mismatch("%s: query %s k=%d: %s" % (where, hexfp(fp), k, "; ".join(problems)),
                          keys + [w[0] for w in near(self.model, fp, k)])

    # ---- HTTP operations ---------------------------------------------------

    def doc_body(self, key, doc, text=None):
        body = {"id": id_json(key, doc.is_int)}
        if text is not None:
            body["text"] = text
        else:
            body["fp"] = hexfp(doc.fp)
        if doc.meta is not None:
            body["meta"] = json.loads(doc.meta)
        return body

    def new_doc(self, rng, existing=0.15):
        """(key, Doc, text or None) for an insert: mostly a new id."""
        if self.model and rng.random() < existing:
            key = self.existing_key(rng)
            is_int = self.model[key].is_int
        else:
            key, is_int = self.fresh_key(rng)
        text = None
        if rng.random() < 0.1:
            text, fp = self.texts[rng.randrange(len(self.texts))]
        else:
            fp = self.gen_fp(rng)
        return key, Doc(fp, self.random_meta(rng), is_int), text

    def answer_problems(self, view, changes, st, ans, batch, tally):
        """Decide changes on view, in order, as the live store does, and
        compare the answer with it: a list of problems (empty: all right).
        tally counts the outcomes (insert-201, iin-200, ...)."""
        if batch:
            results = ans.get("results") if st == 200 and isinstance(ans, dict) else None
            if not isinstance(results, list) or len(results) != len(changes):
                for c in changes:
                    decide(view, *c)
                return ["a batch of %d answered %d %r" % (len(changes), st, ans)]
            answers = [(r.get("status") if isinstance(r, dict) else None, r) for r in results]
        else:
            answers = [(st, ans)]
        problems = []
        for (op, key, doc, k), (status, res) in zip(changes, answers):
            want, want_near = decide(view, op, key, doc, k)
            tally["%s-%d" % (op, want)] += 1
            where = "%s %r" % (op, key)
            if status != want:
                problems.append("%s: status %s, expected %d (%r)" % (where, status, want, res))
                continue
            if op == "delete":
                if want == 200 and res != {"id": key, "deleted": True}:
                    problems.append("%s: answered %r" % (where, res))
                continue
            if not isinstance(res, dict):
                problems.append("%s: answered %r" % (where, res))
                continue
            if id_of(res.get("id")) != (key, doc.is_int):
                problems.append("%s: id %r" % (where, res.get("id")))
            if res.get("fp") != hexfp(doc.fp):
                problems.append("%s: fp %r, expected %s" % (where, res.get("fp"), hexfp(doc.fp)))
            if res.get("inserted") is not (want == 201):
                problems.append("%s: inserted %r" % (where, res.get("inserted")))
            if want_near is not None and want != 409:
                have = {g[:4] for g in self.parse_matches(res.get("matches", []))}
                if have != want_near:
                    problems.append("%s: matches %s, expected %s" % (where, sorted(have),
                                                                     sorted(want_near)))
        return problems

    def apply_answered(self, what, changes, st, ans, batch):
        """An answered write: check the answer; the model follows it."""
        view = dict(self.model)
        problems = self.answer_problems(view, changes, st, ans, batch, self.counts)
        self.checked(len(changes))
        keys = list(dict.fromkeys(c[1] for c in changes))
        if problems:
            self.mismatch("%s: %s" % (what, "; ".join(problems[:8])),
                          keys + [w[0] for c in changes if c[2] is not None
                                  for w in near(self.model, c[2].fp, c[3])])
            return
        for key in keys:
            self.set_doc(key, view.get(key))

    def write_request(self, rng, kind):
        """A write of one of the kinds: (description, changes, method, path,
        body, batch)."""
        if kind == "delete":
            key = self.existing_key(rng) if self.model and rng.random() < 0.85 else \
                self.fresh_key(rng, allow_int=False)[0]
            return "delete %r" % key, [("delete", key, None, 0)], "DELETE", doc_path(key), \
                None, False
        if kind in ("insert", "iin", "check"):
            key, doc, text = self.new_doc(rng)
            body = self.doc_body(key, doc, text)
            k = self.k
            if kind != "insert":
                body["mode"] = "insert-if-new" if kind == "iin" else "check"
                if rng.random() < 0.4:
                    k = rng.randint(0, 7)
                    body["k"] = k
            elif rng.random() < 0.3:
                body["mode"] = "insert"
            what = "%s %r %s%s k=%d" % (kind, key, hexfp(doc.fp), " (text)" if text else "", k)
            return what, [(kind, key, doc, k)], "POST", "/v1/documents", body, False
        # A batch: insert, insert-if-new or check, its documents decided in
        # order (repeated ids, near-duplicates within the batch); a bulk one
        # (mostly new documents, for flushes) now and then.
        bulk = kind == "bulk" or rng.random() < 0.2
        mode = rng.choice(["insert", "insert-if-new", "insert-if-new", "check"])
        if bulk:
            mode = rng.choice(["insert", "insert-if-new"])
        if mode == "check" and "batch-check" in self.skip:
            mode = "insert-if-new"
        op = {"insert": "insert", "insert-if-new": "iin", "check": "check"}[mode]
        docs = []
        for _ in range(rng.randint(15, 50) if bulk else rng.randint(2, 12)):
            if docs and rng.random() < 0.1:
                key, d, _ = docs[rng.randrange(len(docs))]
                docs.append((key, Doc(self.gen_fp(rng), self.random_meta(rng), d.is_int), None))
            elif docs and rng.random() < 0.25:
                _, d, _ = docs[rng.randrange(len(docs))]
                key, is_int = self.fresh_key(rng)
                docs.append((key, Doc(self.flip(rng, d.fp, rng.randint(0, 4)),
                                      self.random_meta(rng), is_int), None))
            else:
                docs.append(self.new_doc(rng, existing=0.1))
        body = {"documents": [self.doc_body(key, d, text) for key, d, text in docs], "mode": mode}
        k = self.k
        if rng.random() < 0.3:
            k = rng.randint(0, 7)
            body["k"] = k
        changes = [(op, key, d, k) for key, d, _ in docs]
        return "batch %s of %d k=%d" % (mode, len(docs), k), changes, "POST", "/v1/documents", \
            body, True

    def http_write(self, rng, kind):
        """One write of the main thread, answered: the model follows it."""
        what, changes, method, path, body, batch = self.write_request(rng, kind)
        if batch and rng.random() < 0.05:
            # One malformed document: the batch is refused whole.
            body["documents"][rng.randrange(len(changes))]["fp"] = "not-hex"
            st, ans = self.request(method, path, body)
            self.op("%s (one malformed) -> %d" % (what, st))
            self.expect(st == 400, "a batch with a malformed document answered %d %r" % (st, ans))
            return
        st, ans = self.request(method, path, body)
        self.op("%s -> %d" % (what, st))
        self.apply_answered(what, changes, st, ans, batch)

    def http_get(self, rng):
        key = self.existing_key(rng) if self.model and rng.random() < 0.8 else \
            self.fresh_key(rng, allow_int=False)[0]
        got = self.http_get_doc(key)
        self.op("get %r" % key)
        self.expect(got == self.model.get(key), "GET %r: %r, model %r" %
                    (key, got, self.model.get(key)), [key])

    def http_query(self, rng):
        kind = rng.choice(["get", "get", "post", "batch"])
        with_meta = rng.random() < 0.3
        if kind == "batch":
            n = rng.randint(1, 10)
            fps = [self.query_fp(rng) for _ in range(n)]
            k = self.query_k(rng)
            body = {"queries": [{"fp": hexfp(fp), "id": i} for i, fp in enumerate(fps)]}
            if k is not None:
                body["k"] = k
            if with_meta:
                body["meta"] = True
            st, ans = self.request("POST", "/v1/query", body)
            self.op("query batch of %d k=%s -> %d" % (n, k, st))
            k = self.k if k is None else k
            if not self.expect(st == 200 and ans.get("k") == k and len(ans.get("results", [])) == n,
                               "batch query answered %d %r" % (st, ans)):
                return
            for i, (fp, res) in enumerate(zip(fps, ans["results"])):
                self.expect(res.get("id") == i and res.get("fp") == hexfp(fp),
                            "batch query %d echoed %r" % (i, res))
                self.compare_matches("POST /v1/query batch", fp, k,
                                     self.parse_matches(res["matches"]), with_meta)
            return
        text = None
        if rng.random() < 0.1:
            text, fp = self.texts[rng.randrange(len(self.texts))]
        else:
            fp = self.query_fp(rng)
        k = self.query_k(rng)
        if kind == "get" and text is None:
            path = "/v1/query?fp=%s" % hexfp(fp) + ("" if k is None else "&k=%d" % k) + \
                ("&meta=true" if with_meta else "")
            st, ans = self.request("GET", path)
        else:
            body = {"text": text} if text is not None else {"fp": hexfp(fp)}
            if k is not None:
                body["k"] = k
            if with_meta:
                body["meta"] = True
            st, ans = self.request("POST", "/v1/query", body)
        self.op("query %s%s k=%s -> %d" % (hexfp(fp), " (text)" if text else "", k, st))
        k = self.k if k is None else k
        if self.expect(st == 200 and ans.get("fp") == hexfp(fp) and ans.get("k") == k,
                       "query %s k=%d answered %d %r" % (hexfp(fp), k, st, ans)):
            self.compare_matches("query", fp, k, self.parse_matches(ans["matches"]), with_meta)

    def http_stats(self):
        body = self.live_stats()
        self.op("stats")
        live = body.get("live", {})
        if live.get("memtable_changes") == 0 and not live.get("flushing"):
            self.expect(body.get("documents") == len(self.model),
                        "/v1/stats with nothing in memory says %r documents, the model has %d" %
                        (body.get("documents"), len(self.model)))
        return body

    # ---- the CLI's readers ---------------------------------------------------

    def cli_readers(self, rng, exact, count):
        """count of the readers (query, get, export, stats, verify); exact
        when the store's committed state is all of it (no server, or one
        holding nothing in memory), else only "no invented documents"."""
        for _ in range(count):
            kind = rng.choice(["query", "query", "get", "export", "stats", "verify"])
            if kind == "query":
                n = rng.randint(1, 8)
                fps = [self.query_fp(rng) for _ in range(n)]
                k = self.query_k(rng)
                qpath = self.path("queries.tsv")
                with open(qpath, "w") as f:
                    for i, fp in enumerate(fps):
                        f.write("q%d\t%s\n" % (i, hexfp(fp)))
                args = ["query", self.store, "--queries", qpath, "--json", "--meta"]
                if k is not None:
                    args += ["--k", str(k)]
                p = self.cli(*args, what="query %d k=%s" % (n, k))
                k = self.k if k is None else k
                if not self.expect(p.returncode == 0, "query exited %d: %s" % (p.returncode,
                                                                               p.stderr[-800:])):
                    continue
                per = collections.defaultdict(list)
                for line in p.stdout.splitlines():
                    m = json.loads(line)
                    per[m["query"]].append(m)
                for i, fp in enumerate(fps):
                    self.compare_matches("cli query", fp, k,
                                         self.parse_matches(per.get("q%d" % i, [])), True, exact)
            elif kind == "get":
                keys = [self.existing_key(rng) if self.model and rng.random() < 0.8 else
                        self.fresh_key(rng, allow_int=False)[0] for _ in range(rng.randint(1, 6))]
                keys = list(dict.fromkeys(keys))
                p = self.cli("get", self.store, *keys, "--json", what="get %d" % len(keys))
                lines = p.stdout.splitlines()
                if not self.expect(len(lines) == len(keys), "get printed %d lines for %d ids: %s" %
                                   (len(lines), len(keys), p.stderr[-800:])):
                    continue
                missing = 0
                for key, line in zip(keys, lines):
                    rec = json.loads(line)
                    if rec.get("missing"):
                        missing += 1
                        got = None
                    else:
                        got = Doc(int(rec["fp"], 16), canon(rec.get("meta")), id_of(rec["id"])[1])
                    if exact:
                        self.expect(got == self.model.get(key), "cli get %r: %r, model %r" %
                                    (key, got, self.model.get(key)), [key])
                    elif got is not None:
                        self.expect((got.fp, got.is_int) in self.history.get(key, ()),
                                    "cli get %r beside the server: %r was never stored" % (key, got))
                self.expect(p.returncode == (1 if missing else 0),
                            "get exited %d with %d missing" % (p.returncode, missing))
            elif kind == "export":
                if exact:
                    self.compare_full(self.cli_export(), "export")
                else:
                    got = self.cli_export() or {}
                    for key, d in got.items():
                        self.expect((d.fp, d.is_int) in self.history.get(key, ()),
                                    "export beside the server: %r %r was never stored" % (key, d))
            elif kind == "stats":
                p = self.cli("stats", self.store, "--json")
                if self.expect(p.returncode == 0, "stats exited %d: %s" % (p.returncode,
                                                                           p.stderr[-800:])) \
                        and exact:
                    self.expect(json.loads(p.stdout)["documents"] == len(self.model),
                                "stats --json: %s documents, the model has %d" %
                                (json.loads(p.stdout)["documents"], len(self.model)))
            else:
                p = self.cli("verify", self.store)
                self.expect(p.returncode == 0, "verify exited %d: %s %s" %
                            (p.returncode, p.stdout[-800:], p.stderr[-800:]))

    def cli_readers_live(self, rng):
        """Readers beside the running server: exact when it holds nothing in
        memory (the committed state is all of it), else no invented answers."""
        before = self.live_stats()["live"]
        exact = before["memtable_changes"] == 0 and not before["flushing"]
        self.cli_readers(rng, exact, 1)

    # ---- the CLI's writers (no server running) -------------------------------

    def unknown_keys(self):
        return {key for u in self.unknowns for key in u.keys}

    def cli_writer(self, rng, safe_only=False, kind=None):
        """One CLI writer on the stopped store (of this kind, or one chosen).
        safe_only: its answer must not depend on the unknown writes (add of
        new ids, delete of other ids, compact)."""
        kinds = ["add", "add", "delete", "delete", "compact", "shrink", "dedup"]
        if len(self.model) > 600:
            kinds += ["delete", "delete"]
        if safe_only:
            kinds = ["add", "delete", "compact", "shrink"]
        kind = kind or rng.choice(kinds)
        if kind in ("compact", "shrink"):
            args = ["compact", self.store] + (["--shrink"] if kind == "shrink" else [])
            p = self.cli(*args, what=" ".join(args[:1] + args[2:]))
            self.expect(p.returncode == 0 and has_line(p.stdout, "compacted "),
                        "%s exited %d: %s %s" % (kind, p.returncode, p.stdout, p.stderr[-800:]))
            return
        avoid = self.unknown_keys()
        if kind == "delete":
            keys = []
            # Many at once when the store is large: it stays at a few hundred.
            for _ in range(rng.randint(1, 5) if len(self.model) < 600 else rng.randint(20, 80)):
                if self.model and rng.random() < 0.8:
                    key = self.existing_key(rng)
                else:
                    key = self.fresh_key(rng, allow_int=False)[0]
                if key not in avoid and key not in keys:
                    keys.append(key)
            if not keys:
                keys = [self.fresh_key(rng, allow_int=False)[0]]
            p = self.cli("delete", self.store, *keys, what="delete %s" % keys)
            found = [key for key in keys if key in self.model]
            want = "deleted %d document%s from %s (%d not found)" % (
                len(found), "" if len(found) == 1 else "s", self.store, len(keys) - len(found))
            if self.expect(p.returncode == 0 and has_line(p.stdout, want),
                           "delete %s: exit %d, %r, expected %r" % (keys, p.returncode, p.stdout,
                                                                    want), keys):
                for key in found:
                    self.set_doc(key, None)
            return
        if kind == "add":
            skip = rng.random() < 0.4
            recs = []
            for _ in range(rng.randint(1, 10)):
                if self.model and rng.random() < 0.12:
                    key = self.existing_key(rng)
                    if key in avoid:
                        continue
                    is_int = self.model[key].is_int
                elif recs and rng.random() < 0.05:
                    key, d = recs[rng.randrange(len(recs))]
                    is_int = d.is_int
                else:
                    key, is_int = self.fresh_key(rng)
                recs.append((key, Doc(self.gen_fp(rng), self.random_meta(rng), is_int)))
            if not recs:
                key, is_int = self.fresh_key(rng)
                recs.append((key, Doc(self.gen_fp(rng), None, is_int)))
            ipath = self.path("add.jsonl")
            with open(ipath, "w") as f:
                for key, d in recs:
                    rec = {"id": id_json(key, d.is_int), "fp": hexfp(d.fp)}
                    if d.meta is not None:
                        rec["meta"] = json.loads(d.meta)
                    f.write(json.dumps(rec) + "\n")
            args = ["add", self.store, ipath, "-q"] + (["--skip-existing"] if skip else [])
            p = self.cli(*args, what="add %d%s" % (len(recs), " --skip-existing" if skip else ""))
            added, seen, clash = [], set(), 0
            for key, d in recs:
                if key in self.model or key in seen:
                    clash += 1
                else:
                    added.append((key, d))
                seen.add(key)
            keys = [key for key, _ in recs]
            if clash and not skip:
                self.expect(p.returncode == 1 and not has_line(p.stdout, "added "),
                            "add with %d stored or repeated ids: exit %d, %r (expected a refusal)"
                            % (clash, p.returncode, p.stdout), keys)
                return
            want = "added %d document%s to %s" % (len(added), "" if len(added) == 1 else "s",
                                                  self.store)
            if self.expect(p.returncode == 0 and has_line(p.stdout, want),
                           "add: exit %d, %r, expected %r: %s" % (p.returncode, p.stdout, want,
                                                                 p.stderr[-800:]), keys):
                for key, d in added:
                    self.set_doc(key, d)
            return
        # dedup --store --add: texts kept unless within k of a document or a kept text.
        recs = []
        for _ in range(rng.randint(1, 6)):
            text, fp = self.texts[rng.randrange(len(self.texts))]
            key = self.fresh_key(rng, allow_int=False)[0]
            recs.append((key, text, fp, self.random_meta(rng)))
        kept, removed = [], {}
        for key, text, fp, meta in recs:
            dists = [popcount(fp ^ d.fp) for d in self.model.values()] + \
                [popcount(fp ^ kfp) for _, _, kfp, _ in kept]
            if dists and min(dists) <= self.k:
                removed[key] = min(dists)
            else:
                kept.append((key, text, fp, meta))
        ipath = self.path("dedup.jsonl")
        rpath = self.path("removed.tsv")
        lines = []
        for key, text, fp, meta in recs:
            rec = {"id": key, "text": text}
            if meta is not None:
                rec["meta"] = json.loads(meta)
            lines.append(json.dumps(rec))
        with open(ipath, "w") as f:
            f.write("\n".join(lines) + "\n")
        p = self.cli("dedup", "--store", self.store, "--add", "--k", str(self.k), "--removed",
                     rpath, ipath, what="dedup --add %d" % len(recs))
        want_out = "".join(lines[i] + "\n" for i, r in enumerate(recs) if r[0] not in removed)
        got_removed = {}
        if os.path.exists(rpath):
            with open(rpath) as f:
                for line in f:
                    parts = line.rstrip("\n").split("\t")
                    got_removed[parts[0]] = int(parts[2])
        keys = [r[0] for r in recs]
        if self.expect(p.returncode == 0 and p.stdout == want_out and got_removed == removed,
                       "dedup --add: exit %d, kept %r, removed %r; expected kept %r, removed %r: %s"
                       % (p.returncode, p.stdout, got_removed, [r[0] for r in kept], removed,
                          p.stderr[-800:]), keys):
            for key, text, fp, meta in kept:
                self.set_doc(key, Doc(fp, meta, False))

    # ---- phases --------------------------------------------------------------

    def stopped_phase(self, after_kill):
        """The server is down: maybe a damaged log, CLI writers, readers, a
        read-only server beside them; then the restart."""
        rng = self.rng
        if after_kill and rng.random() < 0.08 and "damage" not in self.skip and \
                self.damage_log():
            return
        # After a kill the committed state lacks the log's changes until a
        # writer applies them (or the next serve replays them).
        committed = not after_kill
        if after_kill and rng.random() < 0.3:
            # Readers of the flushed state, which lacks the log's changes:
            # nothing in it was never stored.
            self.cli_readers(rng, False, 1)
        if committed:
            self.compare_full(self.cli_export(), "export after SIGTERM")
            self.cli_readers(rng, True, 2)
        if rng.random() < 0.45 and (committed or "cli-after-kill" not in self.skip):
            for i in range(rng.randint(1, 3)):
                self.cli_writer(rng, safe_only=bool(self.unknowns) and i == 0)
                if not committed:
                    # The writer applied the crashed server's log first.
                    self.compare_full(self.cli_export(), "export after a CLI writer that "
                                      "followed a kill -9")
                    committed = True
            self.cli_readers(rng, True, rng.randint(1, 3))
        if committed and rng.random() < 0.15 and "read-only" not in self.skip:
            self.read_only_phase()
        self.restart(after_kill=not committed)

    def restart(self, after_kill):
        self.start()
        self.restarts += 1
        self.op("restart")
        self.sweep("after the restart")
        if not after_kill:
            stats = self.live_stats()
            self.expect(stats["live"]["replayed"] == 0 and stats["documents"] == len(self.model),
                        "a restart of a store holding all its changes (after SIGTERM or a CLI "
                        "writer) replayed %d changes from the log and has %d documents (model %d)" % (stats["live"]["replayed"], stats["documents"],
                                        len(self.model)))

    def read_only_answers(self, client, fps, keys):
        """What a read-only server answers that the model does not say:
        a list of differences (empty: all right)."""
        wrong = []
        for fp in fps:
            st, ans = client.request("GET", "/v1/query?fp=%s" % hexfp(fp))
            have = {g[:4] for g in self.parse_matches(ans.get("matches", []))} \
                if st == 200 else st
            if have != near(self.model, fp, self.k):
                wrong.append("query %s: %s, model %s" % (hexfp(fp), have,
                                                        sorted(near(self.model, fp, self.k))))
        st, ans = client.request("GET", "/v1/stats")
        if st != 200 or ans.get("documents") != len(self.model):
            wrong.append("stats: %s documents, model %d" % (ans.get("documents"), len(self.model)))
        for key in keys:
            st, ans = client.request("GET", doc_path(key))
            got = None if st != 200 else Doc(int(ans["fp"], 16), canon(ans.get("meta")),
                                              id_of(ans["id"])[1])
            if got != self.model.get(key):
                wrong.append("get %r: %r, model %r" % (key, got, self.model.get(key)))
        return wrong

    def read_only_phase(self):
        """serve --read-only beside CLI writers: its answers follow the
        store, also after compact --shrink swaps the store's files (defect 6)."""
        rng = self.rng
        srv = Server(self, self.store, "16K", read_only=True)
        self.op("serve --read-only")
        if not srv.started():
            self.mismatch("serve --read-only did not start (exit %d): %s" %
                          (srv.rc, srv.stderr_text()[-800:]))
            return
        client = Client(srv.port)
        try:
            st, _ = client.request("POST", "/v1/documents", {"id": "ro", "fp": hexfp(1)})
            self.op("read-only insert -> %d" % st)
            self.expect(st == 403, "an insert to a read-only server answered %d" % st)
            fps = [self.query_fp(rng) for _ in range(2)]
            keys = [self.existing_key(rng) for _ in range(2) if self.model]
            wrong = self.read_only_answers(client, fps, keys)
            self.op("read-only answers: %d queries, %d gets, stats" % (len(fps), len(keys)))
            self.checked(len(fps) + len(keys) + 1)
            if wrong:
                self.mismatch("serve --read-only: %s" % "; ".join(wrong[:6]), keys)
            before = dict(self.model)
            if rng.random() < 0.5:
                self.cli_writer(rng)
            p = self.cli("compact", self.store, "--shrink", what="compact --shrink (read-only "
                         "server running)")
            self.expect(p.returncode == 0, "compact --shrink beside a read-only server exited "
                        "%d: %s" % (p.returncode, p.stderr[-800:]))
            self.cli_writer(rng, kind="add")
            if rng.random() < 0.5:
                self.cli_writer(rng)
            # The server must come to the store's new state (it may look for
            # a swap every few milliseconds): poll with a deadline. The
            # probes: the documents the writers changed, and a few others.
            changed = sorted(key for key in set(before) | set(self.model)
                             if before.get(key) != self.model.get(key))
            keys = changed[:6] + [self.existing_key(rng) for _ in range(2) if self.model]
            fps = [d.fp for d in (before.get(key) or self.model.get(key) for key in changed[:6])] \
                + [self.query_fp(rng) for _ in range(2)]
            deadline = time.monotonic() + POLL_DEADLINE
            self.op("read-only answers after the writers: %d queries, %d gets, stats" %
                    (len(fps), len(keys)))
            while True:
                wrong = self.read_only_answers(client, fps, keys)
                if not wrong:
                    self.checked(len(fps) + len(keys) + 1)
                    break
                if time.monotonic() > deadline:
                    self.checked()
                    self.note("read-only server: %s" % "; ".join(wrong[:6]))
                    self.mismatch("serve --read-only still answers from the store as it was "
                                  "before compact --shrink and CLI writes, %.0f s after them: %s" %
                                  (POLL_DEADLINE, "; ".join(wrong[:6])))
                    break
                time.sleep(0.02)   # the interval of the poll, not a wait for it
        except (NotSent, Unknown) as e:
            self.mismatch("the read-only server stopped answering: %s" % e)
        finally:
            client.close()
            rc = srv.term()
            self.expect(rc == 0, "SIGTERM: serve --read-only exited %d" % rc)

    def damage_log(self):
        """Flip a bit in a record of live.wal that valid records follow: the
        next serve must refuse the log (they were acknowledged), keep it
        as it is, and start once it is repaired (defect 3). False when the
        log has fewer than two records."""
        wal = os.path.join(self.store, "live.wal")
        try:
            with open(wal, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return False
        offsets, pos = [], 64
        while pos + 24 <= len(data):
            length = int.from_bytes(data[pos:pos + 4], "little")
            if pos + 24 + length > len(data):
                break
            offsets.append((pos, length))
            pos += 24 + length
        if len(offsets) < 2:
            return False
        rng = self.rng
        pos, length = offsets[rng.randrange(len(offsets) - 1)]
        at = pos + 16 + rng.randrange(length + 8)   # payload or check
        bit = 1 << rng.randrange(8)
        damaged = bytearray(data)
        damaged[at] ^= bit
        with open(wal, "wb") as f:
            f.write(damaged)
        self.op("damage live.wal: byte %d of %d (record at %d of %d records)" %
                (at, len(data), pos, len(offsets)))
        srv = self.start(expect_ok=False)
        if srv.started():
            # Only right if nothing acknowledged was lost: the sweep says.
            self.restarts += 1
            self.op("restart on a damaged log")
            self.sweep("serve started on a log with a damaged record followed by valid ones")
            return True
        self.checked()
        with open(wal, "rb") as f:
            kept = f.read()
        self.expect(kept == bytes(damaged), "serve refused the damaged log (exit %d) but changed "
                    "it (%d bytes, were %d)" % (srv.rc, len(kept), len(damaged)))
        with open(wal, "wb") as f:
            f.write(data)
        self.op("repair live.wal")
        self.restart(after_kill=True)
        return True

    # ---- kills ---------------------------------------------------------------

    def kill(self):
        kind = self.rng.choices(["after-ack", "burst", "in-flight"], [35, 45, 20])[0]
        self.counts["kill-" + kind] += 1
        if kind == "after-ack":
            self.http_write(self.rng, self.rng.choice(["insert", "iin", "delete", "batch"]))
            self.kill_server()
            self.op("kill -9 right after an answer")
        elif kind == "burst":
            self.burst(kill=True)
        else:
            self.in_flight_kill()
        self.stopped_phase(after_kill=True)

    def in_flight_kill(self):
        """One write sent, the server killed before (or while) it answers."""
        rng = self.rng
        what, changes, method, path, body, batch = self.write_request(
            rng, rng.choice(["insert", "iin", "delete", "batch", "batch"]))
        if batch and rng.random() < 0.5:
            # A larger batch, for a longer way to the disk.
            more = [self.new_doc(rng, existing=0.05) for _ in range(rng.randint(10, 60))]
            changes += [(changes[0][0], key, d, changes[0][3]) for key, d, _ in more]
            body["documents"] += [self.doc_body(key, d, text) for key, d, text in more]
            what = "batch %s of %d" % (body["mode"], len(changes))
        u = UnknownOp(what, self.model, changes)
        for s in u.states:
            for key, d in s.items():
                if d is not None:
                    self.history[key].add((d.fp, d.is_int))
        sent = threading.Event()
        result = {}

        def send():
            conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=120)
            try:
                data = None if body is None else json.dumps(body).encode()
                conn.putrequest(method, path)
                if data is not None:
                    conn.putheader("Content-Type", "application/json")
                    conn.putheader("Content-Length", str(len(data)))
                conn.endheaders(data)
                sent.set()
                resp = conn.getresponse()
                payload = resp.read()
                result["answer"] = (resp.status, json.loads(payload) if payload else None)
            except (OSError, http.client.HTTPException, ValueError) as e:
                result["error"] = e
            finally:
                sent.set()
                conn.close()

        th = threading.Thread(target=send)
        th.start()
        sent.wait()
        # A little of the main thread's own traffic before the kill, so that
        # it lands at varying points of the write's way to the disk.
        for _ in range(rng.randint(0, 2)):
            try:
                self.client.request("GET", "/healthz")
            except (NotSent, Unknown):
                break
        self.kill_server()
        th.join()
        if "answer" in result:
            # Answered before the kill: acknowledged, and checked as such.
            self.op("%s, answered %d, then kill -9" % (what, result["answer"][0]))
            self.counts["in-flight-answered"] += 1
            self.apply_answered(what, changes, result["answer"][0], result["answer"][1], batch)
        else:
            self.op("kill -9 with %s in flight" % what)
            self.unknowns.append(u)

    def burst(self, kill):
        """Client threads writing at once; with kill, kill -9 after a random
        number of answers, with requests in flight. The threads' ids are
        their own and their fingerprints random, so each thread's answers
        follow from the model and its own changes alone."""
        rng = self.rng
        threads = rng.choice([2, 2, 3, 4])
        target = rng.randint(0, 20)
        snapshot = dict(self.model)
        lock = threading.Lock()
        cv = threading.Condition(lock)
        shared = {"acks": 0, "done": 0, "stop": False}
        results = []
        port = self.server.port
        id_lock = threading.Lock()

        def fresh(trng):
            with id_lock:
                return self.fresh_key(trng, allow_int=False)[0]

        def worker(t, seed, nops):
            trng = random.Random(seed)
            view = dict(snapshot)
            own = []
            acked = []          # (key, Doc or None), in order
            log = []
            problems = []
            unknown = None
            ops = 0
            tally = collections.Counter()
            client = Client(port)
            for _ in range(nops):
                with lock:
                    if shared["stop"]:
                        break
                kind = trng.choice(["ins", "ins", "ins-near", "iin", "iin-snap", "iin-near",
                                    "del", "batch", "get"])
                if kind in ("del", "ins-near", "iin-near", "get") and not own:
                    kind = "ins"
                if kind == "iin-snap" and not snapshot:
                    kind = "iin"
                changes = []
                if kind == "get":
                    key = trng.choice(own)
                    method, path, body = "GET", doc_path(key), None
                elif kind == "del":
                    key = own.pop(trng.randrange(len(own)))
                    changes = [("delete", key, None, 0)]
                    method, path, body = "DELETE", doc_path(key), None
                else:
                    n = trng.randint(2, 8) if kind == "batch" else 1
                    # An insert near the snapshot's documents would change
                    # another thread's insert-if-new there: those are refused.
                    op = "iin" if kind == "iin-snap" else "insert" if kind.startswith("ins") \
                        or trng.random() < 0.5 else "iin"
                    for _ in range(n):
                        key = fresh(trng)
                        if kind == "iin-snap":
                            base = snapshot[trng.choice(list(snapshot))].fp
                            fp = self.flip(trng, base, trng.randint(0, self.k))
                        elif kind in ("ins-near", "iin-near"):
                            fp = self.flip(trng, view[trng.choice(own)].fp, trng.randint(0, 5))
                        else:
                            fp = trng.getrandbits(64)
                        changes.append((op, key, Doc(fp, self.random_meta(trng), False), self.k))
                    method, path = "POST", "/v1/documents"
                    mode = "insert" if op == "insert" else "insert-if-new"
                    if n == 1:
                        body = dict(self.doc_body(changes[0][1], changes[0][2]), mode=mode)
                    else:
                        body = {"documents": [self.doc_body(c[1], c[2]) for c in changes],
                                "mode": mode}
                ops += 1
                try:
                    st, ans = client.request(method, path, body)
                except NotSent:
                    log.append("%s %s: not sent" % (method, path))
                    break
                except Unknown as e:
                    if changes:
                        unknown = UnknownOp("thread %d: %s %s" % (t, method, [c[1] for c in changes]),
                                            view, changes)
                    log.append("%s %s: no answer (%s)" % (method, path, e))
                    break
                log.append("thread %d: %s %s %s -> %d" % (t, kind, method, [c[1] for c in changes]
                                                          or path, st))
                if kind == "get":
                    got = Doc(int(ans["fp"], 16), canon(ans.get("meta")), False) \
                        if st == 200 else None
                    if got != view.get(key):
                        problems.append("thread %d: GET %r: %r, expected %r" %
                                        (t, key, got, view.get(key)))
                else:
                    before = set(view)
                    problems += ["thread %d: %s" % (t, p) for p in
                                 self.answer_problems(view, changes, st, ans, len(changes) > 1,
                                                      tally)]
                    for c in changes:
                        if c[1] in view or c[1] in before:
                            acked.append((c[1], view.get(c[1])))
                        if c[1] in view and c[1] not in before:
                            own.append(c[1])
                with lock:
                    shared["acks"] += 1
                    cv.notify_all()
                if problems:
                    break
            client.close()
            with lock:
                results.append((t, acked, unknown, log, problems, ops))
                self.counts.update(tally)
                shared["done"] += 1
                cv.notify_all()

        workers = []
        for t in range(threads):
            th = threading.Thread(target=worker, args=(t, rng.getrandbits(64), rng.randint(2, 8)))
            workers.append(th)
        for th in workers:
            th.start()
        with lock:
            if kill:
                cv.wait_for(lambda: shared["acks"] >= target or shared["done"] == threads)
            else:
                cv.wait_for(lambda: shared["done"] == threads)
        if kill:
            self.kill_server()
        with lock:
            shared["stop"] = True
        for th in workers:
            th.join()
        results.sort()
        self.op("burst of %d threads%s" % (threads, ", kill -9 after %d answers" %
                                            shared["acks"] if kill else ""))
        for t, acked, unknown, log, problems, ops in results:
            self.ops += ops
            self.counts["burst-request"] += ops
            for line in log[-8:]:
                self.note(line)
        for t, acked, unknown, log, problems, ops in results:
            for key, d in acked:
                self.set_doc(key, d)
            self.checked(ops)
            if unknown is not None:
                for s in unknown.states:
                    for key, d in s.items():
                        if d is not None:
                            self.history[key].add((d.fp, d.is_int))
                self.unknowns.append(unknown)
            if problems:
                self.mismatch("; ".join(problems[:6]), full=True)

    def await_compaction(self, rng):
        """More than MAX_SEGMENTS segments: the server's policy compacts them
        after its next flush (at once, or when it next looks, every few
        seconds). Inserts until a flush, then reads, each checked, until
        the compaction."""
        stats = self.http_stats()
        if stats.get("segments", 0) <= MAX_SEGMENTS:
            return
        seen = stats["live"]["compactions"]
        flushes = stats["live"]["flushes"]
        self.note("awaiting the server's compaction of %d segments" % stats["segments"])
        deadline = time.monotonic() + POLL_DEADLINE
        while True:
            live = self.live_stats()["live"]
            if live["compactions"] > seen:
                self.counts["server-compactions-seen"] += 1
                self.note("the server compacted")
                return
            if live["flushes"] == flushes and not live["flushing"]:
                self.http_write(rng, "bulk")
                continue
            if time.monotonic() > deadline:
                self.checked()
                self.mismatch("the server did not compact %d segments within %.0f s of a flush" %
                              (stats["segments"], POLL_DEADLINE))
                return
            if rng.random() < 0.5:
                self.http_query(rng)
            else:
                self.http_get(rng)
            time.sleep(0.05)   # the interval of the poll, not a wait for it

    # ---- the run -------------------------------------------------------------

    def build(self):
        rng = self.rng
        path = os.path.join(self.work, "base.jsonl")
        with open(path, "w") as f:
            for _ in range(rng.randint(50, 250)):
                key, is_int = self.fresh_key(rng)
                d = Doc(self.gen_fp(rng), self.random_meta(rng), is_int)
                if key in self.model:
                    continue
                self.set_doc(key, d)
                rec = {"id": id_json(key, is_int), "fp": hexfp(d.fp)}
                if d.meta is not None:
                    rec["meta"] = json.loads(d.meta)
                f.write(json.dumps(rec) + "\n")
        p = subprocess.run([SIMSTORE, "build", "-q", "--sketch", "none", "--k", str(self.k),
                            self.store, path], capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError("simstore build: %s" % p.stderr)

    def step(self):
        rng = self.rng
        size = len(self.model)
        # Deletes gain on inserts as the store grows (and the CLI's delete
        # takes many at once): it stays at several hundred documents, all
        # read back at each restart.
        del_w = 8 if size < 300 else 16 if size < 600 else 40
        kinds = ["insert", "iin", "batch", "check", "delete", "get", "query", "stats",
                 "cli-live", "burst", "stop", "compaction"]
        weights = [12, 12, 8, 3, del_w, 8, 16, 2, 3, 1, 2, 0.15]
        kind = rng.choices(kinds, weights)[0]
        if kind in ("insert", "iin", "check", "delete", "batch"):
            self.http_write(rng, kind)
        elif kind == "get":
            self.http_get(rng)
        elif kind == "query":
            self.http_query(rng)
        elif kind == "stats":
            self.http_stats()
        elif kind == "cli-live":
            self.cli_readers_live(rng)
        elif kind == "burst":
            self.burst(kill=False)
        elif kind == "stop":
            self.stop_server()
            self.stopped_phase(after_kill=False)
        else:
            self.await_compaction(rng)

    def run(self):
        print("model: seed %d: %d operations, %d kills, store k=%d%s (%s)" %
              (self.seed, self.n_ops, self.n_kills, self.k,
               ", leaving out " + ",".join(sorted(self.skip)) if self.skip else "", self.work),
              flush=True)
        started = time.monotonic()
        ok = False
        try:
            self.make_texts()
            self.build()
            kill_at = sorted(self.rng.sample(range(1, max(self.n_ops, self.n_kills + 1)),
                                             self.n_kills))
            self.start()
            self.sweep("at the first start")
            while self.ops < self.n_ops or kill_at:
                if kill_at and self.ops >= kill_at[0]:
                    kill_at.pop(0)
                    self.kill()
                elif self.ops < self.n_ops:
                    self.step()
                else:
                    kill_at.pop(0)
                    self.kill()
            self.stop_server()
            self.compare_full(self.cli_export(), "export at the end")
            self.cli_readers(self.rng, True, 3)
            p = self.cli("verify", self.store)
            self.expect(p.returncode == 0, "verify at the end exited %d: %s" %
                        (p.returncode, p.stdout[-800:]))
            ok = self.mismatches == 0
        except Abort:
            pass
        finally:
            if self.server is not None:
                self.server.kill()
        elapsed = time.monotonic() - started
        print("model: counts: %s" % ", ".join("%s %d" % kv for kv in sorted(self.counts.items())),
              flush=True)
        print("model: seed %d: %d operations, %d kills, %d restarts, %d answers checked, "
              "%d mismatches (%.0f s, %d documents at the end)" %
              (self.seed, self.ops, self.kills, self.restarts, self.answers, self.mismatches,
               elapsed, len(self.model)), flush=True)
        if ok and not os.environ.get("SIMSTORE_MODEL_KEEP"):
            shutil.rmtree(self.work, ignore_errors=True)
        else:
            print("model: the store and the servers' logs are in %s" % self.work, flush=True)
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(ModelTest().run())
