#!/usr/bin/env python3
# reference.py: a second, deliberately plain implementation of
# format/fingerprint.md, versions 1, 2 and 3 (character-bigram CJK mode), and of
# format/sketch.md, written from the specs
# rather than from lib/text, so that the specs are checked for being complete:
# `test_text_reference` runs it beside `simstore fingerprint --cjk bigram` and
# requires identical output. XXH3-64 comes from the system's libxxhash through
# ctypes; everything else is here.
#
#   reference.py [--fp-version 1|2|3] [--shingle W] [--cjk-shingle C]
#                [--weights tf|length|log] [--lambda X]
#                [--boilerplate-fraction F --boilerplate-min-docs M]
#                [--sketch none|minhash16|minhash32|minhash64|minhash128|minhash256]
#                [--paragraphs] [--jsonl] FILE...
# With the boilerplate options, the documents of all FILEs are the corpus of
# section 15's first pass, and each is fingerprinted without the set.
#   reference.py --tokens TEXT       (print the tokens, one per line)
import argparse
import ctypes
import ctypes.util
import json
import sys
import unicodedata

UNICODE_VERSION = "14.0.0"

# --- XXH3-64 -----------------------------------------------------------------
_lib = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
_xxh3 = _lib.XXH3_64bits_withSeed
_xxh3.restype = ctypes.c_uint64
_xxh3.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]


def xxh3(data: bytes, seed=0) -> int:
    return _xxh3(data, len(data), seed)


# --- Decoding (spec: "Decoding") --------------------------------------------
REPLACEMENT = None  # marks an ill-formed subsequence


def decode(b: bytes):
    """Yield code points (int) or REPLACEMENT, one per maximal subpart."""
    i, n = 0, len(b)
    while i < n:
        b0 = b[i]
        if b0 < 0x80:
            yield b0
            i += 1
            continue
        if 0xC2 <= b0 <= 0xDF:
            need, lo, hi = 1, 0x80, 0xBF
        elif 0xE0 <= b0 <= 0xEF:
            need = 2
            lo = 0xA0 if b0 == 0xE0 else 0x80
            hi = 0x9F if b0 == 0xED else 0xBF
        elif 0xF0 <= b0 <= 0xF4:
            need = 3
            lo = 0x90 if b0 == 0xF0 else 0x80
            hi = 0x8F if b0 == 0xF4 else 0xBF
        else:
            yield REPLACEMENT
            i += 1
            continue
        if i + 1 >= n or not (lo <= b[i + 1] <= hi):
            yield REPLACEMENT
            i += 1
            continue
        k = 2
        while k <= need and i + k < n and 0x80 <= b[i + k] <= 0xBF:
            k += 1
        if k <= need:
            yield REPLACEMENT
            i += k
            continue
        yield ord(b[i:i + need + 1].decode("utf-8"))
        i += need + 1


# --- Classes (spec: "Characters") -------------------------------------------
HAN = [(0x3005, 0x3005), (0x3007, 0x3007), (0x3021, 0x3029), (0x3038, 0x303B),
       (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x3FFFF)]
KANA = [(0x3041, 0x3096), (0x3099, 0x309F), (0x30A1, 0x30FA), (0x30FC, 0x30FF),
        (0x31F0, 0x31FF), (0xFF66, 0xFF9F), (0x1AFF0, 0x1AFFF), (0x1B000, 0x1B16F)]
IGNORE = [(0x00AD, 0x00AD), (0x180B, 0x180F), (0x200C, 0x200D), (0x2060, 0x2060),
          (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xE0100, 0xE01EF)]
SPACE = {0x9, 0xA, 0xB, 0xC, 0xD, 0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F,
         0x205F, 0x3000} | set(range(0x2000, 0x200B))
WORD_CATEGORIES = {"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No"}


def within(cp, ranges):
    return any(lo <= cp <= hi for lo, hi in ranges)


def kind(cp):
    if cp is REPLACEMENT:
        return "sep"
    if within(cp, IGNORE):
        return "ignore"
    if within(cp, HAN):
        return "han"
    if within(cp, KANA):
        return "kana"
    if unicodedata.category(chr(cp)) in WORD_CATEGORIES:
        return "word"
    return "sep"


def fold(cp):
    c = chr(cp)
    f = c.casefold()  # C + F mappings
    if len(f) != 1:
        lower = c.lower()  # where F has several code points, S is the lowercase
        f = lower if len(lower) == 1 else c
    cp = ord(f)
    if 0xFF10 <= cp <= 0xFF19:
        return cp - 0xFF10 + 0x30
    if 0xFF21 <= cp <= 0xFF3A or 0xFF41 <= cp <= 0xFF5A:
        return (cp - 0xFF21 if cp <= 0xFF3A else cp - 0xFF41) + 0x61
    return cp


# --- Tokens (spec: "Tokens") --------------------------------------------------
RUN_MAX = 1 << 24


def bigrams(run):
    if len(run) == 1:
        return ["".join(run)]
    return [run[i] + run[i + 1] for i in range(len(run) - 1)]


# --- Version 2: normalization and line joining --------------------------------
def decompose(c):
    """D(c): NFKD and full case folding, repeated to a fixed point."""
    s = c
    while True:
        t = unicodedata.normalize("NFKD", s.casefold())
        if t == s:
            return s
        s = t


def normalize(cps):
    """Code points (or REPLACEMENT) to version 2's normalized sequence:
    ignorables dropped, NFC of the concatenated D(c), per stretch between
    replacements (which stay)."""
    out, stretch = [], []

    def flush():
        if stretch:
            text = "".join(decompose(chr(c)) for c in stretch if not within(c, IGNORE))
            out.extend(ord(x) for x in unicodedata.normalize("NFC", text))
            stretch.clear()

    for cp in cps:
        if cp is REPLACEMENT:
            flush()
            out.append(REPLACEMENT)
        else:
            stretch.append(cp)
    flush()
    return out


LINE_BREAKS = {0x0A, 0x0D, 0x85, 0x2028, 0x2029}


def join_lines(cps, most=1, least=1):
    """Drop White_Space holding exactly one line break (CR LF is one) between
    two Han or kana code points (version 2); with least=0, White_Space holding
    none or one (version 3)."""
    out, i, n = [], 0, len(cps)
    while i < n:
        cp = cps[i]
        if cp is not REPLACEMENT and cp in SPACE and out and \
                kind(out[-1]) in ("han", "kana"):
            j, breaks = i, 0
            while j < n and cps[j] is not REPLACEMENT and cps[j] in SPACE:
                if cps[j] in LINE_BREAKS and not (cps[j] == 0x0D and j + 1 < n and cps[j + 1] == 0x0A):
                    breaks += 1
                j += 1
            if least <= breaks <= most and j < n and kind(cps[j]) in ("han", "kana"):
                i = j
                continue
        out.append(cp)
        i += 1
    return out


def tokenize(data: bytes, version=1):
    """Tokens as (text, cjk) pairs."""
    tokens, word, run, run_kind = [], [], [], None

    def end_word():
        if word:
            tokens.append(("".join(word), False))
            word.clear()

    def end_run():
        nonlocal run_kind
        if run:
            tokens.extend((b, True) for b in bigrams(run))
            run.clear()
        run_kind = None

    cps = list(decode(data))
    if version >= 2:
        cps = join_lines(normalize(cps), least=0 if version >= 3 else 1)
    for cp in cps:
        k = kind(cp)
        if k == "word":
            end_run()
            word.append(chr(fold(cp)))
        elif k in ("han", "kana"):
            end_word()
            if run_kind != k:
                end_run()
            run.append(chr(cp))
            run_kind = k
            if len(run) == RUN_MAX:
                end_run()
        elif k == "ignore":
            pass
        else:
            end_word()
            end_run()
    end_word()
    end_run()
    return tokens


# --- Features, weights, bits (spec: "Features" .. "Bits") --------------------
def log_weight(tf):
    k = tf.bit_length() - 1
    m = (k << 16) + (((tf - (1 << k)) << 16) >> k)
    return 65536 + (m * 45426 >> 16)


def fingerprint(data: bytes, w=3, weights="tf", lam=1.0, version=1, c=2, hashes=None):
    """The fingerprint and whether the document is empty; the feature hashes
    are appended to `hashes` when it is a list."""
    pairs = tokenize(data, version)
    if not pairs:
        return 0, True
    tokens = [t for t, _ in pairs]
    if version == 1:
        c = w
    # Each token starts a shingle of its kind's width; every whole shingle,
    # and the first shingle to reach the last token when it is cut there.
    shingles, n, reached = [], len(tokens), False
    for i, (_, cjk) in enumerate(pairs):
        end = i + (c if cjk else w)
        if end > n:
            if reached:
                continue
            end = n
        if end == n:
            reached = True
        shingles.append(tokens[i:end])
    tf = {}
    length = {}
    for sh in shingles:
        h = xxh3(" ".join(sh).encode("utf-8"))
        tf[h] = tf.get(h, 0) + 1
        length.setdefault(h, max(len(t) for t in sh))
        if hashes is not None:
            hashes.append(h)
    lam_q16 = int(lam * 65536 + 0.5)  # lam >= 0: round half away from zero
    sums = [0] * 64
    for h, n in tf.items():
        if weights == "tf":
            score = n * 65536
        elif weights == "log":
            score = log_weight(n)
        else:
            score = n * 65536 + (lam_q16 if length[h] >= 4 else 0)
        for i in range(64):
            sums[i] += score if (h >> i) & 1 else -score
    fp = 0
    for i in range(64):
        if sums[i] > 0:
            fp |= 1 << i
    return fp, False


# --- format/sketch.md -----------------------------------------------------------
M64 = (1 << 64) - 1
SKETCH_BIN_BITS = {"minhash16": 7, "minhash32": 8, "minhash64": 9, "minhash128": 10,
                   "minhash256": 11}


def mix(x):
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def sketch(hashes, p):
    m = 1 << p
    smallest = {}  # nonempty bin -> its smallest g
    for h in set(hashes):
        g = mix((h + 0x9E3779B97F4A7C15) & M64)
        j = g >> (64 - p)
        if j not in smallest or g < smallest[j]:
            smallest[j] = g
    if not smallest:
        return bytes(m // 8)
    sources = sorted(smallest)
    bit = {j: smallest[j] & 1 for j in sources}
    left = m - len(sources)
    q = 64 // p
    t = 1
    while left and t <= 4 * m:
        block, r = divmod(t - 1, q)
        for i in sources:
            if not left:
                break
            x = mix(((block << 32 | i) + 0xD1B54A32D192ED03) & M64)
            j = (x >> (p * r)) % m
            if j not in bit:
                bit[j] = smallest[i] & 1
                left -= 1
        t += 1
    for j in range(m):
        if j not in bit:
            k = (j + 1) % m
            while k not in smallest:
                k = (k + 1) % m
            bit[j] = smallest[k] & 1
    out = bytearray(m // 8)
    for j in range(m):
        out[j >> 3] |= bit[j] << (j & 7)
    return bytes(out)


def is_blank(line: bytes):
    return all(cp is not REPLACEMENT and cp in SPACE for cp in decode(line))


def paragraphs(data: bytes, version=1):
    """(number, text) for each paragraph that has tokens."""
    out, current, number = [], [], 0
    lines = data.split(b"\n")
    for line in lines + [b""]:
        if is_blank(line):
            if current:
                text = b"\n".join(current)
                if tokenize(text, version):
                    number += 1
                    out.append((number, text))
                current = []
        else:
            current.append(line)
    return out


# --- Boilerplate (spec: "Boilerplate") ---------------------------------------
LINE_SEED = 0x53494D534C494E45  # "SIMSLINE"


def line_key(line: bytes, version):
    tokens = tokenize(line, version)
    if not tokens:
        return None
    return xxh3(" ".join(t for t, _ in tokens).encode("utf-8"), LINE_SEED)


def boilerplate_set(texts, version, fraction, min_docs):
    p = int(fraction * 10**6 + 0.5)
    df = {}
    for text in texts:
        for k in {line_key(line, version) for line in text.split(b"\n")} - {None}:
            df[k] = df.get(k, 0) + 1
    n = len(texts)
    if n < min_docs:
        return set()
    return {k for k, d in df.items() if d >= 2 and d * 10**6 > p * n}


def remove_boilerplate(text: bytes, bset, version):
    """The text without its boilerplate lines (each with its LF), and
    whether any was removed."""
    lines = text.split(b"\n")
    kept, removed = [], False
    for i, line in enumerate(lines):
        k = line_key(line, version)
        if k is not None and k in bset:
            removed = True
            continue
        kept.append(line if i == len(lines) - 1 else line + b"\n")
    return b"".join(kept), removed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fp-version", dest="version", type=int, choices=[1, 2, 3], default=3)
    ap.add_argument("--shingle", type=int, default=3)
    ap.add_argument("--cjk-shingle", dest="cjk_shingle", type=int, default=2)
    ap.add_argument("--weights", choices=["tf", "length", "log"], default="tf")
    ap.add_argument("--lambda", dest="lam", type=float, default=1.0)
    ap.add_argument("--sketch", choices=["none"] + sorted(SKETCH_BIN_BITS), default="none")
    ap.add_argument("--paragraphs", action="store_true")
    ap.add_argument("--jsonl", action="store_true")
    ap.add_argument("--boilerplate-fraction", dest="fraction", type=float)
    ap.add_argument("--boilerplate-min-docs", dest="min_docs", type=int, default=100)
    ap.add_argument("--tokens")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    if unicodedata.unidata_version != UNICODE_VERSION:
        sys.exit(f"reference.py: needs Unicode {UNICODE_VERSION}, this Python has "
                 f"{unicodedata.unidata_version}")
    if a.tokens is not None:
        for t, _ in tokenize(a.tokens.encode("utf-8", "surrogateescape"), a.version):
            print(t)
        return
    out = sys.stdout.buffer
    docs = []
    for path in a.files:
        with open(path, "rb") as f:
            raw = f.read()
        if a.jsonl:
            for line in raw.split(b"\n"):
                if line.strip():
                    rec = json.loads(line)
                    docs.append((str(rec["id"]).encode("utf-8"), rec["text"].encode("utf-8")))
        else:
            docs.append((path.encode(), raw))
    bset = set()
    if a.fraction is not None:
        bset = boilerplate_set([t for _, t in docs], a.version, a.fraction, a.min_docs)
    for ident, whole in docs:
        text, removed = remove_boilerplate(whole, bset, a.version) if bset else (whole, False)
        if a.paragraphs:
            for number, para in paragraphs(text, a.version):
                fp, _ = fingerprint(para, a.shingle, a.weights, a.lam, a.version,
                                    a.cjk_shingle)
                out.write(b"%016x\t%s#%d\n" % (fp, ident, number))
        elif a.sketch != "none":
            hashes = []
            fp, empty = fingerprint(text, a.shingle, a.weights, a.lam, a.version,
                                    a.cjk_shingle, hashes)
            if removed and empty:  # only boilerplate: the whole text
                hashes = []
                fp, _ = fingerprint(whole, a.shingle, a.weights, a.lam, a.version,
                                    a.cjk_shingle, hashes)
            sk = sketch(hashes, SKETCH_BIN_BITS[a.sketch])
            out.write(b"%016x\t%s\t%s\n" % (fp, ident, sk.hex().encode()))
        else:
            fp, empty = fingerprint(text, a.shingle, a.weights, a.lam, a.version,
                                    a.cjk_shingle)
            if removed and empty:  # only boilerplate: the whole text
                fp, _ = fingerprint(whole, a.shingle, a.weights, a.lam, a.version,
                                    a.cjk_shingle)
            out.write(b"%016x\t%s\n" % (fp, ident))


if __name__ == "__main__":
    main()
