#!/usr/bin/env python3
# gen_unicode.py: generates lib/text/unicode_data.c, the code point classes and
# case folding the tokenizer uses (format/fingerprint.md, "Characters"), and
# the normalization tables of fingerprint version 2 ("Normalization": the
# decomposition D(c), canonical combining classes, canonical compositions),
# from the Unicode Character Database built into Python. The output is committed;
# rerun only to change the definition, and only with a Python whose
# unicodedata.unidata_version is the one the spec names, because the tables are
# part of the fingerprint format.
#
#   python3 lib/text/gen_unicode.py > lib/text/unicode_data.c
#   python3 lib/text/gen_unicode.py --ranges     # the spec's appendix
import sys
import unicodedata

UNICODE_VERSION = "14.0.0"

SEP, WORD, HAN, KANA, IGNORE = 0, 1, 2, 3, 4
SPACE_FLAG = 0x08
FOLD_FLAG = 0x10
NORM_FLAG = 0x20  # not inert under version 2 normalization

# Hangul syllables decompose and compose by arithmetic (Unicode 3.12), not
# through the tables.
HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3
HANGUL_V = (0x1161, 0x1175)
HANGUL_T = (0x11A8, 0x11C2)

WORD_CATEGORIES = {"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No"}

# Ideographs, segmented into words (friso) or bigrams. Whole ranges, whether
# or not every code point in them is assigned yet.
HAN_RANGES = [
    (0x3005, 0x3005), (0x3007, 0x3007), (0x3021, 0x3029), (0x3038, 0x303B),
    (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x3FFFF),
]
# Hiragana and katakana: always character bigrams.
KANA_RANGES = [
    (0x3041, 0x3096), (0x3099, 0x309F), (0x30A1, 0x30FA), (0x30FC, 0x30FF),
    (0x31F0, 0x31FF), (0xFF66, 0xFF9F), (0x1AFF0, 0x1AFFF), (0x1B000, 0x1B16F),
]
# Format characters and selectors that are dropped as if absent: they neither
# separate words nor appear in tokens (soft hyphen, joiners, BOM, variation
# selectors).
IGNORE_RANGES = [
    (0x00AD, 0x00AD), (0x180B, 0x180F), (0x200C, 0x200D), (0x2060, 0x2060),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xE0100, 0xE01EF),
]
# Unicode White_Space: what makes a line blank for paragraph splitting.
SPACE_RANGES = [
    (0x0009, 0x000D), (0x0020, 0x0020), (0x0085, 0x0085), (0x00A0, 0x00A0),
    (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F),
    (0x205F, 0x205F), (0x3000, 0x3000),
]


# The line breaks of version 2's line joining (CR LF counts as one).
LINE_BREAKS = {0x0A, 0x0D, 0x85, 0x2028, 0x2029}


def in_ranges(cp, ranges):
    return any(lo <= cp <= hi for lo, hi in ranges)


def simple_case_fold(cp):
    """CaseFolding.txt status C or S. Python's casefold() applies C+F; where
    F gives several code points, the S entry (when one exists) is the
    code point's single-code-point lowercase mapping."""
    c = chr(cp)
    f = c.casefold()
    if len(f) == 1:
        return ord(f)
    lo = c.lower()
    if len(lo) == 1:
        return ord(lo)
    return cp


def width_fold(cp):
    if 0xFF10 <= cp <= 0xFF19:
        return cp - 0xFF10 + 0x30
    if 0xFF21 <= cp <= 0xFF3A:
        return cp - 0xFF21 + 0x61
    if 0xFF41 <= cp <= 0xFF5A:
        return cp - 0xFF41 + 0x61
    return cp


def classify(cp):
    if 0xD800 <= cp <= 0xDFFF:
        return SEP  # never decoded; surrogates are invalid UTF-8
    if in_ranges(cp, IGNORE_RANGES):
        cls = IGNORE
    elif in_ranges(cp, HAN_RANGES):
        cls = HAN
    elif in_ranges(cp, KANA_RANGES):
        cls = KANA
    elif unicodedata.category(chr(cp)) in WORD_CATEGORIES:
        cls = WORD
    else:
        cls = SEP
    if in_ranges(cp, SPACE_RANGES):
        assert cls == SEP
        cls |= SPACE_FLAG
    return cls


def fold(cp):
    return width_fold(simple_case_fold(cp))


def decompose(cp):
    """D(c): the fixed point of s -> NFKD(full case folding of s), from c."""
    s = chr(cp)
    while True:
        t = unicodedata.normalize("NFKD", s.casefold())
        if t == s:
            return s
        s = t


def is_scalar(cp):
    return not 0xD800 <= cp <= 0xDFFF


def compositions():
    """Canonical compositions (first, second) -> composite, Hangul aside:
    the two-code-point canonical decompositions that NFC recomposes (so not
    the composition exclusions)."""
    pairs = {}
    for cp in range(0x110000):
        if not is_scalar(cp) or HANGUL_FIRST <= cp <= HANGUL_LAST:
            continue
        d = unicodedata.decomposition(chr(cp))
        if not d or d.startswith("<"):
            continue
        parts = [int(x, 16) for x in d.split()]
        if len(parts) != 2:
            continue
        if unicodedata.normalize("NFC", chr(parts[0]) + chr(parts[1])) == chr(cp):
            pairs[(parts[0], parts[1])] = cp
    return pairs


def normalize(text):
    """Version 2 normalization as format/fingerprint.md defines it (the
    oracle the generated tables are checked against)."""
    kept = "".join(decompose(ord(c)) for c in text
                   if not in_ranges(ord(c), IGNORE_RANGES))
    return unicodedata.normalize("NFC", kept)


def build():
    classes = []
    folds = []
    for cp in range(0x110000):
        cls = classify(cp)
        if cls == WORD:
            f = fold(cp)
            if f != cp:
                assert classify(f) == WORD, hex(cp)
                assert fold(f) == f, hex(cp)
                folds.append((cp, f))
                cls |= FOLD_FLAG
        classes.append(cls)
    pairs = compositions()
    seconds = {b for (_, b) in pairs}
    seconds.update(range(HANGUL_V[0], HANGUL_V[1] + 1))
    seconds.update(range(HANGUL_T[0], HANGUL_T[1] + 1))
    decomps = []
    ccc = []
    for cp in range(0x110000):
        if not is_scalar(cp):
            continue
        c = chr(cp)
        d = decompose(cp)
        combining = unicodedata.combining(c)
        if combining:
            ccc.append((cp, combining))
        if d != c and not HANGUL_FIRST <= cp <= HANGUL_LAST:
            decomps.append((cp, [ord(x) for x in d]))
        normal = unicodedata.normalize("NFC", d)
        starter = (not in_ranges(cp, IGNORE_RANGES) and combining == 0 and cp not in seconds
                   and unicodedata.combining(d[0]) == 0 and ord(d[0]) not in seconds)
        # Inert: normalization leaves the code point alone wherever it is.
        # Token-inert, the flag's meaning: a separator that normalizes to
        # separators alone, all White_Space or none (no line break among
        # them), which changes no token (full-width punctuation, U+3000).
        # Either way a span may start or end before it: its decomposition
        # starts with a starter that composes with nothing before it.
        inert = starter and normal == c
        space = classes[cp] & SPACE_FLAG
        token_inert = starter and (classes[cp] & 7) == SEP and all(
            (classify(ord(x)) & 7) == SEP and (classify(ord(x)) & SPACE_FLAG) == space
            and ord(x) not in LINE_BREAKS for x in normal)
        if not (inert or token_inert):
            classes[cp] |= NORM_FLAG
        # Normalized text needs no folding and holds no ignorable: the
        # tokenizer's folding is the identity on it.
        for x in unicodedata.normalize("NFC", d):
            k = classes[ord(x)] if ord(x) < cp else classify(ord(x))
            assert (k & 7) != IGNORE or in_ranges(cp, IGNORE_RANGES), hex(cp)
            assert (k & 7) != WORD or fold(ord(x)) == ord(x), hex(cp)
    for (a, b), composite in pairs.items():
        assert fold(composite) == composite or classify(composite) & 7 != WORD or \
            fold(a) != a, hex(composite)
    return classes, folds, decomps, ccc, pairs


def ranges_of(classes, kind):
    out = []
    start = None
    for cp, cls in enumerate(classes + [None]):
        hit = cls is not None and (cls & 7) == kind
        if hit and start is None:
            start = cp
        elif not hit and start is not None:
            out.append((start, cp - 1))
            start = None
    return out


def emit_ranges(classes):
    for name, kind in (("word", WORD), ("han", HAN), ("kana", KANA), ("ignore", IGNORE)):
        rs = ranges_of(classes, kind)
        print(f"{name}: {len(rs)} ranges, {sum(h - l + 1 for l, h in rs)} code points")
        line = ""
        for lo, hi in rs:
            item = f"{lo:04X}" if lo == hi else f"{lo:04X}-{hi:04X}"
            if len(line) + len(item) + 1 > 78:
                print(line)
                line = ""
            line = (line + " " + item).strip()
        if line:
            print(line)
        print()


def emit_c(classes, folds, decomps, ccc, pairs):
    blocks = {}
    stage1 = []
    stage2 = []
    for b in range(0x110000 // 256):
        block = tuple(classes[b * 256:(b + 1) * 256])
        if block not in blocks:
            blocks[block] = len(blocks)
            stage2.extend(block)
        stage1.append(blocks[block])
    w = sys.stdout.write
    w("/* unicode_data.c: GENERATED by lib/text/gen_unicode.py from the Unicode\n"
      f" * Character Database {UNICODE_VERSION}; do not edit. Code point classes and case\n"
      " * folding for the tokenizer, as format/fingerprint.md defines them. */\n")
    w('#include "text/unicode.h"\n\n')
    w("/* clang-format off */\n")
    w(f"const uint16_t sims_uc_stage1[{len(stage1)}] = {{\n")
    for i in range(0, len(stage1), 16):
        w("    " + ", ".join(str(x) for x in stage1[i:i + 16]) + ",\n")
    w("};\n\n")
    w(f"const uint8_t sims_uc_stage2[{len(stage2)}] = {{\n")
    for i in range(0, len(stage2), 32):
        w("    " + ",".join(str(x) for x in stage2[i:i + 32]) + ",\n")
    w("};\n\n")
    w(f"const sims_uc_fold_pair sims_uc_folds[{len(folds)}] = {{\n")
    for i in range(0, len(folds), 4):
        w("    " + " ".join(f"{{0x{a:05X}, 0x{b:05X}}}," for a, b in folds[i:i + 4]) + "\n")
    w("};\n\n")
    w(f"const size_t sims_uc_fold_count = {len(folds)};\n\n")
    seq = []
    w("/* Version 2 normalization: D(c) for every code point it changes (Hangul\n"
      " * syllables aside), as offset << 5 | length into sims_uc_decomp_seq. */\n")
    w(f"const sims_uc_decomp sims_uc_decomps[{len(decomps)}] = {{\n")
    items = []
    for cp, d in decomps:
        assert len(d) < 32
        items.append(f"{{0x{cp:05X}, {len(seq) << 5 | len(d)}}},")
        seq.extend(d)
    for i in range(0, len(items), 4):
        w("    " + " ".join(items[i:i + 4]) + "\n")
    w("};\n\n")
    w(f"const size_t sims_uc_decomp_count = {len(decomps)};\n\n")
    w(f"const uint32_t sims_uc_decomp_seq[{len(seq)}] = {{\n")
    for i in range(0, len(seq), 8):
        w("    " + " ".join(f"0x{x:05X}," for x in seq[i:i + 8]) + "\n")
    w("};\n\n")
    w("/* Canonical combining classes other than 0, as code point << 8 | class. */\n")
    w(f"const uint32_t sims_uc_ccc[{len(ccc)}] = {{\n")
    for i in range(0, len(ccc), 6):
        w("    " + " ".join(f"0x{cp << 8 | k:07X}," for cp, k in ccc[i:i + 6]) + "\n")
    w("};\n\n")
    w(f"const size_t sims_uc_ccc_count = {len(ccc)};\n\n")
    w("/* Canonical compositions (Hangul aside): first << 21 | second, composite;\n"
      " * sorted by the pair. */\n")
    ordered = sorted((a << 21 | b, c) for (a, b), c in pairs.items())
    w(f"const sims_uc_composition sims_uc_compositions[{len(ordered)}] = {{\n")
    for i in range(0, len(ordered), 3):
        w("    " + " ".join(f"{{0x{k:011X}ULL, 0x{c:05X}}}," for k, c in ordered[i:i + 3]) + "\n")
    w("};\n\n")
    w(f"const size_t sims_uc_composition_count = {len(ordered)};\n")


def main():
    if unicodedata.unidata_version != UNICODE_VERSION:
        sys.exit(f"gen_unicode.py: this Python has Unicode {unicodedata.unidata_version}, "
                 f"the format needs {UNICODE_VERSION}")
    classes, folds, decomps, ccc, pairs = build()
    if len(sys.argv) > 1 and sys.argv[1] == "--ranges":
        emit_ranges([c & ~NORM_FLAG for c in classes])
    else:
        emit_c(classes, folds, decomps, ccc, pairs)


if __name__ == "__main__":
    main()
