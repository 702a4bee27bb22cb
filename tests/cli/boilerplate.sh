#!/usr/bin/env bash
# boilerplate.sh: `--boilerplate auto` through the CLI on a generated corpus
# of templated pages (200 pages of site A, 100 of site B, each its site's
# template around a two-line body): build finds exactly the templates' lines
# and records them, stats and inspect show them, a body under the other
# site's template is a duplicate only with them removed, query texts and adds
# go without them, a page of template alone is reported and kept whole,
# dedup finds them on its own or takes the store's, standard input and pipes
# are read twice through a spool, and the usage errors.
. "$(dirname "$0")/lib.sh"

python3 - "$T" <<'PYEOF'
import json, os, random, sys
out = sys.argv[1]
rnd = random.Random(13)
vocabulary = ("river stone market engine violet harbor signal meadow copper lantern orbit cedar "
              "falcon quartz tundra velvet walnut zephyr anchor basalt cobalt dune ember fjord "
              "glacier hollow island jasper kettle lagoon mosaic nectar oasis pepper quiver ripple "
              "saffron thistle umber vortex willow yarrow acorn bramble canyon delta").split()
A = ["Acme Widgets Online Store", "Home | Products | Services | Blog | About | Contact",
     "Sign in  Register  Cart  Checkout  Help", "Free shipping on orders over fifty dollars",
     "Copyright 2024 Acme Widgets Inc. All rights reserved.",
     "Privacy policy - Terms of service - Cookie settings",
     "Follow us on social media for news and special offers",
     "Acme Widgets, 123 Main Street, Springfield"]
B = ["THE DAILY GAZETTE", "News \u00b7 Sport \u00b7 Business \u00b7 Culture \u00b7 Opinion",
     "Subscribe today and read without limits from any device",
     "Most read stories of the week chosen by our editors",
     "(c) The Daily Gazette Media Group, registered in England",
     "Advertise with us | Contact the newsroom | Corrections",
     "Download our app for breaking news alerts on your phone",
     "Sign up for the morning briefing newsletter"]
def body():
    return "\n".join(" ".join(rnd.choice(vocabulary) for _ in range(9)) + "." for _ in range(2))
def page(t, b):
    return "\n".join(t[:3]) + "\n\n" + b + "\n\n" + "\n".join(t[3:]) + "\n"
bodies = [body() for _ in range(300)]
def write(name, records):
    with open(os.path.join(out, name), "w") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
site = [{"id": "p%d" % i, "text": page(A if i < 200 else B, bodies[i])} for i in range(300)]
# Page 5's body under site B's template; site A's template alone.
copy = {"id": "copy-p5", "text": page(B, bodies[5])}
bare = {"id": "bare", "text": "\n".join(A)}
write("corpus.jsonl", site + [copy, bare])
write("small.jsonl", site[:50])
write("copy.jsonl", [copy])
write("copy2.jsonl", [dict(copy, id="copy2-p5")])
write("bare.jsonl", [bare])
write("new.jsonl", [{"id": "new", "text": page(B, bodies[7].replace("a", "o"))}])
with open(os.path.join(out, "copy.txt"), "w") as f:
    f.write(copy["text"])
with open(os.path.join(out, "bare.txt"), "w") as f:
    f.write(bare["text"])
with open(os.path.join(out, "body7.txt"), "w") as f:
    f.write(bodies[7].replace("a", "o") + "\n")
with open(os.path.join(out, "lines.txt"), "w") as f:
    f.write("\n".join(A + B) + "\n")
PYEOF
corpus=$T/corpus.jsonl

# ---- build finds the templates' lines and records them ----------------------
run build "$T/s" "$corpus" --boilerplate auto
expect_status 0
expect_out_has "built $T/s: 302 documents"
expect_out_has "; boilerplate 16 lines (held by more than 10% of 302 documents), 1 document only boilerplate"
expect_err_has "warning: $corpus:302: document id 'bare' is only boilerplate: fingerprinted whole"
[ "$(grep -c 'only boilerplate' "$T/err")" = 1 ] && ok || fail "one document only boilerplate"
run build "$T/plain" "$corpus"
expect_status 0
if grep -q boilerplate "$T/out" "$T/err"; then fail "a build without --boilerplate mentions it"; else ok; fi

run stats "$T/s"
expect_status 0
expect_out_has "boilerplate: 16 lines (held by more than 10% of 302 documents)"
run stats "$T/s" --json
expect_out_has '"boilerplate":{"lines":16,"fraction":0.1,"documents":302,"min_documents":100}}'
run stats "$T/plain"
expect_out_has "boilerplate: none"
run stats "$T/plain" --json
expect_out_has '"boilerplate":null}'
run inspect "$T/s" --brief
expect_status 0
expect_out_has "boilerplate: 16 lines (held by more than 10% of 302 documents)"
run inspect "$T/s" --brief --json
expect_out_has '"boilerplate":{"lines":16,'
run verify "$T/s"
expect_status 0

# ---- the template no longer makes or breaks near-duplicates -----------------
# Page 5's body under site B's template: its duplicate with the templates
# removed, far from it without.
run pairs "$T/s" --k 3
expect_status 0
expect_out "copy-p5	p5	0"
run pairs "$T/plain" --k 3
if grep -q 'copy-p5' "$T/out"; then fail "without removal the copy is within 3"; else ok; fi

# The page of template alone is stored with its whole text's fingerprint.
bare_fp=$("$SIMSTORE" fingerprint "$T/bare.txt" | cut -f1)
run query "$T/s" --file "$T/bare.txt" --k 0
expect_status 0
expect_out_has "-	bare	$bare_fp	0"
expect_err_has "warning: the query text is only boilerplate"

# ---- query texts go without the store's boilerplate -------------------------
run query "$T/s" --file "$T/copy.txt" --k 0
expect_status 0; expect_err_empty
expect_out_has "-	p5	"
expect_out_has "-	copy-p5	"
run query "$T/s" --text "$(cat "$T/copy.txt")" --k 0
expect_out_has "-	p5	"
run query "$T/s" --queries "$T/copy.jsonl" --k 0
expect_status 0
expect_out_has "copy-p5	p5	"
run query "$T/s" --queries "$T/copy.jsonl" --k 0 --strategy one-by-one
expect_out_has "copy-p5	p5	"
run query "$T/s" --queries "$T/bare.jsonl" --k 0
expect_status 0
expect_out_has "bare	bare	$bare_fp	0"
expect_err_has "warning: $T/bare.jsonl:1: query id 'bare' is only boilerplate: fingerprinted whole"
run query "$T/plain" --file "$T/copy.txt" --k 3
expect_out_has "-	copy-p5	"
if grep -q "	p5	" "$T/out"; then fail "the plain store finds p5 through another template"; else ok; fi

# ---- add applies the recorded set -------------------------------------------
cp -r "$T/s" "$T/added"
run add "$T/added" "$T/new.jsonl"
expect_status 0
expect_out_has "added 1 document"
# Its text went without site B's template: it is its body's fingerprint.
body_fp=$("$SIMSTORE" fingerprint "$T/body7.txt" | cut -f1)
run query "$T/added" --fp "$body_fp" --k 0
expect_out "-	new	$body_fp	0"
run stats "$T/added"
expect_out_has "boilerplate: 16 lines (held by more than 10% of 302 documents)"
run add "$T/added" --boilerplate auto "$T/new.jsonl"
expect_status 2
expect_err_has "add removes the boilerplate lines the store recorded"

# ---- standard input, pipes and compressed files are read twice --------------
run_in "$corpus" build "$T/stdin" - --format jsonl --boilerplate auto
expect_status 0
expect_out_has "; boilerplate 16 lines (held by more than 10% of 302 documents)"
expect_err_has "warning: <stdin>:302: document id 'bare' is only boilerplate"
run pairs "$T/stdin" --k 3
expect_out "copy-p5	p5	0"
cat "$corpus" | "$SIMSTORE" build "$T/pipe" - --format jsonl --boilerplate auto >"$T/out" 2>"$T/err"
status=$?
expect_status 0
expect_out_has "; boilerplate 16 lines"
"$SIMSTORE" build "$T/fifo" <(cat "$corpus") --format jsonl --boilerplate auto >"$T/out" 2>"$T/err"
status=$?
expect_status 0
expect_out_has "; boilerplate 16 lines"
gzip -c "$corpus" >"$T/corpus.jsonl.gz"
run build "$T/gz" "$T/corpus.jsonl.gz" --boilerplate auto
expect_status 0
expect_out_has "; boilerplate 16 lines"
# Every document's fingerprint, as the answers at distance 0 list them.
for s in s stdin pipe fifo gz; do
    "$SIMSTORE" query "$T/$s" --queries "$corpus" --k 0 2>/dev/null >"$T/$s.fps"
done
for s in stdin pipe fifo gz; do
    cmp -s "$T/s.fps" "$T/$s.fps" && ok || fail "$s: other fingerprints than from the file"
done
# Nothing spooled is left behind in $TMPDIR.
mkdir "$T/tmp"
TMPDIR="$T/tmp" "$SIMSTORE" build "$T/stdin2" - --format jsonl --boilerplate auto <"$corpus" \
    >"$T/out" 2>"$T/err"
status=$?
expect_status 0
[ -z "$(ls -A "$T/tmp")" ] && ok || fail "the spool of standard input was left in TMPDIR"

# ---- thresholds ----------------------------------------------------------------
run build "$T/small" "$T/small.jsonl" --boilerplate auto
expect_status 0
expect_err_has "boilerplate: 50 documents, fewer than the 100 --boilerplate auto needs"
run stats "$T/small"
expect_out_has "boilerplate: 0 lines (50 documents: fewer than the 100 needed)"
run build "$T/small10" "$T/small.jsonl" --boilerplate auto --boilerplate-min-docs 10
expect_status 0
expect_out_has "; boilerplate 8 lines (held by more than 10% of 50 documents)"
# Site B's lines are in 100 of 302 pages (33%): above 0.3, below 0.34.
run build "$T/f30" "$corpus" --boilerplate auto --boilerplate-fraction 0.3
expect_out_has "; boilerplate 16 lines (held by more than 30% of 302 documents)"
run build "$T/f34" "$corpus" --boilerplate auto --boilerplate-fraction 0.34
expect_out_has "; boilerplate 8 lines (held by more than 34% of 302 documents)"

# ---- dedup ---------------------------------------------------------------------
run dedup "$corpus" --boilerplate auto --removed "$T/removed"
expect_status 0
expect_out_lines 301
grep -qF 'copy-p5' "$T/out" && fail "dedup --boilerplate auto kept the copy" || ok
[ "$(cat "$T/removed")" = "copy-p5	p5	0" ] && ok || fail "dedup --removed: $(cat "$T/removed")"
expect_err_has "warning: $corpus:302: document id 'bare' is only boilerplate"
cp "$T/out" "$T/dedup.file"
run_in "$corpus" dedup - --boilerplate auto
expect_status 0
cmp -s "$T/out" "$T/dedup.file" && ok || fail "dedup of standard input differs from the file's"
run dedup "$corpus" --removed "$T/removed.plain"
expect_status 0
grep -qF '"copy-p5"' "$T/out" && ok || fail "dedup without --boilerplate dropped the copy"
run dedup "$T/copy2.jsonl" --store "$T/s" --removed "$T/removed.store"
expect_status 0
expect_out_lines 0
[ "$(cat "$T/removed.store")" = "copy2-p5	copy-p5	0" ] && ok ||
    fail "dedup --store: $(cat "$T/removed.store")"
run dedup "$T/copy.jsonl" --store "$T/s" --boilerplate auto
expect_status 2
expect_err_has "--boilerplate with --store"

# ---- errors --------------------------------------------------------------------
run build "$T/e1" "$corpus" --boilerplate-fraction 0.2
expect_status 2
expect_err_has "--boilerplate-fraction applies only with --boilerplate auto"
run build "$T/e2" "$corpus" --boilerplate maybe
expect_status 2
expect_err_has "--boilerplate takes auto or none, not 'maybe'"
for f in 0 1 1.5 -0.1 abc 0.0000001; do
    run build "$T/e3" "$corpus" --boilerplate auto --boilerplate-fraction "$f"
    expect_status 2
done
run build "$T/e4" --fingerprint-only --boilerplate auto "$T/x.hex"
expect_status 2
printf 'a\t0123456789abcdef\n' >"$T/x.tsv"
run build "$T/e5" "$T/x.tsv" --boilerplate auto
expect_status 1
expect_err_has "--boilerplate auto reads the texts of JSON Lines documents"
[ ! -e "$T/e5" ] && ok || fail "a failed build left a store"
# A bad record is reported once (by the second pass, as without
# boilerplate): nothing is built; dedup writes the other records, exit 1.
head -150 "$corpus" >"$T/bad.jsonl"
echo '{"id": "broken", "text": ' >>"$T/bad.jsonl"
tail -n +151 "$corpus" >>"$T/bad.jsonl"
run build "$T/e6" "$T/bad.jsonl" --boilerplate auto
expect_status 1
[ "$(grep -c "$T/bad.jsonl:151:" "$T/err")" = 1 ] && ok || fail "the bad record is not reported once"
[ ! -e "$T/e6" ] && ok || fail "a failed build left a store"
run dedup "$T/bad.jsonl" --boilerplate auto
expect_status 1
expect_out_lines 301
[ "$(grep -c "$T/bad.jsonl:151:" "$T/err")" = 1 ] && ok || fail "dedup: the bad record is not reported once"

finish
