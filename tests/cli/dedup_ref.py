#!/usr/bin/env python3
"""dedup_ref.py: the brute-force reference of `simstore dedup` for
tests/cli/dedup.sh, and the generator of its corpus.

  dedup_ref.py ref K INPUT FPS [STORE_FPS] OUT REMOVED
      INPUT: the JSON Lines file; FPS: `simstore fingerprint --jsonl INPUT`
      (HEX16<TAB>ID per record, in input order); STORE_FPS: the same for the
      documents of the store, or '-' for none. Writes the kept records' lines
      to OUT and ID<TAB>KEPT_ID<TAB>DISTANCE lines to REMOVED.
  dedup_ref.py tie K FPS LIMIT
      Record numbers S A R among the first LIMIT of FPS with d(S, A) > K
      and d(R, S) == d(R, A) <= K: a tie for the KEPT_ID rule.
  dedup_ref.py gen N SEED
      A corpus of about N records on stdout with planted near-duplicates,
      exact duplicates, odd spacing and key order, unknown members, integer
      ids, CRLF line ends and non-ASCII text.
  dedup_ref.py pref K F MINW INPUT PFPS STORE_INPUT STORE_PFPS OUT REMOVED
      `dedup --paragraphs`: PFPS is `simstore fingerprint --paragraphs
      --jsonl INPUT` (HEX16<TAB>ID#N, N counting paragraphs with words), the
      STORE_ pair the same for the store's documents ('-' '-': none). Only
      paragraphs of at least MINW words count (words: whitespace-separated,
      as in the texts pgen makes). Writes the kept lines to OUT and
      ID<TAB>KEPT_ID<TAB>SHARED<TAB>OF<TAB>FRACTION lines to REMOVED.
  dedup_ref.py pgen N SEED
      A corpus of N records whose texts are paragraphs (some short), many
      copied from earlier records whole or with a word changed.

The rule: records in input order; a record is dropped when its fingerprint is
within K of a record kept before it or of a document of the store; KEPT_ID is
the nearest (smallest distance; ties: store documents first, by id bytes,
then kept records in input order)."""
import random
import sys


def records(data):
    """(line bytes as output, blank?) for every line of data."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for i, line in enumerate(lines):
        if i == 0 and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        if line.strip(b" \t\r") == b"":
            continue
        out.append(line + b"\n")
    return out


def read_fps(path):
    fps = []
    with open(path, "rb") as f:
        for line in f:
            hexfp, ident = line.rstrip(b"\n").split(b"\t", 1)
            fps.append((int(hexfp, 16), ident))
    return fps


def ref(k, input_path, fps_path, store_path, out_path, removed_path):
    with open(input_path, "rb") as f:
        lines = records(f.read())
    fps = read_fps(fps_path)
    assert len(lines) == len(fps), (len(lines), len(fps))
    store = read_fps(store_path) if store_path != "-" else []
    kept = []
    out, removed = [], []
    for line, (fp, ident) in zip(lines, fps):
        best = None
        for sfp, sid in store:
            d = bin(sfp ^ fp).count("1")
            if d <= k:
                key = (d, 0, sid)
                if best is None or key < best:
                    best = key
        for ordinal, (kfp, kid) in enumerate(kept):
            d = bin(kfp ^ fp).count("1")
            if d <= k:
                key = (d, 1, ordinal)
                if best is None or key < best:
                    best = key
        if best is None:
            kept.append((fp, ident))
            out.append(line)
        else:
            kept_id = best[2] if best[1] == 0 else kept[best[2]][1]
            removed.append(ident + b"\t" + kept_id + b"\t" + str(best[0]).encode() + b"\n")
    with open(out_path, "wb") as f:
        f.write(b"".join(out))
    with open(removed_path, "wb") as f:
        f.write(b"".join(removed))


WORDS = ("river valley council flood plan survey meeting argument district vote "
         "lighthouse keeper storm harbour ferry island market bread cheese apple "
         "engine signal packet router kernel thread memory buffer cache index "
         "Müller straße café naïve 山村 茶园 数据 压缩").split()


def gen(n, seed):
    rnd = random.Random(seed)
    docs = []
    out = []
    i = 0
    while len(out) < n:
        roll = rnd.random()
        if docs and roll < 0.25:
            # A near-duplicate of an earlier document: one to three words
            # changed, or one appended.
            words = list(rnd.choice(docs))
            for _ in range(rnd.randint(1, 3)):
                if rnd.random() < 0.5:
                    words[rnd.randrange(len(words))] = rnd.choice(WORDS)
                else:
                    words.append(rnd.choice(WORDS))
        elif docs and roll < 0.35:
            words = list(rnd.choice(docs))  # an exact duplicate text
        else:
            words = [rnd.choice(WORDS) for _ in range(rnd.randint(8, 60))]
        docs.append(words)
        text = " ".join(words).replace('"', "")
        ident = '"d%d"' % i if i % 6 else str(i)
        style = i % 5
        if style == 0:
            line = '{"id": %s, "text": "%s"}' % (ident, text)
        elif style == 1:
            line = '{ "text" :"%s" ,   "id":%s, "url": "http://e.org/%d", "n": [1, 2.50, {"x": null}] }' % (text, ident, i)
        elif style == 2:
            line = '{"meta": {"b": 1, "a": "z"}, "id": %s, "text": "%s", "zz": true}' % (ident, text)
        elif style == 3:
            line = '{"id":%s,"text":"%s"}\r' % (ident, text.replace("river", "r\\u00efver"))
        else:
            line = '\t{"text": "%s", "id": %s}  ' % (text, ident)
        out.append(line)
        i += 1
        if i % 97 == 0:
            out.append("   ")  # a blank line: not a record
    sys.stdout.buffer.write(("\n".join(out) + "\n").encode("utf-8"))


def paragraph_lists(input_path, pfps_path, minw):
    """(line, id bytes, [fingerprints of the paragraphs of >= minw words])
    per record of input_path, in input order."""
    import json
    with open(input_path, "rb") as f:
        lines = records(f.read())
    by_id = {}
    with open(pfps_path, "rb") as f:
        for line in f:
            hexfp, label = line.rstrip(b"\n").split(b"\t", 1)
            ident, n = label.rsplit(b"#", 1)
            by_id.setdefault(ident, {})[int(n)] = int(hexfp, 16)
    out = []
    for line in lines:
        rec = json.loads(line)
        ident = str(rec["id"]).encode()
        paras = [p for p in rec["text"].split("\n\n") if p.split()]
        fps = by_id.get(ident, {})
        assert len(fps) == len(paras), (ident, len(fps), len(paras))
        out.append((line, ident, [fps[i + 1] for i, p in enumerate(paras)
                                  if len(p.split()) >= minw]))
    return out


def shared_count(k, paras, other):
    return sum(1 for p in paras if any((p ^ q).bit_count() <= k for q in other))


def pref(k, fraction, minw, input_path, pfps_path, store_input, store_pfps, out_path,
         removed_path):
    recs = paragraph_lists(input_path, pfps_path, minw)
    store = paragraph_lists(store_input, store_pfps, minw) if store_input != "-" else []
    kept = []
    out, removed = [], []
    for line, ident, paras in recs:
        best = None  # (-shared, 0 for the store | 1, id bytes | ordinal)
        if paras:
            for _, sid, sp in store:
                n = shared_count(k, paras, sp)
                if n and n / len(paras) >= fraction:
                    best = min(best or (1, 0, b""), (-n, 0, sid))
            for ordinal, (_, kp) in enumerate(kept):
                n = shared_count(k, paras, kp)
                if n and n / len(paras) >= fraction:
                    best = min(best or (1, 0, b""), (-n, 1, ordinal))
        if best is None:
            kept.append((ident, paras))
            out.append(line)
        else:
            kept_id = best[2] if best[1] == 0 else kept[best[2]][0]
            n = -best[0]
            removed.append(b"%s\t%s\t%d\t%d\t%s\n" % (ident, kept_id, n, len(paras),
                                                        ("%.4f" % (n / len(paras))).encode()))
    with open(out_path, "wb") as f:
        f.write(b"".join(out))
    with open(removed_path, "wb") as f:
        f.write(b"".join(removed))


def pgen(n, seed):
    """Records of 1..8 paragraphs: new ones, and ones copied from earlier
    records (whole, or with a word changed); a fifth of the new ones are
    short (2..7 words)."""
    rnd = random.Random(seed)
    pool = []
    for i in range(n):
        paras = []
        for _ in range(rnd.randint(1, 8)):
            roll = rnd.random()
            if pool and roll < 0.45:
                words = list(rnd.choice(pool))
                if rnd.random() < 0.4:
                    words[rnd.randrange(len(words))] = "w%d" % rnd.randrange(1000)
            else:
                short = rnd.random() < 0.2
                words = ["w%d" % rnd.randrange(1000)
                         for _ in range(rnd.randint(2, 7) if short else rnd.randint(8, 40))]
            pool.append(words)
            paras.append(" ".join(words))
        ident = '"p%d"' % i if i % 4 else str(1000 + i)
        sys.stdout.write('{"id": %s, "text": "%s"}\n' % (ident, "\\n\\n".join(paras)))


def tie(k, fps_path, limit):
    """Record numbers (0-based) s, a, r with d(s, a) > k and
    d(r, s) == d(r, a) <= k: r ties between two records that are not
    near-duplicates of each other."""
    fps = [fp for fp, _ in read_fps(fps_path)][:limit]
    for r, fr in enumerate(fps):
        near = {}
        for i, fi in enumerate(fps):
            d = bin(fi ^ fr).count("1")
            if i != r and d <= k:
                for j in near.get(d, []):
                    if bin(fps[j] ^ fi).count("1") > k:
                        print(j, i, r)
                        return
                near.setdefault(d, []).append(i)
    sys.exit("no tie found")


if __name__ == "__main__":
    if sys.argv[1] == "ref":
        ref(int(sys.argv[2]), *sys.argv[3:8])
    elif sys.argv[1] == "pref":
        pref(int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), *sys.argv[5:11])
    elif sys.argv[1] == "pgen":
        pgen(int(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1] == "tie":
        tie(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
    else:
        gen(int(sys.argv[2]), int(sys.argv[3]))
