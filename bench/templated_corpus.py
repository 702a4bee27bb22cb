#!/usr/bin/env python3
# templated_corpus.py: a generated corpus of web pages with site templates,
# for measuring boilerplate removal (README, "Boilerplate";
# bench/boilerplate_eval.sh). Each of SITES sites has its own template:
# header, navigation and footer lines of its own words; each page is its
# site's template around a short body of random words. PAIRS bodies are
# published twice, on two different sites, the copy with one word changed:
# the planted near-duplicates. Everything else is unrelated.
#
# Writes OUT.jsonl ({"id", "text"} per page) and OUT.pairs (the planted
# pairs, "id_a<TAB>id_b" with id_a < id_b, sorted).
#
#   python3 bench/templated_corpus.py OUT [PAGES=20000] [SITES=5] [PAIRS=1000]
#       [EDITS=1] [TEMPLATE_LINES=10] [BODY_LINES=4] [SEED=1]
import json
import random
import sys


def words(rnd, vocabulary, n):
    return " ".join(rnd.choice(vocabulary) for _ in range(n))


def main():
    out = sys.argv[1]
    pages = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    sites = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    pairs = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
    edits = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    template_lines = int(sys.argv[6]) if len(sys.argv) > 6 else 10
    body_lines = int(sys.argv[7]) if len(sys.argv) > 7 else 4
    rnd = random.Random(int(sys.argv[8]) if len(sys.argv) > 8 else 1)
    syllables = ["ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "ve", "da", "go", "hu", "zi",
                 "be", "fa", "ju", "wo", "xe", "yu", "qi"]
    vocabulary = sorted({"".join(rnd.choice(syllables) for _ in range(rnd.randint(2, 4)))
                         for _ in range(20000)})
    templates = []
    for s in range(sites):
        lines = [words(rnd, vocabulary, rnd.randint(3, 9)) for _ in range(template_lines)]
        lines[0] = "Site %d: %s" % (s, lines[0])
        templates.append(lines)

    def page(site, body):
        t = templates[site]
        head = template_lines // 3
        return "\n".join(t[:head]) + "\n\n" + body + "\n\n" + "\n".join(t[head:]) + "\n"

    def body():
        return "\n".join(words(rnd, vocabulary, rnd.randint(8, 14)) + "." for _ in range(body_lines))

    docs, planted = [], []
    while len(docs) < pages:
        i = len(docs)
        site = rnd.randrange(sites)
        b = body()
        docs.append(("p%06d" % i, page(site, b)))
        if len(planted) < pairs and len(docs) < pages:
            other = (site + 1 + rnd.randrange(sites - 1)) % sites if sites > 1 else site
            ws = b.split(" ")
            for _ in range(edits):
                k = rnd.randrange(len(ws))
                ws[k] = rnd.choice(vocabulary) + ("." if ws[k].endswith(".") else "")
            j = len(docs)
            docs.append(("p%06d" % j, page(other, " ".join(ws))))
            planted.append(("p%06d" % i, "p%06d" % j))
    order = list(range(len(docs)))
    rnd.shuffle(order)
    with open(out + ".jsonl", "w") as f:
        for i in order:
            f.write(json.dumps({"id": docs[i][0], "text": docs[i][1]}) + "\n")
    with open(out + ".pairs", "w") as f:
        for a, b in sorted(planted):
            f.write("%s\t%s\n" % (a, b))


main()
