# edits.py: the generated edits of the quality benchmark, each at a known strength: re-wrapping, Unicode variants, character substitutions, sentence deletions and insertions, paragraph moves, site templates added or changed, and mixes.
#
# Every edit is a function (rng, doc, ctx) -> (text, params): `doc` is a Doc
# (header, body and footer: the template lines of a web page and its content;
# plain documents have an empty header and footer), `ctx` an EditContext (the
# corpus's sentence pool, other pages' templates, its script), `params` a
# short string recording the strength, as "rate=10/1000" or "width=57".
# Random choices come only from `rng` (random.Random), so a corpus is the same
# for the same seed.
import re
import unicodedata
from dataclasses import dataclass, field

# Han and kana, as format/fingerprint.md classifies them (section 2).
_CJK_RANGES = [(0x3005, 0x3005), (0x3007, 0x3007), (0x3021, 0x3029), (0x3038, 0x303B),
               (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x3FFFF),
               (0x3041, 0x3096), (0x3099, 0x309F), (0x30A1, 0x30FA), (0x30FC, 0x30FF),
               (0x31F0, 0x31FF), (0xFF66, 0xFF9F)]


def is_cjk(ch):
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def is_han(ch):
    return 0x4E00 <= ord(ch) <= 0x9FFF


@dataclass
class Doc:
    header: str
    body: str
    footer: str

    def text(self):
        return "\n\n".join(p for p in (self.header, self.body, self.footer) if p)


@dataclass
class EditContext:
    script: str                                         # "latin" or "han"
    sentences: list = field(default_factory=list)       # pool for insertions
    templates: list = field(default_factory=list)       # (header, footer) of other pages


def paragraphs(text):
    return [p for p in re.split(r"\n[ \t]*\n", text) if p.strip()]


def join_paragraphs(paras):
    return "\n\n".join(paras)


# --- Re-wrapping ---------------------------------------------------------------
def unwrap(para):
    """One line: a line break between Han or kana characters goes (fingerprint
    version 2 joins them too), any other whitespace holding a break becomes a
    space."""
    def join(m):
        before = para[m.start() - 1] if m.start() > 0 else ""
        after = para[m.end()] if m.end() < len(para) else ""
        return "" if before and after and is_cjk(before) and is_cjk(after) else " "
    return re.sub(r"[^\S\n]*\n\s*", join, para)


def fill(line, width):
    """Hard-wrap one line at `width` characters, breaking at a space or
    between two Han or kana characters (never inside a Latin word)."""
    out, start, last_break = [], 0, None
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == " ":
            last_break = (i, 1)
        elif i > start and is_cjk(ch) and is_cjk(line[i - 1]):
            last_break = (i, 0)
        if i - start >= width and last_break and last_break[0] > start:
            pos, skip = last_break
            out.append(line[start:pos])
            start = pos + skip
            last_break = None
            i = start
            continue
        i += 1
    out.append(line[start:])
    return "\n".join(out)


def rewrap_text(text, width):
    return join_paragraphs(fill(unwrap(p), width) for p in paragraphs(text))


def edit_wrap(rng, doc, ctx):
    width = rng.randint(15, 40) if ctx.script == "han" else rng.randint(30, 100)
    return (join_paragraphs([rewrap_text(doc.header, width), rewrap_text(doc.body, width),
                             rewrap_text(doc.footer, width)]).strip("\n"),
            f"width={width}")


# --- Unicode variants ------------------------------------------------------------
def to_fullwidth(text):
    return "".join(chr(ord(c) + 0xFEE0) if c.isascii() and c.isalnum() else c for c in text)


def to_halfwidth(text):
    return "".join(chr(ord(c) - 0xFEE0) if 0xFF01 <= ord(c) <= 0xFF5E else c for c in text)


def ligatures(text):
    return text.replace("ffi", "\ufb03").replace("fi", "\ufb01").replace("fl", "\ufb02")


UNICODE_VARIANTS = {
    "nfd": lambda t: unicodedata.normalize("NFD", t),
    "fullwidth": to_fullwidth,
    "halfwidth": to_halfwidth,
    "ligatures": ligatures,
    "upper": lambda t: t.upper(),
}


def edit_unicode(rng, doc, ctx):
    names = ["fullwidth", "halfwidth", "nfd"] if ctx.script == "han" else \
        ["nfd", "fullwidth", "ligatures", "upper"]
    name = rng.choice(names)
    return UNICODE_VARIANTS[name](doc.text()), f"variant={name}"


# --- Character substitutions ---------------------------------------------------
def token_count(text):
    """Words plus Han and kana characters: what the substitution rates and the
    sentence fractions are relative to."""
    return len(re.findall(r"[^\W\d_]+|\d+", text)) + sum(1 for c in text if is_cjk(c))


def substitute(rng, text, count):
    chars = list(text)
    eligible = [i for i, c in enumerate(chars) if c.isalpha()]
    if not eligible:
        return text
    for i in rng.sample(eligible, min(count, len(eligible))):
        c = chars[i]
        if is_han(c):
            chars[i] = rng.choice(HAN_COMMON.replace(c, ""))
        elif c.isascii():
            chars[i] = rng.choice("abcdefghijklmnopqrstuvwxyz".replace(c.lower(), ""))
        else:
            chars[i] = rng.choice("aeiou")
    return "".join(chars)


# Common Han characters: the replacements of a substitution in Chinese.
HAN_COMMON = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严"

SUBST_RATES = [1, 3, 10, 20, 30, 60]  # substitutions per 1000 tokens


def edit_subst(rng, doc, ctx, rates=SUBST_RATES):
    rate = rng.choice(rates)
    n = max(1, round(rate * token_count(doc.body) / 1000))
    return join_paragraphs([p for p in (doc.header, substitute(rng, doc.body, n), doc.footer)
                            if p]), f"rate={rate}/1000,n={n}"


# --- Sentences -------------------------------------------------------------------
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)|(?<=[。！？])")


def sentences_of(para):
    return [s for s in _SENTENCE_END.split(para) if s and s.strip()]


def sentence_sep(ctx):
    return "" if ctx.script == "han" else " "


SENTENCE_FRACTIONS = [0, 0.02, 0.05, 0.1, 0.2]  # 0: one sentence


def _sentence_count(rng, total, fractions):
    f = rng.choice(fractions)
    return f, max(1, round(f * total))


def edit_sentence_del(rng, doc, ctx, fractions=SENTENCE_FRACTIONS):
    paras = [sentences_of(p) for p in paragraphs(doc.body)]
    slots = [(i, j) for i, ss in enumerate(paras) for j in range(len(ss))]
    f, n = _sentence_count(rng, len(slots), fractions)
    if len(slots) <= n:
        n = max(0, len(slots) - 1)
    drop = set(rng.sample(slots, n))
    sep = sentence_sep(ctx)
    body = join_paragraphs(sep.join(s for j, s in enumerate(ss) if (i, j) not in drop)
                           for i, ss in enumerate(paras))
    return Doc(doc.header, body, doc.footer).text(), f"fraction={f},n={n}"


def edit_sentence_ins(rng, doc, ctx, fractions=SENTENCE_FRACTIONS):
    paras = [sentences_of(p) for p in paragraphs(doc.body)]
    total = sum(len(ss) for ss in paras)
    f, n = _sentence_count(rng, total, fractions)
    for _ in range(n):
        if not paras or not ctx.sentences:
            break
        ss = paras[rng.randrange(len(paras))]
        ss.insert(rng.randint(0, len(ss)), rng.choice(ctx.sentences))
    sep = sentence_sep(ctx)
    body = join_paragraphs(sep.join(ss) for ss in paras)
    return Doc(doc.header, body, doc.footer).text(), f"fraction={f},n={n}"


# --- Paragraph moves ---------------------------------------------------------------
def edit_para_move(rng, doc, ctx):
    paras = paragraphs(doc.body)
    moves = rng.choice([1, 2, 3])
    if len(paras) < 3:
        moves = 0
    for _ in range(moves):
        p = paras.pop(rng.randrange(len(paras)))
        paras.insert(rng.randrange(len(paras) + 1), p)
    return Doc(doc.header, join_paragraphs(paras), doc.footer).text(), f"moves={moves}"


# --- Templates -----------------------------------------------------------------------
_NAV_EN = ["Home", "About", "Download", "Documentation", "Community", "Support", "Blog",
           "News", "Contact", "Search", "Sign in", "Register", "Donate", "Forums",
           "Mailing lists", "Bug tracker", "Security", "Releases", "Wiki", "FAQ"]
_FOOT_EN = ["Copyright 2024 The Project Contributors. All rights reserved.",
            "Privacy policy | Terms of use | Cookie settings | Accessibility",
            "This site is hosted by volunteers; report problems to the web team.",
            "Last modified on 12 March 2024 at 10:41.",
            "Content is available under the licence shown on each page unless noted otherwise.",
            "Follow us: Mastodon | Matrix | RSS feed | Newsletter"]
_NAV_ZH = ["首页", "关于我们", "下载", "文档", "社区", "支持", "博客", "新闻", "联系我们", "搜索",
           "登录", "注册", "捐赠", "论坛", "邮件列表", "问题追踪", "安全公告", "发行版本", "维基", "常见问题"]
_FOOT_ZH = ["版权所有 2024 项目贡献者。保留所有权利。",
            "隐私政策 | 使用条款 | Cookie 设置 | 无障碍访问",
            "本站由志愿者维护，如有问题请联系网站团队。",
            "最后修改于 2024 年 3 月 12 日 10:41。",
            "除非另有说明，本站内容均按各页面所示的许可证提供。",
            "关注我们：微博 | 微信公众号 | RSS 订阅 | 电子报"]


def site_template(rng, script, size):
    """A site header (navigation) and footer of about `size` tokens."""
    nav, foot = (_NAV_ZH, _FOOT_ZH) if script == "han" else (_NAV_EN, _FOOT_EN)
    header, footer = [], []
    while token_count("\n".join(header + footer)) < size:
        if len(header) <= len(footer):
            header.append(" | ".join(rng.sample(nav, rng.randint(3, 6))))
        else:
            footer.append(rng.choice(foot))
    return "\n".join(header), "\n".join(footer)


TEMPLATE_SIZES = [10, 25, 50, 100]


def edit_template(rng, doc, ctx):
    """The page inside a site template (a new one around the old); on a web
    page whose corpus has other pages' templates, half the time the page's
    own navigation is swapped for another page's instead."""
    if ctx.templates and (doc.header or doc.footer) and rng.random() < 0.5:
        header, footer = rng.choice(ctx.templates)
        return Doc(header, doc.body, footer).text(), "swap"
    size = rng.choice(TEMPLATE_SIZES)
    header, footer = site_template(rng, ctx.script, size)
    return Doc(header + ("\n\n" + doc.header if doc.header else ""), doc.body,
               (doc.footer + "\n\n" if doc.footer else "") + footer).text(), f"add={size}"


# --- Spaced Han (spaced_chinese) ------------------------------------------------------
_HAN_PAIR = re.compile(r"(?<=[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])(?=[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])")


def space_han(rng, text, fraction=1.0):
    """A space between every two adjacent Han characters, as some HTML
    renderings (letter-spaced or justified text) give them: in every
    paragraph (fraction 1), else in each paragraph with probability
    `fraction`."""
    out = []
    for para in re.split(r"(\n[ \t]*\n)", text):
        if para.strip() and (fraction >= 1 or rng.random() < fraction):
            para = _HAN_PAIR.sub(" ", para)
        out.append(para)
    return "".join(out)


# --- Copies and mixes ----------------------------------------------------------------
def edit_exact(rng, doc, ctx):
    return doc.text(), "-"


def edit_mix(rng, doc, ctx):
    """Two or three light edits in a row (wrap and Unicode variants last, as a
    copy is reformatted after it is edited)."""
    steps = rng.sample(["subst", "sentence-del", "sentence-ins", "para-move"], rng.choice([2, 3]))
    steps.append(rng.choice(["wrap", "unicode", "none"]))
    done = []
    for step in steps:
        if step == "none":
            continue
        if step == "subst":
            text, p = edit_subst(rng, doc, ctx, rates=[1, 3, 10])
        elif step == "sentence-del":
            text, p = edit_sentence_del(rng, doc, ctx, fractions=[0, 0.02, 0.05])
        elif step == "sentence-ins":
            text, p = edit_sentence_ins(rng, doc, ctx, fractions=[0, 0.02, 0.05])
        else:
            text, p = EDITS[step](rng, doc, ctx)
        done.append(f"{step}({p})")
        if step in ("wrap", "unicode"):
            return text, "+".join(done)
        doc = Doc(doc.header, _strip_frame(text, doc), doc.footer)
    return doc.text(), "+".join(done)


def _strip_frame(text, doc):
    """The body of an edited text whose header and footer were kept as they are."""
    if doc.header and text.startswith(doc.header + "\n\n"):
        text = text[len(doc.header) + 2:]
    if doc.footer and text.endswith("\n\n" + doc.footer):
        text = text[:-len(doc.footer) - 2]
    return text


EDITS = {
    "exact": edit_exact,
    "wrap": edit_wrap,
    "unicode": edit_unicode,
    "subst": edit_subst,
    "sentence-del": edit_sentence_del,
    "sentence-ins": edit_sentence_ins,
    "para-move": edit_para_move,
    "template": edit_template,
    "mix": edit_mix,
}
