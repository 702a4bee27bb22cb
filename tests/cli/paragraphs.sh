#!/usr/bin/env bash
# paragraphs.sh: the paragraph index through the command (format/store.md,
# "Paragraphs"): build --paragraphs and add index paragraph fingerprints;
# query --paragraphs prints QUERY_ID, DOC_ID, SHARED, OF, FRACTION with the
# exact counts of planted partial copies and edits, --json, --min-fraction,
# --skip-self, --end-marker; delete and compact keep the answers right;
# stats, inspect and verify show the index; misuse is refused clearly.
source "$(dirname "$0")/lib.sh"

# The article: paragraphs 1..10. The page copies 2, 5 and 8 among four of
# its own and a short line (below the 8-word minimum); the edited document
# is the article's first 8 paragraphs with 3 and 6 rewritten.
python3 - "$T" <<'EOF'
import json, random, sys
t = sys.argv[1]
def para(seed, words=30):
    r = random.Random(seed * 7919 + 13)
    return " ".join("w%d" % r.randrange(100000) for _ in range(words))
def text(seeds):
    return "\n\n".join(para(s) if s else "just a short line" for s in seeds)
docs = [("article", list(range(1, 11))), ("page", [101, 2, 102, 0, 5, 103, 8, 104]),
        ("edited", [1, 2, 203, 4, 5, 206, 7, 8]), ("other", [301, 302, 303, 304])]
with open(t + "/c.jsonl", "w") as f:
    for i, s in docs:
        f.write(json.dumps({"id": i, "text": text(s), "meta": {"n": len(s)}}) + "\n")
with open(t + "/q.jsonl", "w") as f:
    for i, s in docs[:3]:
        f.write(json.dumps({"id": i, "text": text(s)}) + "\n")
with open(t + "/page2.jsonl", "w") as f:
    f.write(json.dumps({"id": 7, "text": text(docs[1][1])}) + "\n")
with open(t + "/page.txt", "w") as f:
    f.write(text(docs[1][1]))
EOF

# ---- build, stats, inspect, verify ------------------------------------------
run build "$T/s" --paragraphs -q "$T/c.jsonl"
expect_status 0
expect_out_has "; paragraph index: 20 distinct fingerprints of at least 8 words"
run stats "$T/s"
expect_out_has "paragraph index: paragraphs of at least 8 words: 29 entries, 20 distinct fingerprints; 1 segment, 20 fingerprints per table (0 dead)"
run stats "$T/s" --json
if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); p=d["paragraphs"]; assert p["min_words"]==8 and p["entries"]==29 and p["fingerprints"]==20 and p["segments"]==1' "$T/out"; then ok; else fail "stats --json: paragraphs"; fi
run inspect "$T/s" --brief
expect_out_has "paragraph index: paragraphs of at least 8 words"
run inspect "$T/s"
expect_out_has "paragraph segment 2: 20 paragraph fingerprints, created"
run verify "$T/s"
expect_status 0
expect_out_has "29 paragraph entries"

# ---- query --paragraphs ---------------------------------------------------------
run query "$T/s" --paragraphs --queries "$T/q.jsonl"
expect_status 0
expect_out "article	article	10	10	1.0000
article	edited	6	10	0.6000
article	page	3	10	0.3000
page	page	7	7	1.0000
page	article	3	7	0.4286
page	edited	3	7	0.4286
edited	edited	8	8	1.0000
edited	article	6	8	0.7500
edited	page	3	8	0.3750"
# A file, --min-fraction, --skip-self.
run query "$T/s" --paragraphs --file "$T/page.txt" --min-fraction 0.5
expect_out "-	page	7	7	1.0000"
run query "$T/s" --paragraphs --queries "$T/q.jsonl" --skip-self --min-fraction 0.31
expect_out "article	edited	6	10	0.6000
page	article	3	7	0.4286
page	edited	3	7	0.4286
edited	article	6	8	0.7500
edited	page	3	8	0.3750"
run query "$T/s" --paragraphs --queries "$T/q.jsonl" --min-fraction 1
expect_out_lines 3
# JSON Lines, with metadata; one record per query with --end-marker.
run query "$T/s" --paragraphs --file "$T/page.txt" --json --meta
expect_out '{"query":"-","id":"page","shared":7,"of":7,"fraction":1.0000,"meta":{"n":8}}
{"query":"-","id":"article","shared":3,"of":7,"fraction":0.4286,"meta":{"n":10}}
{"query":"-","id":"edited","shared":3,"of":7,"fraction":0.4286,"meta":{"n":8}}'
run query "$T/s" --paragraphs --queries "$T/q.jsonl" --json --end-marker --min-fraction 0.7
expect_out '{"query":"article","matches":[{"id":"article","shared":10,"of":10,"fraction":1.0000}]}
{"query":"page","matches":[{"id":"page","shared":7,"of":7,"fraction":1.0000}]}
{"query":"edited","matches":[{"id":"edited","shared":8,"of":8,"fraction":1.0000},{"id":"article","shared":6,"of":8,"fraction":0.7500}]}'
# A query without a paragraph of 8 words: no answer, no error.
run query "$T/s" --paragraphs --text "too short to count"
expect_status 0
expect_out ""
# --k below the store's: the copies are exact, the answers the same.
run query "$T/s" --paragraphs --file "$T/page.txt" --k 0
expect_out_lines 3
# --k above it: what a store built for that k answers (format/design.md,
# "Beyond k").
run query "$T/s" --paragraphs --file "$T/page.txt" --k 6
expect_status 0
cp "$T/out" "$T/beyond"
"$SIMSTORE" build "$T/s6" -q --k 6 --paragraphs "$T/c.jsonl" >/dev/null || fail "build --k 6"
run query "$T/s6" --paragraphs --file "$T/page.txt"
cmp -s "$T/out" "$T/beyond" && ok || fail "--paragraphs --k 6 differs from a store built for 6"

# ---- pairs --paragraphs -----------------------------------------------------------------
run pairs "$T/s" --paragraphs
expect_status 0
expect_out "article	edited	6	10	6	8	0.7500
article	page	3	10	3	7	0.4286
edited	page	3	8	3	7	0.4286"
run pairs "$T/s" --paragraphs --min-fraction 0.5 --json
expect_out '{"a":"article","b":"edited","shared_a":6,"of_a":10,"shared_b":6,"of_b":8,"fraction":0.7500}'
run pairs "$T/s" --paragraphs --k 0 --min-fraction 0
expect_out_lines 3
# Paragraph pairs are paragraph queries: above the store's k (3) they
# probe more and answer what a store built for that k answers.
for cmd in pairs clusters; do
    run $cmd "$T/s6" --paragraphs --min-fraction 0.1
    expect_status 0
    cp "$T/out" "$T/built6"
    run $cmd "$T/s" --paragraphs --min-fraction 0.1 --k 6
    expect_status 0
    cmp -s "$T/out" "$T/built6" && ok || fail "$cmd --paragraphs --k 6 differs from a store built for 6"
done

# ---- clusters --paragraphs --------------------------------------------------------------
run clusters "$T/s" --paragraphs
expect_status 0
expect_out "article	article	1	1.0000
article	edited	0	0.7500
article	page	0	0.4286"
expect_err_has "clusters: 3 documents in 1 cluster, 2 to drop, largest cluster 3 documents"
# edited and page pair at 0.4286: above 0.45 only article-edited is left.
run clusters "$T/s" --paragraphs --min-fraction 0.45 --keep min-id --json
expect_out '{"cluster":"article","id":"article","kept":true,"fraction":1.0000}
{"cluster":"article","id":"edited","kept":false,"fraction":0.7500}'
run clusters "$T/s" --paragraphs --keep max-meta n
expect_out "article	article	1	1.0000
article	edited	0	0.7500
article	page	0	0.4286"
run clusters "$T/s" --paragraphs --keep min-meta n
expect_out "edited	edited	1	1.0000
edited	article	0	0.7500
edited	page	0	0.4286"

# ---- add, delete, compact ---------------------------------------------------------
run add "$T/s" -q "$T/page2.jsonl"
expect_status 0
run query "$T/s" --paragraphs --file "$T/page.txt" --json
expect_out_has '{"query":"-","id":7,"shared":7,"of":7,"fraction":1.0000}'
run verify "$T/s"
expect_status 0
run delete "$T/s" article
expect_status 0
run query "$T/s" --paragraphs --queries "$T/q.jsonl"
expect_out "article	edited	6	10	0.6000
article	7	3	10	0.3000
article	page	3	10	0.3000
page	7	7	7	1.0000
page	page	7	7	1.0000
page	edited	3	7	0.4286
edited	edited	8	8	1.0000
edited	7	3	8	0.3750
edited	page	3	8	0.3750"
cp "$T/out" "$T/after-delete"
run pairs "$T/s" --paragraphs
expect_out "7	page	7	7	7	7	1.0000
7	edited	3	7	3	8	0.4286
edited	page	3	8	3	7	0.4286"
cp "$T/out" "$T/pairs-after-delete"
run verify "$T/s"
expect_status 0
run compact "$T/s"
expect_status 0
run query "$T/s" --paragraphs --queries "$T/q.jsonl"
if cmp -s "$T/out" "$T/after-delete"; then ok; else fail "compact changed the paragraph answers"; fi
run pairs "$T/s" --paragraphs
if cmp -s "$T/out" "$T/pairs-after-delete"; then ok; else fail "compact changed the paragraph pairs"; fi
run stats "$T/s"
expect_out_has "16 distinct fingerprints; 1 segment, 16 fingerprints per table (0 dead)"
run verify "$T/s"
expect_status 0

# ---- dedup --add into a store with a paragraph index: the kept documents'
# paragraphs are indexed too.
run build "$T/d" --paragraphs -q "$T/c.jsonl"
python3 - "$T" <<'EOF'
import json, sys
t = sys.argv[1]
rec = json.loads(open(t + "/c.jsonl").readlines()[1])
rec["id"] = "page3"
rec["text"] += "\n\n" + " ".join("tail%d" % i for i in range(40))
open(t + "/d.jsonl", "w").write(json.dumps(rec) + "\n")
EOF
run dedup --store "$T/d" --add "$T/d.jsonl"
expect_status 0
run query "$T/d" --paragraphs --queries "$T/d.jsonl"
expect_out "page3	page3	8	8	1.0000
page3	page	7	8	0.8750
page3	article	3	8	0.3750
page3	edited	3	8	0.3750"
run verify "$T/d"
expect_status 0

# ---- the minimum --------------------------------------------------------------------
run build "$T/m40" --paragraphs --paragraph-min-words 40 -q "$T/c.jsonl"
expect_status 0
run stats "$T/m40"
expect_out_has "paragraph index: paragraphs of at least 40 words: 0 entries"
run query "$T/m40" --paragraphs --queries "$T/q.jsonl"
expect_status 0
expect_out ""
run build "$T/m3" --paragraphs --paragraph-min-words 3 -q "$T/c.jsonl"
run query "$T/m3" --paragraphs --file "$T/page.txt" --min-fraction 0
expect_out "-	page	8	8	1.0000
-	article	3	8	0.3750
-	edited	3	8	0.3750"

# ---- misuse -----------------------------------------------------------------------------
run build "$T/plain" -q "$T/c.jsonl"
run query "$T/plain" --paragraphs --file "$T/page.txt"
expect_status 1
expect_err_has "has no paragraph index (build it with --paragraphs)"
run stats "$T/plain"
expect_out_has "paragraph index: none"
run query "$T/s" --paragraphs --fp 0123456789abcdef
expect_status 2
expect_err_has "--paragraphs needs the query's text"
run query "$T/s" --file "$T/page.txt" --min-fraction 0.5
expect_status 2
expect_err_has "--min-fraction goes with --paragraphs"
run query "$T/s" --paragraphs --file "$T/page.txt" --min-fraction 1.5
expect_status 2
printf 'x\t0123456789abcdef\n' >"$T/q.tsv"
run query "$T/s" --paragraphs --queries "$T/q.tsv"
expect_status 2
expect_err_has "--paragraphs needs the queries' texts"
run pairs "$T/plain" --paragraphs
expect_status 1
expect_err_has "has no paragraph index"
run pairs "$T/s" --min-fraction 0.5
expect_status 2
expect_err_has "--min-fraction goes with --paragraphs"
run pairs "$T/s" --paragraphs --by-fingerprint
expect_status 2
run clusters "$T/plain" --paragraphs
expect_status 1
expect_err_has "has no paragraph index"
run clusters "$T/s" --paragraphs --mode star
expect_status 2
run clusters "$T/s" --min-fraction 0.2
expect_status 2
run build "$T/bad" --paragraph-min-words 5 -q "$T/c.jsonl"
expect_status 2
expect_err_has "--paragraph-min-words goes with --paragraphs"
run build "$T/bad" --paragraphs --paragraph-min-words 256 -q "$T/c.jsonl"
expect_status 2
printf '0123456789abcdef\n' >"$T/f.hex"
run build "$T/bad" --paragraphs --fingerprint-only -q "$T/f.hex"
expect_status 2
expect_err_has "no paragraphs"

finish
