"""_results.py: what simstore's calls give back, made of the plain tuples,
bytes and dicts of the C core (_simstore): the named results (Match, Pair,
ClusterMember, Document, Paragraph, ParagraphMatch, Recovery), metadata
parsed from its JSON, numpy arrays (or lists without numpy), and stats()
under the names of `simstore stats --json`."""
import collections
import functools
import json

from . import _simstore


def _named(name, doc, fields):
    """A named tuple simstore.<name> with a doc for every field, shown as
    simstore.<name>(...)."""
    cls = collections.namedtuple(name, [field for field, _ in fields], module="simstore")
    cls.__doc__ = doc
    for field, field_doc in fields:
        getattr(cls, field).__doc__ = field_doc
    plain = cls.__repr__
    cls.__repr__ = lambda self: "simstore." + plain(self)
    return cls


def _maker(cls):
    """cls from a tuple of its fields, as the C core gives them (tuple.__new__:
    quicker than cls._make, which checks the length in Python)."""
    return functools.partial(tuple.__new__, cls)


Match = _named("Match", "One answer of Store.query().", [
    ("id", "the document's id (str, or int when given as one); None in a fingerprint-only store"),
    ("fp", "its fingerprint"),
    ("distance", "Hamming distance to the query"),
    ("similarity", "estimated Jaccard similarity to the query's text, or None when unknown"),
    ("meta", "its metadata (parsed JSON) when asked for (meta=True), else None"),
    ("insertion", "insertion order number (0 when unknown)")])

Pair = _named("Pair", "One pair of Store.pairs().", [
    ("a", "id of the first document (byte order a < b); None by fingerprint"),
    ("b", "id of the second document"),
    ("distance", "their Hamming distance"),
    ("fp_a", "fingerprint of a"),
    ("fp_b", "fingerprint of b"),
    ("similarity", "their estimated similarity, or None when unknown")])

ClusterMember = _named("ClusterMember", "One clustered document of Store.clusters().", [
    ("cluster", "id of the cluster's kept document"),
    ("id", "id of this document"),
    ("kept", "True for the document the cluster keeps"),
    ("distance", "Hamming distance to the kept document"),
    ("fp", "this document's fingerprint"),
    ("cluster_fp", "the kept document's fingerprint"),
    ("similarity", "estimated similarity to the kept document, or None when unknown")])

Document = _named("Document", "A document of Store.get() and Store.documents().", [
    ("id", "the document's id"),
    ("fp", "its fingerprint"),
    ("meta", "its metadata (parsed JSON), or None"),
    ("segment", "the newest live segment whose tables hold its fingerprint"),
    ("insertion", "insertion order number (0 when unknown)"),
    ("sketch", "its sketch (bytes of the store's sketch kind), or None")])

Paragraph = _named("Paragraph", "One paragraph of paragraphs().", [
    ("number", "1, 2, ... in text order, over the paragraphs with words"),
    ("offset", "byte offset of its first line in the text's UTF-8"),
    ("length", "its bytes, up to the end of its last line"),
    ("fp", "its fingerprint"),
    ("words", "its tokens (what a store's paragraph_min_words counts)")])

ParagraphMatch = _named("ParagraphMatch", "One answer of Store.query_paragraphs().", [
    ("id", "the stored document's id"),
    ("shared", "how many of the query's paragraphs have one of its paragraphs within k"),
    ("of", "the query's paragraphs"),
    ("fraction", "shared / of"),
    ("fp", "the document's (whole-text) fingerprint"),
    ("meta", "its metadata (meta=True), else None")])

Recovery = _named(
    "Recovery",
    "What opening a store for writing did with the log (live.wal) of a server that stopped "
    "without writing its changes into the store: Store.recovery.", [
        ("applied", "changes a stopped server had acknowledged and logged, now written into "
                    "the store's files"),
        ("torn_bytes", "bytes of a torn tail of the log (a group whose fsync had not returned: "
                       "never acknowledged) set aside, 0 for none"),
        ("torn_records", "whole records among them"),
        ("torn_name", "the file in the store directory that keeps them, or None")])


make_match = _maker(Match)
make_pair = _maker(Pair)
make_member = _maker(ClusterMember)
make_paragraph = _maker(Paragraph)
make_paragraph_match = _maker(ParagraphMatch)


def meta(text):
    """Metadata from its JSON text; None for none."""
    return None if text is None else json.loads(text)


def matches(raw, with_meta):
    """Store.query()'s list of Match."""
    if not with_meta:
        return list(map(make_match, raw))
    return [Match(i, fp, d, sim, meta(m), ins) for i, fp, d, sim, m, ins in raw]


def paragraph_matches(raw, with_meta):
    """Store.query_paragraphs()'s list of ParagraphMatch."""
    if not with_meta:
        return list(map(make_paragraph_match, raw))
    return [ParagraphMatch(i, shared, of, frac, fp, meta(m)) for i, shared, of, frac, fp, m in raw]


def document(raw):
    """A Document of get() and documents(), its metadata parsed."""
    ident, fp, text, segment, insertion, sketch = raw
    return Document(ident, fp, meta(text), segment, insertion, sketch)


_numpy_module = None
_numpy_tried = False


def _numpy():
    """numpy, or None when it does not import (for any reason: lists then)."""
    global _numpy_module, _numpy_tried
    if not _numpy_tried:
        try:
            import numpy
        except Exception:
            numpy = None
        _numpy_module, _numpy_tried = numpy, True
    return _numpy_module


_DTYPES = {"Q": "uint64", "q": "int64", "i": "int32", "d": "float64"}


def array(buf, code):
    """Native values of struct code `code` in a bytearray as a writable numpy
    array of that dtype (on buf), or a list without numpy."""
    numpy = _numpy()
    if numpy is not None:
        return numpy.frombuffer(buf, dtype=_DTYPES[code])
    return memoryview(buf).cast(code).tolist()


def stats(raw):
    """stats() from the C core's simstore_stats, text options and
    boilerplate, under the names and groups of `simstore stats --json`."""
    to = raw["text_options"]
    weights = _simstore.WEIGHTS[to["weighting"]]
    sketches = _simstore.SKETCH_KINDS
    paragraphs = None
    if raw["paragraph_min_words"]:
        paragraphs = {"min_words": raw["paragraph_min_words"],
                      "entries": raw["paragraph_entries"],
                      "fingerprints": raw["paragraph_fps"],
                      "segments": raw["paragraph_segments"],
                      "table_fingerprints": raw["paragraph_table_fps"],
                      "table_bytes": raw["paragraph_table_bytes"]}
    d = {name: raw[name] for name in ("k", "tables", "design", "block_bytes")}
    d["fingerprint_only"] = bool(raw["fingerprint_only"])
    d.update((name, raw[name]) for name in ("documents", "fingerprints", "segments", "generation"))
    d["table_fingerprints"] = raw["table_fps"]
    d.update((name, raw[name]) for name in (
        "table_bytes", "lmdb_bytes", "lmdb_records_bytes", "lmdb_mapping_bytes",
        "lmdb_other_bytes", "lmdb_free_bytes", "block_key_bytes", "document_file_bytes"))
    d["fingerprint_version"] = to["version"] or _simstore.FP_VERSION_DEFAULT
    d["text_options"] = {"fp_version": d["fingerprint_version"],
                         "shingle": to["shingle_words"],
                         "cjk_shingle": to["cjk_shingle"],
                         "weights": weights,
                         "lambda": to["lambda"] if weights == "length" else None,
                         "cjk": _simstore.CJK_MODES[to["cjk"]]}
    d["sketch"] = sketches[raw["sketch"]] if raw["sketch"] < len(sketches) else "none"
    d["sketch_bytes_per_document"] = raw["sketch_bytes"]
    d["paragraphs"] = paragraphs
    d["boilerplate"] = raw["boilerplate"]
    d["wal"] = {"bytes": raw["wal_bytes"],
                "pending_changes": raw["wal_pending_records"],
                "torn_bytes": raw["wal_torn_bytes"],
                "damaged": bool(raw["wal_damaged"])}
    return d
