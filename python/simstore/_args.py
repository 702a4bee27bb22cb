"""_args.py: the checks of simstore's arguments before they reach the C core
(_simstore): integer and number options in their ranges, names among their
choices, text options as the dict _simstore takes (named after
simstore_text_options' fields), distances, and documents as the records
_simstore's writers take (ids under the library's one id rule, metadata as
compact JSON the tool reads back)."""
import json
import operator

from . import _simstore

# The largest count an option takes ("UINT64_MAX >> 1").
COUNT_MAX = 2**63 - 1
THREADS_MAX = 256
TABLES_MAX = 1 << 16

# The deepest nesting of arrays and objects a metadata value may have: the
# tool's JSON reader (jansson, 2048 levels) reads a record, itself an
# object, around it.
META_MAX_DEPTH = 2047

_ABSENT = object()


def error(code, message):
    """A new simstore.Error of library code `code` (its subclass), .code set."""
    return _simstore.error(code, message)


def given(**fields):
    """The fields whose value is not None: an options dict for _simstore."""
    return {name: value for name, value in fields.items() if value is not None}


def unsigned(name, value, lo, hi):
    """An integer option (anything with __index__) in lo..hi; None: not given."""
    if value is None:
        return None
    ix = operator.index(value)
    if not lo <= ix <= hi:
        raise ValueError(f"{name} must be an integer in {lo}..{hi}, not {ix!r}")
    return ix


def number(name, value, lo, hi):
    """A number option in lo..hi (NaN is outside); None: not given."""
    if value is None:
        return None
    if isinstance(value, (str, bytes, bytearray)):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    x = float(value)
    if not lo <= x <= hi:
        raise ValueError(f"{name} must be a number in {lo:g}..{hi:g}, not {value!r}")
    return x


def tristate(name, value):
    """A switch with a default: None (not given), True or False, as 1 or 0."""
    if value is None:
        return None
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be None, True or False, not {type(value).__name__}")
    return int(value)


def choice(name, value, names):
    """The index in names of option `value`, one of them; None: not given."""
    if value is None:
        return None
    if isinstance(value, str) and value in names:
        return names.index(value)
    listed = ", ".join(f"'{n}'" for n in names)
    raise ValueError(f"{name} must be one of {listed}, not {value!r}")


def distance(k, store_k):
    """A query's distance k: 0..MAX_K, answered above the store's k by a
    slower path; one outside is RangeError, whichever side."""
    ix = operator.index(k)
    if not 0 <= ix <= _simstore.MAX_K:
        raise error(_simstore.ERANGE,
                    f"k must be a distance in 0..{_simstore.MAX_K} (above the store's k, "
                    f"{store_k}, answered by a slower path), not {ix!r}")
    return ix


class Keywords:
    """The keyword options of a call that takes **options (the text options
    include `lambda`, which no parameter can be named): each taken out with
    its check, then done() refuses any left."""

    def __init__(self, fname, options):
        self.fname = fname
        self.left = dict(options)

    def take(self, name):
        return self.left.pop(name, None)

    def unsigned(self, name, lo, hi):
        return unsigned(name, self.take(name), lo, hi)

    def number(self, name, lo, hi):
        return number(name, self.take(name), lo, hi)

    def choice(self, name, names):
        return choice(name, self.take(name), names)

    def flag(self, name):
        """A yes-or-no option: its truth, or None when not given."""
        value = self.left.pop(name, _ABSENT)
        return None if value is _ABSENT else bool(value)

    def done(self):
        for name in self.left:
            raise TypeError(f"{self.fname}() got an unexpected keyword argument {name!r}")


def text_options(kw, store=False):
    """The text options among kw, as the tool's: version (or fp_version),
    shingle, cjk_shingle, weights, cjk, lambda (or lambda_); with store also
    sketch and paragraph_min_words. A dict of those given."""
    latest = _simstore.FP_VERSION_LATEST
    version = kw.unsigned("version", 1, latest)
    fp_version = kw.unsigned("fp_version", 1, latest)
    o = given(version=version if fp_version is None else fp_version,
              shingle_words=kw.unsigned("shingle", 1, _simstore.SHINGLE_MAX),
              cjk_shingle=kw.unsigned("cjk_shingle", 1, _simstore.SHINGLE_MAX),
              weighting=kw.choice("weights", _simstore.WEIGHTS),
              cjk=kw.choice("cjk", _simstore.CJK_MODES))
    lam = kw.number("lambda", 0, _simstore.LAMBDA_MAX)
    lam_ = kw.number("lambda_", 0, _simstore.LAMBDA_MAX)
    o.update(given(**{"lambda": lam if lam_ is None else lam_}))
    if store:
        o.update(given(sketch=kw.choice("sketch", _simstore.SKETCH_KINDS),
                       paragraph_min_words=kw.unsigned("paragraph_min_words", 0,
                                                       _simstore.PARAGRAPH_MIN_WORDS_MAX)))
    return o


# ---- Documents -------------------------------------------------------------

def records(docs):
    """The documents of docs (as Store.build, add and insert_if_new take
    them), each checked as it is read, as the records _simstore's writers
    take: (id as UTF-8 bytes, whether it is an int, text or None,
    fingerprint, metadata as compact JSON bytes or None)."""
    return (record(index, doc) for index, doc in enumerate(docs))


def record(index, doc):
    """docs[index]: (id, text_or_fp[, meta]) or {"id", "text" | "fp", "meta"}."""
    if isinstance(doc, dict):
        if "id" not in doc or ("text" in doc) == ("fp" in doc):
            raise ValueError(f'docs[{index}]: a document dict has an "id" and a "text" or an "fp"')
        ident, meta, has_text = doc["id"], doc.get("meta"), "text" in doc
        value = doc["text"] if has_text else doc["fp"]
    elif isinstance(doc, (tuple, list)):
        if len(doc) not in (2, 3):
            raise ValueError(f"docs[{index}]: a document tuple is (id, text_or_fp) or "
                             "(id, text_or_fp, meta)")
        ident, value = doc[0], doc[1]
        meta = doc[2] if len(doc) == 3 else None
        has_text = isinstance(value, (str, bytes))
    else:
        raise TypeError(f"docs[{index}]: a document is a tuple (id, text_or_fp[, meta]) or a "
                        f"dict, not {type(doc).__name__}")
    raw, integer = new_id(index, ident)
    if meta is not None:
        meta = metadata(index, ident, meta)
    if not has_text:
        return (raw, integer, None, value, meta)
    if not isinstance(value, (str, bytes, bytearray, memoryview)):
        raise TypeError(f"docs[{index}]: text is a str or bytes")
    return (raw, integer, value, None, meta)


def shown(ident):
    """An id as a message shows it: its repr (control characters, invalid
    UTF-8 and lone surrogates escaped), cut to 40 characters or bytes."""
    if isinstance(ident, (str, bytes)) and len(ident) > 40:
        return f"{ident[:40]!r}..."
    return repr(ident)


def new_id(index, ident):
    """The id of a new document, docs[index], as (UTF-8 bytes, whether an
    int): a str (encoded with surrogatepass, so that a lone surrogate makes
    it invalid UTF-8 rather than another id), bytes, or an int in
    0..2**63-1 (the server's range, which JSON readers read back), under
    the library's one id rule (simstore_id_problem). InvalidArgumentError
    naming docs[index], the id and why."""
    why = None
    if isinstance(ident, int) and not isinstance(ident, bool):
        if 0 <= ident <= COUNT_MAX:
            raw, integer = str(ident).encode(), True
        else:
            why = ("an integer id is in 0..2**63-1, as the server takes it (give another "
                   "number as a str)")
    elif isinstance(ident, str):
        raw, integer = ident.encode("utf-8", "surrogatepass"), False
    elif isinstance(ident, bytes):
        raw, integer = bytes(ident), False
    else:
        raise TypeError(f"a document id is a str, bytes or int, not {type(ident).__name__}")
    why = why or _simstore.id_problem(raw)
    if why:
        raise error(_simstore.EINVAL, f"docs[{index}]: document id {shown(ident)}: {why}")
    return raw, integer


def metadata(index, ident, meta):
    """Compact JSON (UTF-8 bytes) of docs[index]'s metadata, as the tool
    stores a record's "meta", and only JSON the tool reads back
    (check_json). A ValueError (NaN, an integer JSON readers refuse, a lone
    surrogate, a cycle) is raised again as InvalidArgumentError naming the
    document, a TypeError (not a JSON type) as TypeError, each from the
    original; any other as it is."""
    try:
        text = json.dumps(meta, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        check_json(meta)
        return text.encode("utf-8")
    except ValueError as e:
        raise error(_simstore.EINVAL,
                    f"docs[{index}] (id {shown(ident)}): metadata: {e}") from e
    except TypeError as e:
        raise TypeError(f"docs[{index}] (id {shown(ident)}): metadata: {e}") from e


def check_json(value):
    """Refuse (ValueError) what json.dumps wrote of value (so: no cycles, JSON
    types only) but the tool's JSON reader would not read back (build and the
    server read it, so export --json -> build): integers outside
    -2**63..2**63-1, two keys of an object that are one string in JSON (1
    and "1"), NUL in a key, more than META_MAX_DEPTH levels. Walked in order,
    without recursion."""
    stack = [iter((value,))]
    while stack:
        for obj in stack[-1]:
            if isinstance(obj, int) and not isinstance(obj, bool):
                if not -2**63 <= obj < 2**63:
                    raise ValueError(f"integer {int.__repr__(obj)} is outside -2**63..2**63-1, "
                                     "the integers JSON readers of simstore take (store it as "
                                     "a str or a float)")
            elif isinstance(obj, (dict, list, tuple)):
                if len(stack) - 1 >= META_MAX_DEPTH:
                    raise ValueError(f"nested deeper than {META_MAX_DEPTH} arrays and objects")
                stack.append(_members(obj))
                break
        else:
            stack.pop()


def _members(obj):
    """The values of a JSON array or object, each key of an object checked
    before its value."""
    if not isinstance(obj, dict):
        yield from obj
        return
    # json.dumps writes a key that is not a str as its JSON text: only an
    # object with such a key can have two keys that are one in JSON.
    seen = set() if any(not isinstance(key, str) for key in obj) else None
    for key, value in obj.items():
        text = _key_text(key)
        if "\0" in text:
            raise ValueError(f"object key {text!r} holds a NUL character")
        if seen is not None:
            if text in seen:
                raise ValueError(f"two keys of one object are the JSON key {text!r}")
            seen.add(text)
        yield value


def _key_text(key):
    """An object key as json.dumps writes it (as _json.c does)."""
    if isinstance(key, str):
        return key
    if isinstance(key, float):
        return float.__repr__(key)
    if key is True or key is False or key is None:
        return json.dumps(key)
    if isinstance(key, int):
        return int.__repr__(key)
    return str(key)
