#!/usr/bin/env python3
# quality.py: runs the quality benchmark on corpora made by corpora.py: exact Jaccard truth, simstore through its CLI at k = 3..7 and a 128-permutation MinHash LSH baseline in the same run, recall and precision per Jaccard band; see bench/quality/README.md.
#
#   quality.py CORPUSDIR OUTDIR [--build BUILD] [--only NAME,...] [--threads N]
#
# Truth: the Jaccard similarity of two documents' sets of distinct features
# under fingerprint version 2 in character-bigram mode (word 3-shingles after
# NFKC and case folding; two overlapping bigrams, i.e. three characters, in
# Han and kana text; format/fingerprint.md section 13), as
# build/bench/quality_features computes them. Every pair with J >= 0.8 is
# found, exactly, by an all-pairs prefix filter.
#
# Writes OUTDIR/results.json (every figure), OUTDIR/results.tsv (one line per
# corpus, method and band), OUTDIR/edits.tsv (planted pairs per edit kind)
# OUTDIR/report.md (the tables) and OUTDIR/readme.md (the README's table),
# and prints the report.
import argparse
import array
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict

FLOOR = 0.8                     # truth holds every pair with J >= FLOOR
BANDS = [("1.0", 1.0, None), ("0.95-1", 0.95, 1.0), ("0.9-0.95", 0.9, 0.95),
         ("0.8-0.9", 0.8, 0.9)]  # name, low (inclusive), high (exclusive; None: J = 1)
TARGET = 0.9                    # recall "at J >= 0.9" and precision against it
KS = [3, 4, 5, 6, 7]
PERMUTATIONS = 128
MINHASH_THRESHOLDS = [0.8, 0.9]
MIN_SIMILARITY = 0.9            # --min-similarity J, once the CLI has it


# --- Features and truth ----------------------------------------------------------
def read_ids(path):
    ids = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                ids.append(json.loads(line)["id"])
    return ids


def read_features(path, count):
    sets = []
    with open(path, "rb") as f:
        for _ in range(count):
            n = int.from_bytes(f.read(4), "little")
            a = array.array("Q")
            a.frombytes(f.read(8 * n))
            if sys.byteorder != "little":
                a.byteswap()
            sets.append(a)
    return sets


def jaccard_pairs(feats, floor=FLOOR):
    """Every pair (i, j), i < j, whose sets have Jaccard >= floor, with its
    intersection and union sizes: AllPairs' prefix filter (features ordered
    rarest first; two sets with J >= t share a feature among the first
    |x| - ceil(t |x|) + 1 of each), then each candidate verified exactly."""
    freq = Counter()
    for a in feats:
        freq.update(a)
    rank = {h: r for r, h in enumerate(sorted(freq, key=lambda h: (freq[h], h)))}
    del freq
    ordered = [sorted(rank[h] for h in a) for a in feats]
    del rank
    sets = [frozenset(o) for o in ordered]
    index = defaultdict(list)
    out = {}
    for x in sorted(range(len(feats)), key=lambda i: (len(ordered[i]), i)):
        size = len(ordered[x])
        if size == 0:
            continue
        prefix = size - math.ceil(floor * size - 1e-9) + 1
        seen = set()
        for f in ordered[x][:prefix]:
            for y in index[f]:
                if y in seen:
                    continue
                seen.add(y)
                other = len(ordered[y])
                if other < floor * size - 1e-9:
                    continue
                inter = len(sets[x] & sets[y])
                union = size + other - inter
                if inter >= floor * union - 1e-9:
                    out[(min(x, y), max(x, y))] = (inter, union)
            index[f].append(x)
    return out, sets


def exact_jaccard(sets, i, j):
    inter = len(sets[i] & sets[j])
    return inter, len(sets[i]) + len(sets[j]) - inter


def band_of(inter, union):
    if inter == union:
        return "1.0"
    for name, low, high in BANDS[1:]:
        if inter >= low * union - 1e-9 and (high is None or inter < high * union - 1e-9):
            return name
    return None


# --- Methods -----------------------------------------------------------------------
def run(cmd, out=None):
    t = time.monotonic()
    with open(out, "wb") if out else open(os.devnull, "wb") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.PIPE)
    if r.returncode != 0:
        sys.exit(f"quality.py: {' '.join(cmd)} failed ({r.returncode}):\n"
                 f"{r.stderr.decode(errors='replace')}")
    return time.monotonic() - t


def cli_help(simstore, command):
    r = subprocess.run([simstore, command, "--help"], capture_output=True, text=True)
    return r.stdout + r.stderr


def cli_options(simstore, command):
    r = subprocess.run([simstore, command, "--help"], capture_output=True, text=True)
    # Options as the help lists them (a line starting with one), not those
    # its prose mentions.
    return set(re.findall(r"^ {0,8}(?:-[a-z], )?(--[a-z][a-z0-9-]*)", r.stdout + r.stderr, re.M))


def simstore_methods(simstore):
    """(name, build options, pairs options, k[, pairs k]) for every mode the
    CLI in hand supports: first the defaults themselves (no option at all:
    k None), then documents at k = 3..7 with fingerprint versions 2 (the
    default) and 1 (as version 1 was: friso words), and, once the options
    exist, the same with --min-similarity, with --boilerplate auto, and
    paragraphs."""
    build, pairs = cli_options(simstore, "build"), cli_options(simstore, "pairs")
    methods = [("simstore defaults", [], [], None)]
    for version in (2, 1):
        for k in KS:
            opts = [] if version == 2 else ["--fp-version", "1", "--cjk", "auto"]
            methods.append((f"simstore v{version} k={k}", opts, [], k))
    if "--min-similarity" in pairs or "--min-similarity" in build:
        sim = ["--min-similarity", str(MIN_SIMILARITY)]
        for k in KS:
            methods.append((f"simstore v2 k={k} minhash64 sim>={MIN_SIMILARITY}",
                            (sim if "--min-similarity" in build else []) +
                            ["--sketch", "minhash64"],
                            sim if "--min-similarity" in pairs else [], k))
    # The near-duplicate setting spelled out (README, "How well it finds
    # near-duplicates"): candidates at k = 7, kept by a 256-byte sketch at
    # J >= 0.9, CJK text as character bigrams (so the sketch's features are
    # the truth's); the defaults since they were measured so.
    if "--min-similarity" in pairs and "minhash256" in cli_help(simstore, "build"):
        methods.append((f"simstore v2 k=7 minhash256 cjk-bigram sim>={MIN_SIMILARITY}",
                        ["--sketch", "minhash256", "--cjk", "bigram"],
                        ["--min-similarity", str(MIN_SIMILARITY)], 7))
    # The same setting on a store built for the default k = 3: pairs asked
    # k = 7 above the store's k (README, "Distances above the store's k"),
    # once the CLI answers that; the same pairs by exactness, at a fraction
    # of the tables.
    if "--min-similarity" in pairs and answers_beyond_k(simstore):
        methods.append((f"simstore v2 k=3 store, pairs k=7 minhash256 cjk-bigram "
                        f"sim>={MIN_SIMILARITY}",
                        ["--sketch", "minhash256", "--cjk", "bigram"],
                        ["--min-similarity", str(MIN_SIMILARITY)], 3, 7))
    if "--boilerplate" in build:
        for k in KS:
            methods.append((f"simstore v2 k={k} boilerplate", ["--boilerplate", "auto"], [], k))
    if "--paragraphs" in build and "--paragraphs" in pairs:
        # Pairs sharing paragraphs: both sides' fraction at least 0.8 (a
        # partial copy, one side's 0.8 only, is not a near-duplicate).
        for k in (3, 5):
            methods.append((f"simstore v2 k={k} paragraphs both>=0.8", ["--paragraphs"],
                            ["--paragraphs", "--min-fraction", "0.8", "--both-sides"], k))
    return methods


def answers_beyond_k(simstore):
    """Whether `simstore pairs` answers a k above the store's."""
    with tempfile.TemporaryDirectory() as d:
        fps = os.path.join(d, "two.tsv")
        with open(fps, "w") as f:
            f.write("a\t0000000000000000\nb\t0000000000000003\n")
        store = os.path.join(d, "s")
        if subprocess.run([simstore, "build", store, "--quiet", "--k", "0", fps],
                          capture_output=True).returncode != 0:
            return False
        r = subprocess.run([simstore, "pairs", store, "--k", "2"], capture_output=True, text=True)
        return r.returncode == 0 and r.stdout.startswith("a\tb\t2")


def run_simstore(simstore, corpus, workdir, method, threads, index_of):
    name, build_opts, pairs_opts, k = method[:4]
    pairs_k = method[4] if len(method) > 4 else k
    store = os.path.join(workdir, "store")
    out = os.path.join(workdir, "pairs.tsv")
    # k None: the defaults, no --k at all.
    build_k = ["--k", str(k)] if k is not None else []
    pairs_k = ["--k", str(pairs_k)] if pairs_k is not None else []
    seconds = run([simstore, "build", store, "--replace", "--quiet"] + build_k +
                  ["--threads", str(threads)] + build_opts + [corpus])
    both = "--both-sides" in pairs_opts
    pairs_opts = [o for o in pairs_opts if o != "--both-sides"]
    seconds += run([simstore, "pairs", store] + pairs_k + ["--threads", str(threads)]
                   + pairs_opts, out)
    reported = set()
    with open(out, encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            a, b = fields[0], fields[1]
            if both and min(int(fields[2]) / int(fields[3]),
                            int(fields[4]) / int(fields[5])) < 0.8:
                continue
            # Paragraph ids ID#N stand for their document.
            a, b = (re.sub(r"#\d+$", "", x) if "#" in x and x not in index_of else x
                    for x in (a, b))
            i, j = index_of[a], index_of[b]
            if i != j:
                reported.add((min(i, j), max(i, j)))
    return reported, seconds


def lsh_params(threshold, permutations, weights=(0.5, 0.5)):
    """datasketch's _optimal_param: the bands b and rows r (b r <= n) that
    minimise the weighted areas of false positives below the threshold and
    false negatives above it under P(candidate | s) = 1 - (1 - s^r)^b."""
    def area(lo, hi, f, steps=400):
        step = (hi - lo) / steps
        return sum(f(lo + (i + 0.5) * step) for i in range(steps)) * step
    best = None
    for b in range(1, permutations + 1):
        for r in range(1, permutations // b + 1):
            fp = area(0.0, threshold, lambda s: 1 - (1 - s ** r) ** b)
            fn = area(threshold, 1.0, lambda s: (1 - s ** r) ** b)
            err = weights[0] * fp + weights[1] * fn
            if best is None or err < best[0]:
                best = (err, b, r)
    return best[1], best[2]


def read_signatures(path, count, permutations):
    sigs = []
    with open(path, "rb") as f:
        for _ in range(count):
            a = array.array("Q")
            a.frombytes(f.read(8 * permutations))
            if sys.byteorder != "little":
                a.byteswap()
            sigs.append(a)
    return sigs


def pairs_sharing_keys(bands):
    """Every pair (i, j), i < j, of documents that have the same key in one
    band at least: `bands` yields, per band, the list of the documents' keys."""
    candidates = set()
    for keys in bands:
        buckets = defaultdict(list)
        for i, key in enumerate(keys):
            buckets[key].append(i)
        for members in buckets.values():
            for x in range(len(members)):
                for y in range(x + 1, len(members)):
                    candidates.add((members[x], members[y]))
    return candidates


def lsh_candidates(sigs, bands, rows):
    """MinHash LSH: pairs whose signatures agree on all rows of a band."""
    return pairs_sharing_keys([s[b * rows:(b + 1) * rows].tobytes() for s in sigs]
                              for b in range(bands))


def minhash_lsh(sigs, threshold, bands, rows):
    """Candidates sharing a band, kept when the estimated Jaccard (the share of
    equal minima) reaches the threshold."""
    candidates = lsh_candidates(sigs, bands, rows)
    n = len(sigs[0]) if sigs else PERMUTATIONS
    need = threshold * n - 1e-9
    return {(i, j) for i, j in candidates
            if sum(1 for u, v in zip(sigs[i], sigs[j]) if u == v) >= need}


# --- Evaluation ----------------------------------------------------------------------
def evaluate(truth, sets, reported):
    by_band = Counter(band_of(*iu) for iu in truth.values())
    found = Counter(band_of(*truth[p]) for p in reported if p in truth)
    good_target = sum(1 for p in reported if p in truth and
                      truth[p][0] >= TARGET * truth[p][1] - 1e-9)
    truth_target = sum(c for name, c in by_band.items() if name in ("1.0", "0.95-1", "0.9-0.95"))
    found_target = sum(c for name, c in found.items() if name in ("1.0", "0.95-1", "0.9-0.95"))
    wrong = [p for p in reported if p not in truth]
    wrong_j = sorted(exact_jaccard(sets, i, j)[0] / max(1, exact_jaccard(sets, i, j)[1])
                     for i, j in wrong)
    r = {
        "reported": len(reported),
        "bands": {name: {"truth": by_band[name], "found": found[name],
                         "recall": found[name] / by_band[name] if by_band[name] else None}
                  for name, _, _ in BANDS},
        "recall_target": found_target / truth_target if truth_target else None,
        "precision_target": good_target / len(reported) if reported else None,
        "precision_floor": (len(reported) - len(wrong)) / len(reported) if reported else None,
        "below_floor": len(wrong),
        "below_floor_median_j": wrong_j[len(wrong_j) // 2] if wrong_j else None,
    }
    return r


def planted(docs_tsv, index_of):
    """(edited copy, source, kind, params) of every generated edit."""
    out = []
    with open(docs_tsv, encoding="utf-8") as f:
        next(f)
        for line in f:
            eid, src, kind, params, _ = line.rstrip("\n").split("\t")
            if src != "-":
                out.append((index_of[eid], index_of[src], kind, params))
    return out


def fmt(x, digits=3):
    return "–" if x is None else f"{x:.{digits}f}"


def corpus_report(name, res):
    lines = [f"### {name}: {res['documents']} documents, {res['truth_pairs']} pairs with J ≥ "
             f"{FLOOR} ({', '.join(f'{b} {c}' for b, c in res['truth_bands'].items())})", "",
             "| method | J = 1.0 | 0.95–1 | 0.9–0.95 | 0.8–0.9 | recall J ≥ 0.9 | precision "
             "(J ≥ 0.9) | precision (J ≥ 0.8) | pairs | seconds |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for m in res["methods"]:
        e = m["eval"]
        cells = [fmt(e["bands"][b]["recall"]) for b, _, _ in BANDS]
        lines.append(f"| {m['name']} | " + " | ".join(cells) +
                     f" | {fmt(e['recall_target'])} | {fmt(e['precision_target'])} | "
                     f"{fmt(e['precision_floor'])} | {e['reported']} | {m['seconds']:.1f} |")
    return lines


def readme_table(results):
    """One table for the README: every method but fingerprint version 1 above
    k = 3, per corpus."""
    lines = ["| corpus | method | J = 1.0 | 0.95–1 | 0.9–0.95 | 0.8–0.9 | recall J ≥ 0.9 | "
             "precision (J ≥ 0.9) | precision (J ≥ 0.8) | seconds |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, res in results["corpora"].items():
        for m in res["methods"]:
            if m["name"].startswith("simstore v1") and m["name"] != "simstore v1 k=3":
                continue
            e = m["eval"]
            cells = [fmt(e["bands"][b]["recall"], 2) for b, _, _ in BANDS]
            lines.append(f"| {name} | {m['name']} | " + " | ".join(cells) +
                         f" | {fmt(e['recall_target'], 2)} | {fmt(e['precision_target'], 2)} | "
                         f"{fmt(e['precision_floor'], 2)} | {m['seconds']:.1f} |")
    return lines


def readme_edits_table(results, ours="simstore defaults"):
    """Planted pairs with J >= 0.9 by edit, per corpus: the recall of the
    default settings beside the MinHash baseline at t = 0.8."""
    names = list(results["corpora"])
    baseline = next(m["name"] for m in next(iter(results["corpora"].values()))["methods"]
                    if m["name"].startswith(f"MinHash LSH t={MINHASH_THRESHOLDS[0]}"))
    lines = ["| edit | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    kinds = sorted({k for res in results["corpora"].values() for k in res["edits"]})
    for kind in kinds:
        cells = []
        for name in names:
            row = results["corpora"][name]["edits"].get(kind)
            if not row or not row["target"]:
                cells.append("–")
                continue
            cells.append(f"{fmt(row['recall'][ours], 2)} / {fmt(row['recall'][baseline], 2)} "
                         f"({row['target']})")
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    return lines


def edits_report(name, res, methods):
    lines = [f"#### {name}: planted pairs by edit (recall among those with J ≥ {TARGET})", "",
             "| edit | pairs | median J | J ≥ 0.9 | " + " | ".join(methods) + " |",
             "|---|---|---|---|" + "---|" * len(methods)]
    for kind, row in sorted(res["edits"].items()):
        cells = [fmt(row["recall"].get(m)) for m in methods]
        lines.append(f"| {kind} | {row['pairs']} | {fmt(row['median_j'])} | {row['target']} | "
                     + " | ".join(cells) + " |")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpusdir")
    ap.add_argument("outdir")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--build", default=os.path.join(here, "..", "..", "build"),
                    help="the build directory holding simstore and bench/quality_features")
    ap.add_argument("--only", default="licenses,chinese,web,short")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1, help="the MinHash permutations' seed")
    a = ap.parse_args()
    simstore = os.path.join(a.build, "simstore")
    features_tool = os.path.join(a.build, "bench", "quality_features")
    for tool in (simstore, features_tool):
        if not os.access(tool, os.X_OK):
            sys.exit(f"quality.py: {tool} is missing: build the tree first")
    os.makedirs(a.outdir, exist_ok=True)
    work = os.path.join(a.outdir, "work")
    os.makedirs(work, exist_ok=True)
    version = subprocess.run([simstore, "--version"], capture_output=True, text=True).stdout
    methods = simstore_methods(simstore)
    commit = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    results = {"simstore": version.strip(), "commit": commit or None,
               "date": time.strftime("%Y-%m-%d"), "floor": FLOOR, "target": TARGET,
               "permutations": PERMUTATIONS, "corpora": {}}
    manifest = os.path.join(a.corpusdir, "manifest.json")
    if os.path.exists(manifest):
        with open(manifest) as f:
            results["manifest"] = json.load(f)
    report = []
    edit_rows = []
    for name in a.only.split(","):
        corpus = os.path.join(a.corpusdir, f"{name}.jsonl")
        ids = read_ids(corpus)
        index_of = {x: i for i, x in enumerate(ids)}
        t0 = time.monotonic()
        feat_path = os.path.join(work, f"{name}.features")
        run([features_tool, "--features", feat_path, corpus])
        feats = read_features(feat_path, len(ids))
        truth, sets = jaccard_pairs(feats)
        del feats
        truth_seconds = time.monotonic() - t0
        res = {"documents": len(ids), "truth_pairs": len(truth), "truth_seconds": truth_seconds,
               "truth_bands": dict(Counter(band_of(*v) for v in truth.values())),
               "methods": []}
        print(f"quality.py: {name}: {len(ids)} documents, {len(truth)} true pairs "
              f"({truth_seconds:.1f} s)", file=sys.stderr)
        found_by = {}
        for m in methods:
            reported, seconds = run_simstore(simstore, corpus, work, m, a.threads, index_of)
            res["methods"].append({"name": m[0], "seconds": seconds,
                                   "eval": evaluate(truth, sets, reported)})
            found_by[m[0]] = reported
            print(f"quality.py: {name}: {m[0]}: {len(reported)} pairs, {seconds:.1f} s",
                  file=sys.stderr)
        sig_path = os.path.join(work, f"{name}.signatures")
        sig_seconds = run([features_tool, "--minhash", str(PERMUTATIONS), "--signatures",
                           sig_path, "--seed", str(a.seed), corpus])
        sigs = read_signatures(sig_path, len(ids), PERMUTATIONS)
        for t in MINHASH_THRESHOLDS:
            bands, rows = lsh_params(t, PERMUTATIONS)
            start = time.monotonic()
            reported = minhash_lsh(sigs, t, bands, rows)
            seconds = sig_seconds + time.monotonic() - start
            mname = f"MinHash LSH t={t} (b={bands}, r={rows})"
            res["methods"].append({"name": mname, "seconds": seconds,
                                   "eval": evaluate(truth, sets, reported)})
            found_by[mname] = reported
            print(f"quality.py: {name}: {mname}: {len(reported)} pairs, {seconds:.1f} s",
                  file=sys.stderr)
        del sigs
        # Planted pairs by edit kind.
        kinds = defaultdict(list)
        for e, s, kind, params in planted(os.path.join(a.corpusdir, f"{name}.docs.tsv"),
                                          index_of):
            p = (min(e, s), max(e, s))
            inter, union = truth.get(p) or exact_jaccard(sets, *p)
            kinds[kind].append((p, inter / union, params))
        res["edits"] = {}
        for kind, pairs in kinds.items():
            js = sorted(j for _, j, _ in pairs)
            target = [p for p, j, _ in pairs if j >= TARGET - 1e-9]
            res["edits"][kind] = {
                "pairs": len(pairs), "median_j": js[len(js) // 2], "target": len(target),
                "recall": {mn: (sum(1 for p in target if p in rep) / len(target)
                                if target else None) for mn, rep in found_by.items()}}
            for p, j, params in pairs:
                edit_rows.append((name, ids[p[0]], ids[p[1]], kind, params, f"{j:.4f}",
                                  ",".join(mn for mn, rep in found_by.items() if p in rep)))
        results["corpora"][name] = res
        report += corpus_report(name, res) + [""]
        del truth, sets
    headline = ["simstore defaults", "simstore v2 k=3", "simstore v2 k=7", "simstore v1 k=3"] + \
        [m["name"] for m in next(iter(results["corpora"].values()))["methods"]
         if m["name"].startswith("MinHash")]
    for name, res in results["corpora"].items():
        report += edits_report(name, res, headline) + [""]
    with open(os.path.join(a.outdir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(a.outdir, "results.tsv"), "w") as f:
        f.write("corpus\tmethod\tband\ttruth_pairs\tfound\trecall\tseconds\n")
        for name, res in results["corpora"].items():
            for m in res["methods"]:
                e = m["eval"]
                for b, _, _ in BANDS:
                    x = e["bands"][b]
                    f.write(f"{name}\t{m['name']}\t{b}\t{x['truth']}\t{x['found']}\t"
                            f"{fmt(x['recall'], 4)}\t{m['seconds']:.2f}\n")
                f.write(f"{name}\t{m['name']}\tJ>=0.9\t\t\t{fmt(e['recall_target'], 4)}\t"
                        f"{m['seconds']:.2f}\n")
                f.write(f"{name}\t{m['name']}\tprecision(J>=0.9)\t{e['reported']}\t\t"
                        f"{fmt(e['precision_target'], 4)}\t{m['seconds']:.2f}\n")
                f.write(f"{name}\t{m['name']}\tprecision(J>=0.8)\t{e['reported']}\t\t"
                        f"{fmt(e['precision_floor'], 4)}\t{m['seconds']:.2f}\n")
    with open(os.path.join(a.outdir, "edits.tsv"), "w") as f:
        f.write("corpus\tdoc_a\tdoc_b\tedit\tparams\tjaccard\tfound_by\n")
        for row in edit_rows:
            f.write("\t".join(row) + "\n")
    with open(os.path.join(a.outdir, "report.md"), "w") as f:
        f.write("\n".join(report) + "\n")
    with open(os.path.join(a.outdir, "readme.md"), "w") as f:
        f.write("\n".join(readme_table(results)) + "\n\n")
        f.write("\n".join(readme_edits_table(results)) + "\n")
    print("\n".join(report))


if __name__ == "__main__":
    main()
