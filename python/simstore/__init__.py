# __init__.py: the package simstore, its public API: the functions and Store
# with their keyword defaults, the checks of their arguments (_args.py) and
# the shapes of their results (_results.py) in Python, over the C core
# simstore._simstore (python/_simstore/), which makes the library's calls.
"""simstore: a compressed on-disk store of 64-bit simhash fingerprints that
answers exact Hamming-distance-k queries (Python bindings of libsimstore).

Texts: fingerprint(), fingerprints(), sketch(), similarity(), paragraphs(),
distance(). Stores: Store.build(), Store.open(), then query(), query_batch(),
query_paragraphs(), get(), documents(), pairs(), clusters(), stats(),
fingerprint(), add(), delete(), compact(), close(); insert_if_new(), as a
server's insert-if-new. Errors: Error and one subclass per library error
code (.code). Calls that work release the GIL.
Opening for writing after a server stopped applies its logged changes
first: RecoveryWarning, Store.recovery (a Recovery)."""
import warnings

from . import _args, _results, _simstore
from ._results import (ClusterMember, Document, Match, Pair, Paragraph, ParagraphMatch,
                       Recovery)
from ._simstore import (BusyError, CorruptError, Error, ExistsError, FullError, IOFailedError,
                        InvalidArgumentError, NoMemoryError, NotFoundError, RangeError,
                        ReadOnlyError, VersionError, distance, similarity)

__version__ = _simstore.__version__
MAX_K = _simstore.MAX_K

__all__ = [
    "BusyError", "ClusterMember", "CorruptError", "Document", "Error", "ExistsError",
    "FullError", "IOFailedError", "InvalidArgumentError", "MAX_K", "Match", "NoMemoryError",
    "NotFoundError", "Pair", "Paragraph", "ParagraphMatch", "RangeError", "ReadOnlyError",
    "Recovery", "RecoveryWarning", "Store", "VersionError", "distance", "fingerprint",
    "fingerprints", "insert_if_new", "paragraphs", "similarity", "sketch",
]

_SKETCH_DEFAULT = _simstore.SKETCH_KINDS[_simstore.SKETCH_DEFAULT]


class RecoveryWarning(UserWarning):
    """Warned when opening a store for writing first applied the changes a
    server had acknowledged in the store's log (live.wal) but not written
    into the store before it stopped (a crash, kill -9), as the server's
    next start would; Store.recovery says what was done."""


# ---- Texts ------------------------------------------------------------------

def fingerprint(text, **options):
    """fingerprint(text, **options) -> int

    The 64-bit simhash of a text (str, or UTF-8 bytes), as `simstore fingerprint`
    makes it. Options, as the tool's: version (1, 2 or 3, default 3), shingle (3),
    cjk_shingle (2), weights ('tf', 'length' or 'log'), lambda (1.0, with
    weights='length'), cjk ('auto', 'friso' or 'bigram')."""
    kw = _args.Keywords("fingerprint", options)
    o = _args.text_options(kw)
    kw.done()
    return _simstore.fingerprint(text, o)


def fingerprints(texts, *, threads=0, **options):
    """fingerprints(texts, threads=0, **options) -> numpy.ndarray or list

    The fingerprints of a sequence of texts, fingerprinted on `threads` threads
    (0: every core) with the options of fingerprint(): a numpy uint64 array when
    numpy imports, else a list of ints."""
    threads = _args.unsigned("threads", threads, 0, _args.THREADS_MAX) or 0
    kw = _args.Keywords("fingerprints", options)
    o = _args.text_options(kw)
    kw.done()
    if isinstance(texts, (str, bytes)):
        raise TypeError("fingerprints() takes a sequence of texts (for one text, use "
                        "fingerprint())")
    return _results.array(_simstore.fingerprints(texts, threads, o), "Q")


def sketch(text, *, kind=_SKETCH_DEFAULT, **options):
    """sketch(text, kind='minhash256', **options) -> (fp, bytes)

    The fingerprint of a text and its sketch of kind 'minhash16', 'minhash32',
    'minhash64', 'minhash128' or 'minhash256' (format/sketch.md), made in one
    pass: `simstore fingerprint --sketch KIND`. similarity() compares two."""
    kind = _args.choice("kind", kind, _simstore.SKETCH_KINDS)
    kw = _args.Keywords("sketch", options)
    o = _args.text_options(kw)
    kw.done()
    if kind == _simstore.SKETCH_KINDS.index("none"):
        raise ValueError("sketch(): kind must be a sketch kind, not 'none'")
    o["sketch"] = _simstore.SKETCH_DEFAULT if kind is None else kind
    return _simstore.sketch(text, o)


def paragraphs(text, **options):
    """paragraphs(text, **options) -> list of Paragraph

    The paragraphs of a text (groups of non-blank lines) that have words, each
    fingerprinted as a document of its own: Paragraph(number, offset, length,
    fp, words), offsets in bytes of its UTF-8. `simstore fingerprint
    --paragraphs`. Options as fingerprint()."""
    kw = _args.Keywords("paragraphs", options)
    o = _args.text_options(kw)
    kw.done()
    return list(map(_results.make_paragraph, _simstore.paragraphs(text, o)))


def insert_if_new(path, docs, *, k=None, min_similarity=None):
    """insert_if_new(path, docs, k=None, min_similarity=None) -> list of bool

    Open the store at path as a live store, as `simstore serve` does (its
    writer lock and its log, live.wal), insert each document of docs in order
    unless the store (with the documents inserted before it) holds a
    near-duplicate of it, then write the changes into the store and close.
    Documents as Store.build() takes them; texts are fingerprinted and
    sketched with the store's options. Near-duplicates by the library's one
    rule (simstore.h, "The near-duplicate rule"), the one `simstore dedup`
    and POST /v1/documents with insert-if-new apply, without bands: on a
    store that keeps sketches, within 7 bits at estimated similarity 0.9 or
    more; without
    sketches, within the store's k. k and min_similarity set its parts (None:
    the default; k given alone: by distance alone). Answered one document at
    a time against the store, the rule is without bands (the store keeps no
    band index: pairs() and clusters() take them, and `simstore dedup` without
    --store among its kept records). Returns, for each
    document, whether it was inserted. The store must not be open for
    writing elsewhere (a Store opened with write=True, a server)."""
    rule = _args.given(k=_args.unsigned("k", k, 0, MAX_K),
                       min_similarity=_args.number("min_similarity", min_similarity, 0, 1))
    return _simstore.insert_if_new(path, _args.records(docs), rule)


# ---- Stores -------------------------------------------------------------------

def _recover(path):
    """Before a writer opens the store at path: apply the changes a stopped
    server acknowledged in its log but did not write into the store, as its
    next start would, so that the writer's changes come after them (the C
    core's recover()). Warns RecoveryWarning when changes were applied or a
    torn tail set aside (with warnings as errors, the changes are applied and
    the store is not opened). A Recovery of what was done, or None."""
    raw = _simstore.recover(path)
    if raw is None:
        return None
    rec = Recovery._make(raw)
    if not rec.applied and not rec.torn_bytes:
        return None
    s = "" if rec.applied == 1 else "s"
    msg = (f"{path}: applied {rec.applied} change{s} that a stopped server had acknowledged "
           "and logged in live.wal but not written into the store, as its next start would")
    if rec.torn_bytes:
        msg += (f"; set aside a torn tail of the log, {rec.torn_bytes} bytes "
                f"({rec.torn_records} records, never acknowledged), as "
                f"{rec.torn_name or 'a file beside it'}")
    # The caller of Store.open() or Store.build(), through _open().
    warnings.warn(msg, RecoveryWarning, stacklevel=4)
    return rec


class Store:
    """A simstore store: made by Store.build() or Store.open(), never directly.
    A Store may be shared by threads: queries run in parallel, with the
    GIL released."""

    __slots__ = ("_core", "_path", "_write", "_recovery")

    def __new__(cls, *args, **kwargs):
        raise TypeError("cannot create 'simstore.Store' instances")

    @classmethod
    def _open(cls, path, write, verify, auto_compact, huge_pages):
        """Open the store at path; a writer first applies a stopped server's
        log (_recover)."""
        write = bool(write)
        recovery = _recover(path) if write else None
        self = object.__new__(cls)
        self._core = _simstore.Store(path, write, verify, auto_compact, huge_pages)
        self._path, self._write, self._recovery = path, write, recovery
        return self

    @classmethod
    def open(cls, path, *, write=False, verify=True, auto_compact=True, huge_pages=False):
        """Store.open(path, write=False, verify=True, auto_compact=True,
                   huge_pages=False) -> Store

        Open the store at path. write=True takes the writer lock (add, delete,
        compact); verify=False trusts the disk (no block checksums, no LMDB page
        checks: `simstore query --no-verify`); auto_compact=False makes a writer
        compact only on request; huge_pages=True brings the store's files into
        the page cache 2 MiB at a time as they are first read (`simstore query
        --huge-pages`). Raises NotFoundError, CorruptError, BusyError, ...

        A writer first applies the changes a server acknowledged in the store's
        log (live.wal) but had not written into the store when it stopped (a
        crash, kill -9), as the server's next start would, so that the writer's
        changes come after them: it warns RecoveryWarning saying how many, and
        Store.recovery tells (a Recovery, else None). Readers see the store's
        files as they are."""
        return cls._open(path, write, verify, auto_compact, huge_pages)

    @classmethod
    def build(cls, path, docs, **options):
        """Store.build(path, docs, k=3, **options) -> Store

        Build a new store at path from docs and open it (read-only unless
        write=True). Each document is a tuple (id, text_or_fp) or (id, text_or_fp,
        meta), or a dict {"id", "text" or "fp", "meta"}: id a str, UTF-8 bytes
        (given back as a str) or an int in 0..2**63-1 (given back as an int), text a
        str or UTF-8 bytes (fingerprinted and sketched with the store's text
        options), fp an int or 16 hex digits, meta any JSON value (stored as
        compact JSON). With fingerprint_only=True, docs are fingerprints (ints, or
        a uint64 buffer).

        Ids follow the tool's one rule: 1..511 bytes of UTF-8 without control
        characters (tab, newline, NUL, ESC, DEL, U+0080..U+009F) or lone
        surrogates; metadata is what JSON readers read back (no NaN or Infinity,
        integers in -2**63..2**63-1). One that breaks them raises
        InvalidArgumentError (a ValueError) naming docs[i], the id and why, and
        nothing is built.

        Options: k (0..7), tables (0: the cost model), block_bytes, expected,
        replace (build over an existing store), fingerprint_only, threads,
        memory_bytes, skip_existing (a repeated id keeps the first), sketch ('auto':
        minhash256 when the first document has a text, as `simstore build`; or 'none',
        'minhash16' ... 'minhash256'), paragraph_min_words (0: no paragraph index),
        boilerplate ('auto' or True: lines held by more than boilerplate_fraction
        (0.1) of the documents, when there are boilerplate_min_documents (100) or
        more, are found in a first pass and removed before fingerprinting, as
        `simstore build --boilerplate auto`; docs are then read into a list),
        the text options of fingerprint(), and write, verify for the open."""
        kw = _args.Keywords("build", options)
        # sketch 'auto' (or not given): the default kind when the first
        # document has a text; None is no sketch.
        sketch_auto = kw.left.get("sketch", "auto")
        sketch_auto = isinstance(sketch_auto, str) and sketch_auto == "auto"
        if sketch_auto:
            kw.take("sketch")
        # boilerplate: None, False or "none" (none); True or "auto".
        bp = kw.take("boilerplate")
        boiler = bool(_args.choice("boilerplate", bp, ("none", "auto")) if isinstance(bp, str)
                      else bp is not None and bp)
        bp_options = _args.given(
            fraction=kw.number("boilerplate_fraction", 1e-6, 0.999999),
            min_documents=kw.unsigned("boilerplate_min_documents", 0, _args.COUNT_MAX))
        build_options = _args.given(
            k=kw.unsigned("k", 0, MAX_K),
            tables=kw.unsigned("tables", 0, _args.TABLES_MAX),
            block_bytes=kw.unsigned("block_bytes", _simstore.MIN_BLOCK_BYTES,
                                    _simstore.MAX_BLOCK_BYTES),
            expected_fps=kw.unsigned("expected", 0, _args.COUNT_MAX),
            memory_bytes=kw.unsigned("memory_bytes", 0, _args.COUNT_MAX) or None,
            threads=kw.unsigned("threads", 0, _args.THREADS_MAX),
            replace=kw.flag("replace"),
            fingerprint_only=kw.flag("fingerprint_only"),
            skip_existing=kw.flag("skip_existing"))
        text_options = _args.text_options(kw, store=True)
        write, verify = kw.flag("write") or False, kw.flag("verify") is not False
        auto_compact = kw.flag("auto_compact") is not False
        huge_pages = kw.flag("huge_pages") or False
        kw.done()
        if build_options.get("fingerprint_only"):
            if boiler:
                raise ValueError("build(): boilerplate needs texts: not with fingerprint_only")
        else:
            docs = _args.records(docs)
            if boiler:
                docs = list(docs)  # read twice
        _simstore.build(path, docs, text_options, build_options, sketch_auto,
                        bp_options if boiler else None)
        return cls._open(path, write, verify, auto_compact, huge_pages)

    # ---- Queries

    def query(self, q, k=None, *, meta=False):
        """query(q, k=None, meta=False) -> list of Match

        Every document within distance k (None: the store's k) of q: a fingerprint
        (int) or a text (str or bytes, fingerprinted and sketched as the store's
        documents were). Matches (id, fp, distance, similarity, meta, insertion)
        come sorted by distance, then id bytes, exactly as `simstore query` gives
        them; meta=True also reads each document's metadata. k may exceed the
        store's k up to 7: as exact, each table probed at every prefix near the
        query's (slower); a k outside 0..7 raises RangeError."""
        meta = bool(meta)
        return _results.matches(self._core.query(q, self._k(k), meta), meta)

    def query_batch(self, queries, k=None, *, threads=0, similarity=False):
        """query_batch(queries, k=None, threads=0, similarity=False)
            -> (lims, ids, distances[, similarities])

        Answer many queries at once through the batch path (sorted probes and merge
        scans: `simstore query --queries`). queries: fingerprints (a buffer of
        64-bit integers such as a numpy uint64 array, or an iterable of ints), or a
        sequence of texts (str or bytes, fingerprinted and sketched as the store's
        documents). The answer is FAISS range_search's layout: the matches of query
        i are ids[lims[i]:lims[i+1]] with distances[lims[i]:lims[i+1]], in the order
        query() gives them; lims (n + 1, int64), distances (int32) and, with
        similarity=True, similarities (float64, NaN when unknown: queries by
        fingerprint) are numpy arrays when numpy imports (lists otherwise), ids a
        list (the fingerprints in a fingerprint-only store)."""
        threads = _args.unsigned("threads", threads, 0, _args.THREADS_MAX) or 0
        similarity = bool(similarity)
        k = self._k(k)
        # Texts: a list or tuple whose first item is a str or bytes.
        texts = (isinstance(queries, (list, tuple)) and len(queries) > 0
                 and isinstance(queries[0], (str, bytes)))
        lims, ids, dists, sims = self._core.query_batch(queries, texts, k, threads)
        answer = (_results.array(lims, "q"), ids, _results.array(dists, "i"))
        return answer + (_results.array(sims, "d"),) if similarity else answer

    def query_paragraphs(self, text, k=None, *, min_fraction=0.0, meta=False):
        """query_paragraphs(text, k=None, min_fraction=0.0, meta=False)
            -> list of ParagraphMatch

        The stored documents sharing near-duplicate paragraphs with a text, in a
        store built with paragraph_min_words (`simstore query --paragraphs`):
        ParagraphMatch(id, shared, of, fraction, fp, meta), `shared` of the text's
        `of` paragraphs having one of the document's within k; those with a
        fraction of at least min_fraction, larger fractions first, then by id."""
        min_fraction = _args.number("min_fraction", min_fraction, 0, 1) or 0.0
        meta = bool(meta)
        raw = self._core.query_paragraphs(text, self._k(k), min_fraction, meta)
        return _results.paragraph_matches(raw, meta)

    def fingerprint(self, text):
        """fingerprint(text) -> int

        The fingerprint of a text as the store's documents are made: with its text
        options and without its boilerplate lines (`simstore fingerprint --store`)."""
        return self._core.fingerprint(text)

    def get(self, id):
        """get(id) -> Document or None

        The document with this id (id, fp, meta, segment, insertion), as
        `simstore get` gives it, or None when there is none. Any id of
        1..511 bytes is looked for (as delete())."""
        raw = self._core.get(id)
        return None if raw is None else _results.document(raw)

    def documents(self, *, order="id", memory_bytes=0):
        """documents(order='id', memory_bytes=0) -> iterator of Document

        Every live document, from one committed state, in id byte order or
        (order='insertion') in the order they were inserted: `simstore export`.
        Gathered with the GIL released, then iterated. In a fingerprint-only store,
        the distinct fingerprints (id None)."""
        by_insertion = _args.choice("order", order, ("id", "insertion"))
        memory = _args.unsigned("memory_bytes", memory_bytes, 0, _args.COUNT_MAX)
        raw = self._core.documents(_args.given(memory_bytes=memory or None), bool(by_insertion))
        return map(_results.document, raw)

    def pairs(self, *, k=None, by_fingerprint=False, min_similarity=None, bands=None,
              threads=0, memory_bytes=0):
        """pairs(k=None, by_fingerprint=False, min_similarity=None, bands=None,
              threads=0, memory_bytes=0) -> iterator of Pair

        Every unordered pair of stored documents that are candidates, within
        distance k (up to 7, above the store's k joined in memory or through
        sorted runs within memory_bytes) or with bands sharing one of the
        sketches' LSH bands (format/sketch.md 6.2, at any distance), whose
        estimated similarity is at least min_similarity, each once, by
        distance, then a, then b. Defaults (None), as the CLI's: on a store
        that keeps sketches and without k, the near-duplicate setting
        (min_similarity=0.9 with bands at the store's k; k=7 with
        bands=False); else the store's k, no similarity filter:
        `simstore pairs STORE`. bands: None (the rule's default: on when
        min_similarity is 0.5 or more), True (`--bands on`: refused without
        such a minimum) or False (within k alone). Pairs (a, b, distance,
        fp_a, fp_b, similarity) are gathered with the GIL released, then
        iterated."""
        scan = self._scan(k, threads, memory_bytes, min_similarity, bands)
        return map(_results.make_pair, self._core.pairs(scan, bool(by_fingerprint)))

    def clusters(self, *, k=None, mode="components", keep="first", singletons=False,
                 min_similarity=None, bands=None, threads=0, memory_bytes=0, key=None):
        """clusters(k=None, mode='components', keep='first', singletons=False,
                 min_similarity=None, bands=None, threads=0, memory_bytes=0)
            -> iterator of ClusterMember

        The store's near-duplicate clusters at distance k (and min_similarity,
        bands; defaults as pairs()), as `simstore clusters`:
        one ClusterMember (cluster, id, kept, distance, fp, cluster_fp, similarity)
        per clustered document, clusters in the byte order of their kept document's
        id, each kept document first. mode 'components' (connected components) or
        'star'; keep 'first' (inserted first), 'min_id', or 'min_key' / 'max_key'
        with key, a function of a document's metadata (parsed JSON, or None)
        returning a number or None (documents without one come last; `--keep
        max-meta FIELD` is key=lambda m: m and m.get(FIELD)); singletons=True also
        gives each document near no other as a cluster of its own. The documents to
        drop are the members with kept False."""
        options = self._scan(k, threads, memory_bytes, min_similarity, bands)
        mode = _args.choice("mode", mode, _simstore.CLUSTER_MODES)
        keep = _args.choice("keep", keep, _simstore.KEEP_RULES)
        options.update(_args.given(mode=mode, keep=keep, singletons=bool(singletons)))
        by_key = keep is not None and _simstore.KEEP_RULES[keep] in ("min_key", "max_key")
        if by_key != (key is not None) or (key is not None and not callable(key)):
            raise ValueError("clusters(): keep='min_key' and 'max_key' take key, a function of "
                             "a document's metadata, and only they")
        fn = None if key is None else (lambda text: key(_results.meta(text)))
        return map(_results.make_member, self._core.clusters(options, fn))

    def stats(self):
        """stats() -> dict

        Counts and sizes of the store, under the names `simstore stats --json`
        uses: k, tables, design, block_bytes, fingerprint_only, documents,
        fingerprints, segments, generation, table_fingerprints, table_bytes,
        lmdb_bytes (and its parts), block_key_bytes, document_file_bytes,
        fingerprint_version,
        text_options, sketch, sketch_bytes_per_document, paragraphs, boilerplate,
        wal (the write-ahead log a server keeps: bytes, pending_changes (acknowledged,
        not yet in the store's files), torn_bytes, damaged)."""
        return _results.stats(self._core.stats())

    def replaced(self):
        """replaced() -> bool

        Whether the path now names another store than the one opened (a build with
        replace=True swapped one in) or nothing: reopen to follow it."""
        return self._core.replaced()

    def _k(self, k):
        """The distance of a query: None for the store's k."""
        return self._core.k if k is None else _args.distance(k, self._core.k)

    def _scan(self, k, threads, memory_bytes, min_similarity, bands):
        """The scan options of pairs() and clusters(): k=None keeps the scans'
        default (the near-duplicate setting's k on a store that keeps sketches
        and is filtered by similarity, else the store's k); bands=None the
        rule's."""
        return _args.given(
            k=None if k is None else _args.distance(k, self._core.k),
            threads=_args.unsigned("threads", threads, 0, _args.THREADS_MAX),
            memory_bytes=_args.unsigned("memory_bytes", memory_bytes, 0, _args.COUNT_MAX) or None,
            min_similarity=_args.number("min_similarity", min_similarity, 0, 1),
            bands=_args.tristate("bands", bands))

    # ---- Writes

    def add(self, docs, *, skip_existing=False, threads=0, memory_bytes=0):
        """add(docs, skip_existing=False, threads=0, memory_bytes=0) -> int

        Add documents (as Store.build takes them, ids and metadata under its rules)
        as a new segment, committed at once; texts are fingerprinted with the
        store's text options and boilerplate. An id already stored or repeated is
        InvalidArgumentError (nothing is added) unless skip_existing. Needs a store
        opened with write=True (else ReadOnlyError). Returns the number of
        documents now in the store."""
        options = _args.given(
            skip_existing=bool(skip_existing),
            threads=_args.unsigned("threads", threads, 0, _args.THREADS_MAX),
            memory_bytes=_args.unsigned("memory_bytes", memory_bytes, 0, _args.COUNT_MAX) or None)
        core = self._core
        return core.add(docs if core.fingerprint_only else _args.records(docs), options)

    def delete(self, ids):
        """delete(ids) -> int

        Delete the documents with these ids (one id, or an iterable of ids) in one
        commit; ids not stored are skipped. Any id of 1..511 bytes is looked for
        (one an older version stored may break today's id rule). Returns the
        number deleted. Needs a store opened with write=True."""
        return self._core.delete([ids] if isinstance(ids, (str, bytes, int)) else list(ids))

    def compact(self):
        """compact() -> None

        Rewrite every segment into one holding only live fingerprints (write=True)."""
        self._core.compact()

    # ---- The object

    def close(self):
        """close() -> None

        Close the store (also done by `with` and when the object is freed).
        Raises BusyError while a call on it is running (in another thread, or
        the key function of clusters())."""
        self._core.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def closed(self):
        """True once the store is closed"""
        return self._core.closed

    @property
    def path(self):
        """the path the store was opened at"""
        return self._path

    @property
    def recovery(self):
        """a Recovery(applied, torn_bytes, torn_records, torn_name) when opening for
        writing applied the changes a stopped server had left in the store's log
        (live.wal), else None"""
        return self._recovery

    @property
    def k(self):
        """the distance the store's design answers with one probe a table (the
        default k; any k up to 7 is answered)"""
        return self._core.k

    def __repr__(self):
        write = " write" if self._write else ""
        closed = " closed" if self._core.closed else ""
        return f"<simstore.Store {self._path!r} k={self._core.k}{write}{closed}>"
