#!/usr/bin/env python3
# corpora.py: builds the quality benchmark's corpora from installed Debian packages (licenses, Chinese, templated web pages, short half-template pages, short templated families, Chinese spaced as HTML renders it) and adds generated edits of known strength; see bench/quality/README.md.
#
#   corpora.py OUTDIR [--only NAME,...] [--max-sources N] [--seed S]
#
# writes, per corpus NAME, OUTDIR/NAME.jsonl ({"id", "text"} per document) and
# OUTDIR/NAME.docs.tsv (id, source id or '-', edit kind, edit parameters,
# where the source came from), and OUTDIR/manifest.json (package versions,
# counts, seed). Same packages and seed, same bytes: files are read in sorted
# order and every random choice comes from one seeded generator per corpus.
import argparse
import glob
import gzip
import hashlib
import html.parser
import json
import os
import random
import re
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import edits as E  # noqa: E402
import templated as T  # noqa: E402

PACKAGES = {
    "licenses": ["base-files"],  # /usr/share/common-licenses; plus every installed copyright file
    "chinese": ["manpages-zh", "debian-reference-zh-cn"],
    "web": ["python3.11-doc", "postgresql-doc-15"],
    "short": ["python3.11-doc"],
    "templated": ["wamerican"],  # /usr/share/dict/american-english
    "spaced_chinese": ["manpages-zh", "debian-reference-zh-cn"],
}
MAX_CHARS = 40000      # a longer source is cut at a paragraph boundary
MIN_TOKENS = 30        # shorter sources are left out
MAX_IDENTICAL = 3      # byte-identical sources kept per text (natural duplicates)
COPIES_PER_SOURCE = {"licenses": 3}  # edited copies of each source, of distinct kinds (default 2)
MAX_TEMPLATE_TOKENS = 300  # short pages: pages whose template is larger are left out
KINDS = list(E.EDITS)


def clean(text):
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n")


def cut(text, limit=MAX_CHARS):
    if len(text) <= limit:
        return text
    at = text.rfind("\n\n", 0, limit)
    return text[:at if at > limit // 2 else limit]


# --- roff (manual pages) ------------------------------------------------------------
_GLYPHS = {"em": "—", "en": "–", "bu": "•", "lq": "“", "rq": "”", "oq": "‘", "cq": "’",
           "aq": "'", "dq": '"', "co": "©", "rg": "®", "tm": "™", "hy": "-", "mi": "-",
           "ga": "`", "aa": "´", "ti": "~", "ha": "^", "pl": "+", "mu": "×", ">=": "≥",
           "<=": "≤", "!=": "≠", "->": "→", "<-": "←", "de": "°", "sl": "/", "rs": "\\",
           "fm": "′", "Fo": "«", "Fc": "»", "ua": "↑", "da": "↓"}
_ESCAPE = re.compile(r"""\\(?:
    \(([^\n]{2})          # \(xx glyph
  | \[([^\]\n]*)\]        # \[name] glyph
  | \*(?:\(..|\[[^\]]*\]|.)  # \*x string
  | f(?:\(..|\[[^\]]*\]|.)   # \fX font
  | s[-+]?(?:\(\d\d|\[\d+\]|\d)  # \sN size
  | n[-+]?(?:\(..|\[[^\]]*\]|.)  # \nX register
  | [hvwlLoXbDNRSxZ]'[^']*'     # \h'..' and friends
  | k.                    # \kx
  | (.)                   # any other one-character escape
)""", re.X)


def _escape(m):
    if m.group(1) is not None:
        return _GLYPHS.get(m.group(1), "")
    if m.group(2) is not None:
        return _GLYPHS.get(m.group(2), "")
    c = m.group(3)
    if c is None:
        return ""
    return {"-": "-", "e": "\\", "\\": "\\", " ": " ", "~": " ", "0": " ", "t": "\t",
            "'": "´", "`": "`", ".": ".", '"': ""}.get(c, "")


def roff_text(s):
    s = re.sub(r'\\".*', "", s)
    return _ESCAPE.sub(_escape, s)


def macro_args(s):
    return [a.replace('""', '"') for a in re.findall(r'"((?:[^"]|"")*)"?|(\S+)', s) for a in a if a]


def strip_roff(src):
    """The text of a manual page: macro lines dropped except those carrying
    text, escapes resolved, a blank line at each paragraph macro. None for a
    page that only sources another (.so)."""
    out, block, table = [], False, 0
    for line in src.split("\n"):
        if block:
            block = not line.startswith("..")
            continue
        if line.startswith((".\\\"", "'\\\"", "\\\"")):
            continue
        if table == 1:  # table format lines end with a full stop
            if line.rstrip().endswith("."):
                table = 2
            continue
        if line.startswith((".", "'")):
            m = re.match(r"[.']\s*(\S+)\s*(.*)", line)
            if not m:
                continue
            req, args = m.group(1), m.group(2)
            if req in ("de", "de1", "ig", "am"):
                block = True
            elif req == "so":
                return None
            elif req == "TS":
                table = 1
            elif req == "TE":
                table = 0
            elif req in ("SH", "SS"):
                out += ["", roff_text(" ".join(macro_args(args))), ""]
            elif req in ("B", "I", "SM", "SB"):
                out.append(roff_text(" ".join(macro_args(args))))
            elif req in ("BR", "BI", "IB", "IR", "RB", "RI"):
                out.append(roff_text("".join(macro_args(args))))
            elif req in ("PP", "LP", "P", "sp", "TP", "HP", "IP", "TQ"):
                out.append("")
                if req == "IP" and macro_args(args):
                    out.append(roff_text(macro_args(args)[0]))
            continue
        if table == 2:
            line = line.replace("T{", "").replace("T}", "").replace("\t", " ")
        out.append(roff_text(line))
    return clean("\n".join(out))


# --- HTML ----------------------------------------------------------------------------
_VOID = {"br", "hr", "img", "meta", "link", "input", "col", "area", "base", "wbr", "source"}
_HARD = {"p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "table", "ul", "ol", "dl",
         "section", "blockquote", "hr", "form", "nav", "header", "footer", "aside"}
_SOFT = {"li", "dt", "dd", "tr", "br", "th", "caption"}


class Blocks(html.parser.HTMLParser):
    """Text blocks of a page in document order: (region, heading level or 0,
    hard break before it, text). The region is 'content', 'template' (the
    site's navigation, sidebar and footer) or 'toc' (a DocBook chapter's table
    of contents), by the classes of the enclosing elements."""

    def __init__(self, site):
        super().__init__(convert_charrefs=True)
        self.site, self.stack, self.blocks = site, [], []
        self.text, self.region, self.level, self.hard, self.skip = [], None, 0, True, 0

    def where(self):
        classes = {c for _, cls, _ in self.stack for c in cls}
        roles = {r for _, _, r in self.stack}
        if self.site == "sphinx":
            return "content" if ("body" in classes or "main" in roles) else "template"
        if classes & {"navheader", "navfooter"}:
            return "template"
        return "toc" if "toc" in classes else "content"

    def flush(self, hard):
        pre = any(t == "pre" for t, _, _ in self.stack)
        text = "".join(self.text)
        text = text.strip("\n") if pre else " ".join(text.split())
        if text.strip():
            self.blocks.append((self.region, self.level, self.hard, text))
            self.hard = hard
        else:
            self.hard = self.hard or hard
        self.text, self.region, self.level = [], None, 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("script", "style", "head"):
            self.skip += 1
        if tag in _HARD or tag in _SOFT:
            self.flush(tag in _HARD)
        if tag == "img" and a.get("alt") and not self.skip:
            self.handle_data(" " + a["alt"] + " ")
        if tag in ("td", "th"):
            self.handle_data(" ")
        if tag not in _VOID:
            self.stack.append((tag, (a.get("class") or "").split(), a.get("role")))
        if tag in ("h1", "h2", "h3", "h4"):
            self.level = int(tag[1])

    def handle_endtag(self, tag):
        if tag in _VOID:
            return
        if tag in ("script", "style", "head"):
            self.skip = max(0, self.skip - 1)
        if tag in _HARD or tag in _SOFT:
            self.flush(tag in _HARD)
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break
        if tag in ("td", "th"):
            self.handle_data(" ")

    def handle_data(self, data):
        if self.skip:
            return
        if self.region is None:
            if not data.strip():
                if self.text:
                    self.text.append(data)
                return
            self.region = self.where()
            self.level = self.level or max((int(t[1]) for t, _, _ in self.stack
                                            if t in ("h1", "h2", "h3", "h4")), default=0)
        self.text.append(data)


def html_blocks(path, site):
    p = Blocks(site)
    with open(path, encoding="utf-8", errors="replace") as f:
        p.feed(f.read())
    p.close()
    p.flush(True)
    return p.blocks


def join_blocks(blocks):
    out = []
    for _, _, hard, text in blocks:
        if out:
            out.append("\n\n" if hard else "\n")
        out.append(text)
    return clean("".join(out))


def page_parts(blocks):
    """Header (template before the content), content blocks, footer (template
    after it)."""
    first = next((i for i, b in enumerate(blocks) if b[0] == "content"), len(blocks))
    header = [b for b in blocks[:first] if b[0] == "template"]
    content = [b for b in blocks[first:] if b[0] == "content"]
    footer = [b for b in blocks[first:] if b[0] == "template"]
    return join_blocks(header), content, join_blocks(footer)


def sections(content, levels=(1, 2, 3, 4)):
    """Content blocks cut before each heading of the given levels."""
    out = []
    for b in content:
        if b[1] in levels or not out:
            out.append([])
        out[-1].append(b)
    return out


# --- Sources -------------------------------------------------------------------------
def read_text(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return f.read().decode("utf-8", errors="replace")


def sources_licenses():
    paths = sorted(p for p in glob.glob("/usr/share/common-licenses/*") if os.path.isfile(p))
    paths += sorted(glob.glob("/usr/share/doc/*/copyright"))
    seen = set()
    for path in paths:
        real = os.path.realpath(path)
        if real in seen or not os.path.isfile(real):
            continue
        seen.add(real)
        yield path, E.Doc("", cut(clean(read_text(path))), "")


def sources_chinese():
    for lang in ("zh_CN", "zh_TW"):
        for path in sorted(glob.glob(f"/usr/share/man/{lang}/man*/*")):
            if not os.path.isfile(path):
                continue
            text = strip_roff(read_text(path))
            if text and text.count("\ufffd") < 5:
                yield path, E.Doc("", cut(text), "")
    for path in sorted(glob.glob("/usr/share/debian-reference/*.zh-cn.html")):
        header, content, footer = page_parts(html_blocks(path, "docbook"))
        for n, sec in enumerate(sections(content, levels=(2, 3)), 1):
            yield f"{path}#{n}", E.Doc(header, cut(join_blocks(sec)), footer)


def python_doc_pages():
    root = "/usr/share/doc/python3.11/html"
    for path in sorted(glob.glob(f"{root}/**/*.html", recursive=True)):
        rel = os.path.relpath(path, root)
        if rel.startswith(("_", "genindex", "py-modindex", "search")):
            continue
        yield path, page_parts(html_blocks(path, "sphinx"))


def sources_web():
    for path, (header, content, footer) in python_doc_pages():
        yield path, E.Doc(header, cut(join_blocks(content)), footer)
    for path in sorted(glob.glob("/usr/share/doc/postgresql-doc-15/html/*.html")):
        header, content, footer = page_parts(html_blocks(path, "docbook"))
        yield path, E.Doc(header, cut(join_blocks(content)), footer)


def sources_short(rng):
    """Short pages, about half template: a piece of one section of a Python
    manual page (its first blocks, up to 0.6..1.4 times the page template's
    size) inside that page's navigation, sidebar and footer."""
    for path, (header, content, footer) in python_doc_pages():
        template = E.token_count(header + "\n" + footer)
        if template > MAX_TEMPLATE_TOKENS:
            continue
        for n, sec in enumerate(sections(content), 1):
            target = template * rng.uniform(0.6, 1.4)
            taken, size = [], 0
            for b in sec:
                if size >= target:
                    break
                taken.append(b)
                size += E.token_count(b[3])
            if size >= 0.4 * template:
                yield f"{path}#{n}", E.Doc(header, join_blocks(taken), footer)


# --- Corpora ---------------------------------------------------------------------------
CORPORA = {
    # name: (id prefix, script, source function, whether it takes the rng)
    "licenses": ("lic", "latin", sources_licenses),
    "chinese": ("zh", "han", sources_chinese),
    "web": ("web", "latin", sources_web),
    "short": ("short", "latin", sources_short),
    "spaced_chinese": ("szh", "han", sources_chinese),
    "templated": ("tpl", "latin", None),
}
# spaced_chinese: the chinese corpus's sources, each with a copy of itself
# with spaces between adjacent Han characters (all of them, or those of
# about half its paragraphs) and one edited copy (as chinese's) spaced the
# same way half the time: HTML renderings that space characters out.
SPACED_PARAGRAPHS = 0.5


def build_templated(outdir, families, seed, name="templated", words=None):
    """The templated corpus (templated.py): `families` families, a source and
    its 2 to 4 edited members each."""
    rng = random.Random(f"{seed}:templated")
    rows, n = [], 0
    with open(os.path.join(outdir, f"{name}.jsonl"), "w", encoding="utf-8") as out:
        for n, (kind, text, members) in enumerate(T.families(rng, families, words), 1):
            sid = f"tpl{n:05d}"
            out.write(json.dumps({"id": sid, "text": text}, ensure_ascii=False) + "\n")
            rows.append((sid, "-", "source", "-", kind))
            for edit, etext, params in members:
                eid = f"{sid}.{edit}"
                out.write(json.dumps({"id": eid, "text": etext}, ensure_ascii=False) + "\n")
                rows.append((eid, sid, edit, params, kind))
    write_docs_tsv(outdir, name, rows)
    return {"sources": n, "documents": len(rows), "candidates": n}


def write_docs_tsv(outdir, name, rows):
    with open(os.path.join(outdir, f"{name}.docs.tsv"), "w", encoding="utf-8") as f:
        f.write("id\tsource\tedit\tparams\torigin\n")
        for r in rows:
            f.write("\t".join(r) + "\n")


def spaced_copies(rng, doc, ctx):
    """spaced_chinese's copies of a source: (kind, text, params)."""
    whole = rng.random() < 0.5
    fraction = 1.0 if whole else SPACED_PARAGRAPHS
    out = [("spaced", E.space_han(rng, doc.text(), fraction), f"paragraphs={fraction}")]
    kind = rng.choice(KINDS)
    text, params = E.EDITS[kind](rng, doc, ctx)
    if rng.random() < 0.5:
        text = E.space_han(rng, text, fraction)
        kind, params = kind + "+spaced", f"{params};paragraphs={fraction}"
    out.append((kind, text, params))
    return out


def build(name, outdir, max_sources, seed):
    if name == "templated":
        return build_templated(outdir, max_sources, seed)
    prefix, script, fn = CORPORA[name]
    rng = random.Random(f"{seed}:{name}")
    raw = list(fn(rng) if name == "short" else fn())
    kept, per_text = [], {}
    for origin, doc in raw:
        if E.token_count(doc.body) < MIN_TOKENS:
            continue
        key = hashlib.sha256(doc.text().encode()).digest()
        per_text[key] = per_text.get(key, 0) + 1
        if per_text[key] <= MAX_IDENTICAL:
            kept.append((origin, doc))
    if len(kept) > max_sources:
        kept = [kept[i] for i in sorted(rng.sample(range(len(kept)), max_sources))]
    sentences = [s for _, d in kept for p in E.paragraphs(d.body) for s in E.sentences_of(p)
                 if 5 <= E.token_count(s) <= 60]
    ctx = E.EditContext(script, rng.sample(sentences, min(len(sentences), 20000)),
                        sorted({(d.header, d.footer) for _, d in kept if d.header or d.footer}))
    rows = []
    with open(os.path.join(outdir, f"{name}.jsonl"), "w", encoding="utf-8") as out:
        for n, (origin, doc) in enumerate(kept, 1):
            sid = f"{prefix}{n:05d}"
            out.write(json.dumps({"id": sid, "text": doc.text()}, ensure_ascii=False) + "\n")
            rows.append((sid, "-", "source", "-", origin))
            if name == "spaced_chinese":
                copies = spaced_copies(rng, doc, ctx)
            else:
                copies = [(kind,) + E.EDITS[kind](rng, doc, ctx)
                          for kind in rng.sample(KINDS, COPIES_PER_SOURCE.get(name, 2))]
            for kind, text, params in copies:
                eid = f"{sid}.{kind}"
                out.write(json.dumps({"id": eid, "text": text}, ensure_ascii=False) + "\n")
                rows.append((eid, sid, kind, params, origin))
    write_docs_tsv(outdir, name, rows)
    return {"sources": len(kept), "documents": len(rows), "candidates": len(raw)}


def package_versions(names):
    out = {}
    for p in names:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", p], capture_output=True,
                           text=True)
        out[p] = r.stdout if r.returncode == 0 else None
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--only", default="licenses,chinese,web,short",
                    help="corpora, of: " + ",".join(CORPORA))
    ap.add_argument("--max-sources", type=int, default=1500,
                    help="sources a corpus keeps at most (templated: its families)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    names = a.only.split(",")
    for n in names:
        if n not in CORPORA:
            sys.exit(f"corpora.py: unknown corpus {n!r} (known: {', '.join(CORPORA)})")
    needed = sorted({p for n in names for p in PACKAGES[n]})
    versions = package_versions(needed)
    missing = [p for p, v in versions.items() if not v]
    if missing:
        sys.exit("corpora.py: missing Debian packages: " + " ".join(missing) +
                 "\n  apt-get install -y --no-install-recommends " + " ".join(missing))
    os.makedirs(a.outdir, exist_ok=True)
    manifest = {"seed": a.seed, "max_sources": a.max_sources, "packages": versions,
                "copies_per_source": COPIES_PER_SOURCE, "corpora": {}}
    for n in names:
        manifest["corpora"][n] = build(n, a.outdir, a.max_sources, a.seed)
        c = manifest["corpora"][n]
        print(f"corpora.py: {n}: {c['sources']} sources of {c['candidates']}, "
              f"{c['documents']} documents", file=sys.stderr)
    if "licenses" in names:
        manifest["copyright_files"] = len(glob.glob("/usr/share/doc/*/copyright"))
    with open(os.path.join(a.outdir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
