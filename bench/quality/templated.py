# templated.py: the quality benchmark's `templated` corpus (issue 36): short templated families, 40-80 words a document, whose members differ by a substituted name or one substituted or added sentence, from the words of /usr/share/dict (wamerican); see bench/quality/README.md.
#
# A family is one page of one of six kinds (product, notice, listing, job,
# event, course): 4 to 7 of its kind's sentence templates, in their order,
# with their slots filled from the word list: {N} the family's name (a
# capitalized entry, used once to three times), {P} a place (another one),
# {w} a word, {n} a number. Members: the page itself, then 2 to 4 distinct
# edits of it (edits.py's conventions: (rng, doc, ctx) -> (text, params)):
#
#   name             the family's name replaced by another, everywhere
#   sentence-subst   one sentence replaced by another of the kind, filled anew
#   sentence-add     one sentence of the kind, filled anew, inserted
#   name+sentence    a new name and one sentence replaced
#
# Pages of one kind share their templates' fixed words, as a site's pages
# do, so members of different families can be near each other too (the
# truth has those pairs; the family score counts only a family's own).
# Everything comes from one seeded generator (corpora.py passes it).
import re

sys_words = "/usr/share/dict/american-english"
WORDS_MIN, WORDS_MAX = 40, 80

# Sentence templates per kind: a page takes 4 to 7 of them, in this order.
KINDS = {
    "product": [
        "The {N} {w} is a {w} {w} for everyday {w} and {w}.",
        "Every {N} is assembled in {P} from {w} {w} and tested before it ships.",
        "It weighs {n} grams and fits in a standard {w} or {w}.",
        "The battery lasts up to {n} hours on a single charge.",
        "Customers who bought the {N} also looked at the {w} {w} and the {w} kit.",
        "Shipping to {P} takes {n} to {n} working days.",
        "Returns are free within {n} days of delivery if the item is unused.",
        "Price: {n} dollars, including the {w} case and a {w} cable.",
        "Ask our support team about {w} options for the {N}.",
    ],
    "notice": [
        "Notice to residents of {P}: the {w} service will be interrupted on {w} morning.",
        "Work on the {w} {w} starts at {n} and should end by {n} in the evening.",
        "The {N} office apologizes for the {w} caused by this work.",
        "Residents who rely on {w} equipment should contact the office in advance.",
        "Parking on {w} street will not be allowed during the work.",
        "For questions, call {n} or write to the {N} office in {P}.",
        "Updates will be posted on the board next to the {w} entrance.",
        "Thank you for your patience while we improve the {w} network.",
    ],
    "listing": [
        "For rent in {P}: a {w} apartment of {n} square meters near the {w} park.",
        "The flat has {n} bedrooms, a {w} kitchen and a balcony facing the {w}.",
        "Heating and water are included in the monthly rent of {n} dollars.",
        "The building has a lift, a bicycle room and a shared {w} garden.",
        "Schools, shops and the {w} station are within {n} minutes on foot.",
        "Pets are welcome after a talk with the owner, {N}.",
        "Available from the first of {w}; minimum lease of {n} months.",
        "To arrange a visit, contact {N} at {n} between nine and five.",
    ],
    "job": [
        "{N} is hiring a {w} {w} for its office in {P}.",
        "You will work with a small team on {w} projects for {w} customers.",
        "We expect at least {n} years of experience with {w} and {w} tools.",
        "Knowledge of {w} is a plus but not a requirement.",
        "The position is full time with a salary from {n} dollars a year.",
        "We offer flexible hours, {n} days of leave and a {w} budget.",
        "Send your application and a short letter to {N} before the end of {w}.",
        "Interviews take place in {P} or online during the first week of {w}.",
    ],
    "event": [
        "Join us for the {N} {w} festival in {P} on the last weekend of {w}.",
        "The program includes {w} workshops, a {w} market and live music.",
        "Doors open at {n} and the first talk begins half an hour later.",
        "Tickets cost {n} dollars; children under {n} enter for free.",
        "Food and drinks are provided by local {w} vendors.",
        "The venue is accessible by bus line {n} from the {w} square.",
        "Volunteers can register with {N} until the end of {w}.",
        "In case of rain the event moves to the {w} hall next door.",
    ],
    "course": [
        "The {N} course on {w} {w} starts in {P} on the first {w} of the month.",
        "Over {n} weeks you will learn the basics of {w} and practice {w} skills.",
        "Each session lasts {n} minutes and ends with a short {w} exercise.",
        "No previous knowledge is needed; bring a notebook and a {w}.",
        "The fee of {n} dollars covers all materials and a final {w}.",
        "Groups are limited to {n} participants to keep the {w} personal.",
        "Teachers from {N} have taught {w} for more than {n} years.",
        "Sign up at the front desk or by calling {n}.",
    ],
}


class Words:
    """The word list's lower-case words (3 to 10 letters) and capitalized
    names, in file order (smoke.py gives the words of its sample texts)."""

    def __init__(self, path=sys_words, entries=None):
        if entries is None:
            with open(path, encoding="utf-8") as f:
                entries = [line.strip() for line in f]
        self.words = [w for w in entries if re.fullmatch(r"[a-z]{3,10}", w)]
        self.names = [w for w in entries if re.fullmatch(r"[A-Z][a-z]{2,11}", w)]


def fill(rng, template, name, words):
    out = []
    for part in re.split(r"(\{[NPwn]\})", template):
        if part == "{N}":
            out.append(name)
        elif part == "{P}":
            out.append(rng.choice(words.names))
        elif part == "{w}":
            out.append(rng.choice(words.words))
        elif part == "{n}":
            out.append(str(rng.randint(2, 999)))
        else:
            out.append(part)
    return "".join(out)


def word_count(text):
    return len(text.split())


class Family:
    """One page: its kind, its name, and its sentences (template index and
    text), with the name in 1 to 3 of them."""

    def __init__(self, rng, words):
        while True:
            self.kind = rng.choice(sorted(KINDS))
            templates = KINDS[self.kind]
            self.name = rng.choice(words.names)
            chosen = sorted(rng.sample(range(len(templates)), rng.randint(4, 7)))
            self.sentences = [(i, fill(rng, templates[i], self.name, words)) for i in chosen]
            uses = sum(s.count(self.name) for _, s in self.sentences)
            if 1 <= uses <= 3 and WORDS_MIN <= word_count(self.text()) <= WORDS_MAX:
                return

    def text(self, sentences=None, name=None):
        text = " ".join(s for _, s in (sentences or self.sentences))
        return text if name is None else re.sub(r"\b%s\b" % re.escape(self.name), name, text)


def other_name(rng, words, name):
    while True:
        n = rng.choice(words.names)
        if n != name:
            return n


def edit_name(rng, fam, words):
    new = other_name(rng, words, fam.name)
    uses = sum(s.count(fam.name) for _, s in fam.sentences)
    return fam.text(name=new), f"name={new},uses={uses}"


def edit_sentence_subst(rng, fam, words, name=None):
    templates = KINDS[fam.kind]
    at = rng.randrange(len(fam.sentences))
    t = rng.randrange(len(templates))
    sentences = list(fam.sentences)
    sentences[at] = (t, fill(rng, templates[t], fam.name, words))
    return fam.text(sentences, name), f"at={at},template={t}"


def edit_sentence_add(rng, fam, words):
    templates = KINDS[fam.kind]
    t = rng.randrange(len(templates))
    at = rng.randint(0, len(fam.sentences))
    sentences = list(fam.sentences)
    sentences.insert(at, (t, fill(rng, templates[t], fam.name, words)))
    return fam.text(sentences), f"at={at},template={t}"


def edit_name_sentence(rng, fam, words):
    new = other_name(rng, words, fam.name)
    text, params = edit_sentence_subst(rng, fam, words, name=new)
    return text, f"name={new},{params}"


EDITS = {
    "name": edit_name,
    "sentence-subst": edit_sentence_subst,
    "sentence-add": edit_sentence_add,
    "name+sentence": edit_name_sentence,
}


def families(rng, count, words=None):
    """`count` families: yields (kind, source text, [(edit, text, params)])."""
    words = words or Words()
    for _ in range(count):
        fam = Family(rng, words)
        members = []
        for edit in rng.sample(sorted(EDITS), rng.randint(2, 4)):
            text, params = EDITS[edit](rng, fam, words)
            members.append((edit, text, params))
        yield fam.kind, fam.text(), members
