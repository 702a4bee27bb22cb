/* cmd_dedup.c: `simstore dedup`: streaming near-duplicate removal from JSON
 * Lines. The ingest pipeline (ingest.c) parses and fingerprints records on
 * every core and, with --store, asks the store about each record on the
 * worker that parsed it; this thread then takes the records in input order
 * and keeps or drops each against the kept records (simstore_memindex, and
 * their sketches beside it with --min-similarity, indexed by their bands in
 * a simstore_bandindex when the rule has bands; with --paragraphs, an index
 * of the kept records' paragraphs) and the store's answer.
 * Kept records pass through to stdout byte for byte; with --add they go
 * into the store in one commit at the end. */
#include "boilerplate.h"
#include "cli.h"
#include "commands.h"
#include "idcheck.h"
#include "optcheck.h"
#include "ingest.h"
#include "progress.h"
#include "textopts.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const CMD = "dedup";

#define MAX_WORKERS 64 /* ingest.c's thread limit */
#define MAX_REPORTED 20
#define BOILERPLATE_MEMORY ((uint64_t)256 << 20) /* the first pass's counts */

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: simstore dedup [OPTIONS] INPUT...\n"
            "\n"
            "Read JSON Lines documents from the INPUT files ('-' is standard input;\n"
            "gzip and zstd are read as they are), fingerprint them on all cores and\n"
            "write to stdout, in input order, every record that is not a near-duplicate\n"
            "of an earlier kept record or of a document in STORE.\n"
            "\n"
            "The rule: records are taken in input order; a record is dropped when its\n"
            "fingerprint is within K of a record KEPT before it or of a document in\n"
            "STORE, or (with bands: --bands) its sketch agrees with a kept record's on\n"
            "every bit of one band, and, with --min-similarity J, their estimated\n"
            "similarity is at least J; otherwise it is kept (written to stdout).\n"
            "Because only kept records are remembered, memory grows with the kept\n"
            "ones. This is the library's one near-duplicate rule (simstore.h, \"The\n"
            "near-duplicate rule\"), with its defaults: J 0.9 with bands and K 3 (K 7\n"
            "without bands) unless STORE keeps no sketches; `pairs`, `clusters`, the\n"
            "server's insert-if-new\n"
            "and Python's insert_if_new() judge by it too, so they keep the same\n"
            "documents. Those answering one document at a time against a store (the\n"
            "server, insert_if_new(), and dedup with STORE) judge without bands.\n"
            "\n"
            "Kept records are written byte for byte as read (key order, spacing,\n"
            "unknown members and a CR before the newline kept); a last line without a\n"
            "newline gets one; blank lines and a byte order mark are not records.\n"
            "\n"
            "      --k K            the distance, 0..7 (default: 3; 7 with the\n"
            "                       similarity filter without bands: --bands off or\n"
            "                       --store; with --store and no filter the store's k;\n"
            "                       above the store's k it is probed more)\n"
            "      --store STORE    also drop records within K of a document of STORE;\n"
            "                       texts are fingerprinted with the store's text\n"
            "                       options, except for the text options given\n"
            "      --add            add the kept records to STORE (id, fingerprint and\n"
            "                       metadata as `build` stores them) in one commit when\n"
            "                       the whole run succeeds; nothing is added otherwise\n"
            "      --min-similarity J\n"
            "                       drop a record only for a kept record or stored\n"
            "                       document (within K, or sharing a band) whose\n"
            "                       estimated Jaccard similarity\n"
            "                       (format/sketch.md) is at least J, 0..1 (0: no\n"
            "                       filter). Default: 0.9 when --k is not given (the\n"
            "                       near-duplicate setting: README, \"Similarity\"),\n"
            "                       unless STORE keeps no sketches. Every record is\n"
            "                       sketched (as STORE's documents are, which STORE must\n"
            "                       keep; without STORE,\n"
            "                       with --sketch, default %s) and the kept records'\n"
            "                       sketches are held in memory. Pairs with a large K\n"
            "                       (4..7) and J near 0.9: the large K finds the\n"
            "                       candidates, J keeps the near ones\n"
            "      --sketch minhash16|minhash32|minhash64|minhash128|minhash256\n"
            "                       without STORE, the sketch of --min-similarity and\n"
            "                       --similarity: more bytes, a closer estimate\n"
            "                       (README, \"Similarity\"; default %s, the near-\n"
            "                       duplicate setting's)\n"
            "      --bands on|off   candidates also from the sketches' LSH bands\n"
            "                       (format/sketch.md 6.2): a kept record whose sketch\n"
            "                       agrees with the record's on every bit of one band is\n"
            "                       judged by J at any distance; the bands' shape derives\n"
            "                       from J (-v reports it). Default: on when J is 0.5 or\n"
            "                       more, without STORE. With STORE the whole run is\n"
            "                       without bands (the store keeps no band index and is\n"
            "                       asked within K; the kept records are judged by the\n"
            "                       same rule), so --bands on is refused with it\n",
            simstore_sketch_name(SIMSTORE_SKETCH_DEFAULT),
            simstore_sketch_name(SIMSTORE_SKETCH_DEFAULT));
    fprintf(out,
            "      --removed FILE   write ID<TAB>KEPT_ID<TAB>DISTANCE for every dropped\n"
            "                       record: KEPT_ID is the nearest kept record or stored\n"
            "                       document that drops it (smallest distance; ties:\n"
            "                       STORE documents first, by id byte order, then kept\n"
            "                       records in input order)\n"
            "      --similarity     add a fourth column to --removed: the estimated\n"
            "                       similarity of the record and KEPT_ID\n"
            "      --paragraphs     judge records by their paragraphs instead (partial\n"
            "                       copies): a record is dropped when at least F of its\n"
            "                       paragraphs (as `query --paragraphs` counts them)\n"
            "                       have a paragraph within K in one kept record or\n"
            "                       STORE document (STORE built with --paragraphs).\n"
            "                       KEPT_ID is the one covering most of its paragraphs\n"
            "                       (ties: STORE documents first, by id, then kept\n"
            "                       records in input order), and --removed gets\n"
            "                       ID<TAB>KEPT_ID<TAB>SHARED<TAB>OF<TAB>FRACTION. A record\n"
            "                       without a paragraph of the minimum length is kept\n"
            "      --min-fraction F with --paragraphs, 0..1 (default %.1f); a record\n"
            "                       is dropped only for SHARED > 0 and SHARED/OF >= F\n"
            "      --paragraph-min-words N\n"
            "                       without --store: paragraphs of at least N words\n"
            "                       count, 1..%u (default %u; with --store, the store's)\n"
            "      --threads N      parsing and fingerprinting threads (default: all\n"
            "                       cores); the output does not depend on it\n"
            "  -v, --verbose        report the rule (K, J, bands), records read, kept and\n"
            "                       dropped, the memory of the kept records' index (its\n"
            "                       bands included), time and peak memory on stderr\n"
            "\n"
            "JSON Lines records (members other than these are ignored):\n" INPUT_FIELD_HELP "\n",
            SIMSTORE_NEAR_FRACTION, SIMSTORE_PARAGRAPH_MIN_WORDS_MAX,
            SIMSTORE_PARAGRAPH_MIN_WORDS_DEFAULT);
    fprintf(out,
            "Fingerprints of the texts:\n" TEXTOPT_HELP "\n"
            "Boilerplate (site templates: README, \"Boilerplate\"): with --store, the\n"
            "store's boilerplate lines are removed from every text; without, these\n"
            "find them first (256 MiB for the counts, spilled to $TMPDIR beyond):\n" BOILER_HELP
            "\n"
            "  -h, --help           show this help\n"
            "\n"
            "Errors: a malformed record, a record without text, an id given to an\n"
            "earlier kept record or already in STORE are reported as FILE:LINE: what;\n"
            "the record is not written, the run goes on to report more, exits 1 and\n"
            "adds nothing. Ids of dropped records are checked at the end of the run\n"
            "(spilled to $TMPDIR): a repeat is reported the same way, after the kept\n"
            "records were written. A record that is nothing but boilerplate is\n"
            "reported as a warning and judged by the fingerprint of its whole text.\n"
            "Exit status: 0 success, 1 failure, 2 usage error.\n");
}

enum { OPT_K = 1, OPT_STORE, OPT_ADD, OPT_REMOVED, OPT_THREADS };
enum { OPT_MIN_SIMILARITY = OPT_THREADS + 1, OPT_SIMILARITY };
enum { OPT_PARAGRAPHS = OPT_SIMILARITY + 1, OPT_MIN_FRACTION, OPT_PARA_MIN, OPT_SKETCH };
enum { OPT_BANDS = OPT_SKETCH + 1 };

/* ---- the kept records' ids: an arena and an open-addressing set --------- */

typedef struct kept_ids {
    char *bytes;
    size_t bytes_len, bytes_cap;
    uint64_t *offs; /* by kept ordinal: offset << 16 | length */
    size_t n, offs_cap;
    uint32_t *slots; /* ordinal + 1; 0 = empty */
    size_t nslots;   /* a power of two, at least 2 n */
} kept_ids;

static uint64_t id_hash(const char *id, size_t len)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)id[i]) * UINT64_C(0x100000001b3);
    return h ^ (h >> 29);
}

static const char *kept_id(const kept_ids *k, size_t ordinal, size_t *len)
{
    *len = (size_t)(k->offs[ordinal] & 0xFFFF);
    return k->bytes + (k->offs[ordinal] >> 16);
}

/* The slot holding id, or the empty slot where it would go. */
static size_t kept_slot(const kept_ids *k, const char *id, size_t len)
{
    size_t mask = k->nslots - 1, i = (size_t)id_hash(id, len) & mask;
    for (;; i = (i + 1) & mask) {
        if (!k->slots[i])
            return i;
        size_t n;
        const char *s = kept_id(k, k->slots[i] - 1, &n);
        if (n == len && memcmp(s, id, len) == 0)
            return i;
    }
}

static int kept_contains(const kept_ids *k, const char *id, size_t len)
{
    return k->nslots && k->slots[kept_slot(k, id, len)] != 0;
}

static int kept_grow_slots(kept_ids *k)
{
    size_t n = k->nslots ? k->nslots * 2 : 1024;
    uint32_t *old = k->slots;
    size_t old_n = k->nslots;
    k->slots = calloc(n, sizeof *k->slots);
    if (!k->slots) {
        k->slots = old;
        return -1;
    }
    k->nslots = n;
    for (size_t i = 0; i < old_n; i++)
        if (old[i]) {
            size_t len;
            const char *s = kept_id(k, old[i] - 1, &len);
            k->slots[kept_slot(k, s, len)] = old[i];
        }
    free(old);
    return 0;
}

static int kept_add(kept_ids *k, const char *id, size_t len)
{
    if (k->n >= UINT32_MAX - 1)
        return -1;
    if (2 * (k->n + 1) > k->nslots && kept_grow_slots(k))
        return -1;
    if (cli_grow((void **)&k->offs, &k->offs_cap, k->n + 1, sizeof *k->offs, 1024) ||
        cli_grow((void **)&k->bytes, &k->bytes_cap, k->bytes_len + len, 1, 65536))
        return -1;
    memcpy(k->bytes + k->bytes_len, id, len);
    k->offs[k->n] = (uint64_t)k->bytes_len << 16 | len;
    k->bytes_len += len;
    k->slots[kept_slot(k, id, len)] = (uint32_t)(k->n + 1);
    k->n++;
    return 0;
}

static uint64_t kept_bytes(const kept_ids *k)
{
    return k->bytes_cap + k->offs_cap * sizeof *k->offs + k->nslots * sizeof *k->slots;
}

static void kept_free(kept_ids *k)
{
    free(k->bytes);
    free(k->offs);
    free(k->slots);
}

/* ---- the run ------------------------------------------------------------- */

/* What a worker notes about a record (ingest_note.flags). */
#define NOTE_NEAR_STORED 1u /* value: distance; text: the nearest document's id */
#define NOTE_ID_STORED 2u   /* the record's id is already in STORE */

typedef struct dedup_run {
    simstore_near_rule rule;     /* --k, --min-similarity, --min-fraction: resolved
                                    (simstore_near_rule_resolve) for STORE, or
                                    without one for a store `build` would make */
    int print_similarity;        /* --similarity */
    simstore_sketch_kind sketch; /* of every record's sketch (none: no sketches) */
    size_t sketch_bytes;         /* of the kept records' sketches (0: not kept) */
    uint8_t *kept_sketches;      /* by kept ordinal */
    size_t kept_sketches_cap;
    simstore *store;
    const char *store_path;
    simstore_query *queries[MAX_WORKERS]; /* one per worker, made on first use */
    simstore_memindex *index;
    /* The rule's bands (rule.band_count > 0): the kept records' sketches
     * by band (values: kept ordinals) and their fingerprints by ordinal. */
    simstore_bandindex *bands;
    uint64_t *kept_fps;
    size_t kept_fps_cap;
    kept_ids ids;
    idcheck *dropped_ids; /* checked for repeats at the end */
    /* --paragraphs: the kept records' paragraphs (values: kept ordinals),
     * and per kept ordinal the record being judged's count of paragraphs
     * it covers and the last of them counted (paragraph number + 1). */
    int paragraphs;
    simstore_memindex *para_index;
    uint32_t *para_shared, *para_last;
    size_t para_cap;
    uint64_t *touched; /* the ordinals with para_shared > 0 */
    size_t ntouched, touched_cap;
    simstore_builder *builder;
    FILE *removed;
    const char *removed_path;
    unsigned long long read, kept, dropped, dropped_by_store, errors;
    int failed; /* writing --removed or the builder failed */
} dedup_run;

/* --paragraphs, on a worker: the stored document covering most of the
 * record's paragraphs (ties: the smallest id), as NOTE_NEAR_STORED with
 * value = SHARED. */
static int note_store_paragraphs(const dedup_run *run, simstore_query *q, const uint64_t *paras,
                                 size_t nparas, ingest_note *out)
{
    if (!nparas)
        return 0;
    const simstore_paragraph_match *m;
    size_t n;
    int rc =
        simstore_query_paragraphs(q, paras, nparas, run->rule.k, run->rule.min_fraction, &m, &n);
    if (rc || !n)
        return rc;
    out->flags |= NOTE_NEAR_STORED;
    out->value = m[0].shared;
    out->text = m[0].id;
    out->text_len = m[0].id_len;
    out->number = m[0].fraction;
    return 0;
}

/* On worker `worker`: the nearest stored document (with --min-similarity:
 * the nearest of those similar enough) and whether the id is stored. The
 * store does not change during the run. */
static int note_store(void *ctx, unsigned worker, const simstore_doc *doc, ingest_note *out)
{
    dedup_run *run = (dedup_run *)ctx;
    if (worker >= MAX_WORKERS)
        return SIMSTORE_EINVAL;
    simstore_query **q = &run->queries[worker];
    if (!*q) {
        int rc = simstore_query_new(run->store, 0, q);
        if (rc)
            return rc;
    }
    int has = simstore_query_has_id(*q, doc->id, doc->id_len, NULL);
    if (has < 0)
        return has;
    out->flags = has ? NOTE_ID_STORED : 0;
    if (run->paragraphs)
        return note_store_paragraphs(run, *q, doc->paragraphs, doc->n_paragraphs, out);
    const simstore_match *m;
    size_t n;
    int rc = simstore_query_fp_sketch(*q, doc->fp, doc->sketch, run->rule.k, &m, &n);
    if (rc)
        return rc;
    /* Sorted by distance, then id bytes: the first the rule passes is the
     * nearest. */
    for (size_t i = 0; i < n; i++) {
        if (!simstore_near_duplicate(&run->rule, m[i].distance, m[i].similarity))
            continue;
        out->flags |= NOTE_NEAR_STORED;
        out->value = m[i].distance;
        out->text = m[i].id;
        out->text_len = m[i].id_len;
        out->number = m[i].similarity;
        break;
    }
    return 0;
}

/* "FILE:LINE: document id 'ID' <what>"; the record is not written. */
static void record_error(dedup_run *run, const ingest_record *r, const char *what)
{
    run->errors++;
    if (run->errors > MAX_REPORTED)
        return;
    char esc[CLI_ESCAPED_ID_BYTES];
    fprintf(stderr, "simstore %s: %s:%llu: document id '%s' %s\n", CMD, r->file, r->line_number,
            cli_escape(r->doc.id, r->doc.id_len, esc, sizeof esc), what);
}

static int write_removed(dedup_run *run, const ingest_record *r, const char *kept, size_t kept_len,
                         unsigned distance, double similarity)
{
    if (!run->removed)
        return 0;
    char sim[32];
    cli_format_similarity(similarity, 0, sim);
    if (fwrite(r->doc.id, 1, r->doc.id_len, run->removed) != r->doc.id_len ||
        putc('\t', run->removed) == EOF || fwrite(kept, 1, kept_len, run->removed) != kept_len ||
        fprintf(run->removed, "\t%u", distance) < 0 ||
        (run->print_similarity && fprintf(run->removed, "\t%s", sim) < 0) ||
        putc('\n', run->removed) == EOF) {
        run->failed = 1;
        return SIMSTORE_EIO;
    }
    return 0;
}

/* --removed with --paragraphs: ID KEPT_ID SHARED OF FRACTION, FRACTION as
 * `query --paragraphs` prints it. */
static int write_removed_paragraphs(dedup_run *run, const ingest_record *r, const char *kept,
                                    size_t kept_len, uint64_t shared)
{
    if (!run->removed)
        return 0;
    size_t of = r->doc.n_paragraphs;
    if (fwrite(r->doc.id, 1, r->doc.id_len, run->removed) != r->doc.id_len ||
        putc('\t', run->removed) == EOF || fwrite(kept, 1, kept_len, run->removed) != kept_len ||
        fprintf(run->removed, "\t%llu\t%zu\t%.4f\n", (unsigned long long)shared, of,
                (double)shared / (double)of) < 0) {
        run->failed = 1;
        return SIMSTORE_EIO;
    }
    return 0;
}

static const uint8_t *kept_sketch(const dedup_run *run, uint64_t ordinal)
{
    return run->kept_sketches + (size_t)ordinal * run->sketch_bytes;
}

/* With --min-similarity: the nearest kept record the rule makes the record
 * a near-duplicate of (within k, or sharing a band, and similar enough;
 * ties: the earliest kept), as simstore_memindex_nearest() chooses among
 * all. */
typedef struct near_similar {
    const dedup_run *run;
    const uint8_t *sketch;
    int found;
    simstore_memindex_match best;
    double similarity;
} near_similar;

static int consider_kept(void *ctx, uint64_t fp, uint64_t value, unsigned distance)
{
    near_similar *n = (near_similar *)ctx;
    if (n->found &&
        (distance > n->best.distance || (distance == n->best.distance && value > n->best.value)))
        return 0;
    double sim;
    if (!simstore_near_duplicate_sketches(&n->run->rule, n->run->sketch, distance, n->sketch,
                                          kept_sketch(n->run, value), &sim))
        return 0;
    n->found = 1;
    n->best.fp = fp;
    n->best.value = value;
    n->best.distance = distance;
    n->similarity = sim;
    return 0;
}

/* A kept record sharing a band with the record (the band index's answer):
 * one more candidate when it is beyond k (those within k came from the
 * fingerprints' index). */
typedef struct near_band {
    near_similar *near;
    uint64_t fp;
} near_band;

static int consider_band(void *ctx, uint64_t value)
{
    const near_band *b = (const near_band *)ctx;
    const dedup_run *run = b->near->run;
    uint64_t fp = run->kept_fps[value];
    unsigned distance = simstore_distance(fp, b->fp);
    return distance > run->rule.k ? consider_kept(b->near, fp, value, distance) : 0;
}

/* --paragraphs: one answer of the kept paragraphs' index for paragraph
 * number run->para_current of the record: its kept record covers it (once,
 * however many of its paragraphs are near). */
typedef struct para_count {
    dedup_run *run;
    uint32_t paragraph; /* number + 1 */
} para_count;

static int count_kept_paragraph(void *ctx, uint64_t fp, uint64_t value, unsigned distance)
{
    (void)fp;
    (void)distance;
    para_count *c = (para_count *)ctx;
    dedup_run *run = c->run;
    if (run->para_last[value] == c->paragraph)
        return 0;
    run->para_last[value] = c->paragraph;
    if (run->para_shared[value]++ == 0)
        run->touched[run->ntouched++] = value;
    return 0;
}

/* --paragraphs: the kept record covering most of r's paragraphs (ties: the
 * earliest) into *ordinal and its count into *shared; 0 when none covers
 * any. */
static int kept_paragraphs_best(dedup_run *run, const ingest_record *r, uint64_t *ordinal,
                                uint64_t *shared)
{
    *shared = 0;
    run->ntouched = 0;
    if (r->doc.n_paragraphs > UINT32_MAX - 1)
        return SIMSTORE_EINVAL;
    for (size_t i = 0; i < r->doc.n_paragraphs; i++) {
        para_count c = {run, (uint32_t)(i + 1)};
        int rc = simstore_memindex_query(run->para_index, r->doc.paragraphs[i], run->rule.k,
                                         count_kept_paragraph, &c);
        if (rc)
            return rc;
    }
    for (size_t i = 0; i < run->ntouched; i++) {
        uint64_t o = run->touched[i];
        if (run->para_shared[o] > *shared || (run->para_shared[o] == *shared && o < *ordinal)) {
            *shared = run->para_shared[o];
            *ordinal = o;
        }
        run->para_shared[o] = 0;
        run->para_last[o] = 0;
    }
    return 0;
}

/* --paragraphs: room for the next kept record's counters, and its
 * paragraphs in the index. */
static int keep_paragraphs(dedup_run *run, const ingest_record *r, uint64_t ordinal)
{
    if (ordinal >= run->para_cap) {
        size_t cap = run->para_cap, want = (size_t)ordinal + 1;
        if (cli_grow((void **)&run->para_shared, &cap, want, sizeof *run->para_shared, 1024))
            return SIMSTORE_ENOMEM;
        cap = run->para_cap;
        if (cli_grow((void **)&run->para_last, &cap, want, sizeof *run->para_last, 1024))
            return SIMSTORE_ENOMEM;
        size_t tcap = run->para_cap;
        if (cli_grow((void **)&run->touched, &tcap, want, sizeof *run->touched, 1024))
            return SIMSTORE_ENOMEM;
        memset(run->para_shared + run->para_cap, 0,
               (cap - run->para_cap) * sizeof *run->para_shared);
        memset(run->para_last + run->para_cap, 0, (cap - run->para_cap) * sizeof *run->para_last);
        run->para_cap = cap;
    }
    for (size_t i = 0; i < r->doc.n_paragraphs; i++) {
        int rc = simstore_memindex_add(run->para_index, r->doc.paragraphs[i], ordinal);
        if (rc)
            return rc;
    }
    return 0;
}

static int keep_record(dedup_run *run, const ingest_record *r)
{
    if (run->sketch_bytes) {
        /* Room first: the sketch goes in at the ordinal memindex_add gives. */
        if (cli_grow((void **)&run->kept_sketches, &run->kept_sketches_cap,
                     (run->ids.n + 1) * run->sketch_bytes, 1, 64 * run->sketch_bytes))
            return SIMSTORE_ENOMEM;
        memcpy(run->kept_sketches + run->ids.n * run->sketch_bytes, r->doc.sketch,
               run->sketch_bytes);
    }
    int rc = run->paragraphs ? keep_paragraphs(run, r, run->ids.n)
                             : simstore_memindex_add(run->index, r->doc.fp, run->ids.n);
    if (rc)
        return rc;
    if (run->bands) {
        if (cli_grow((void **)&run->kept_fps, &run->kept_fps_cap, run->ids.n + 1,
                     sizeof *run->kept_fps, 1024))
            return SIMSTORE_ENOMEM;
        run->kept_fps[run->ids.n] = r->doc.fp;
        if (r->doc.sketch &&
            (rc = simstore_bandindex_add(run->bands, r->doc.sketch, run->ids.n)) != 0)
            return rc;
    }
    if (kept_add(&run->ids, r->doc.id, r->doc.id_len))
        return SIMSTORE_ENOMEM;
    if (fwrite(r->line, 1, r->line_len, stdout) != r->line_len)
        return SIMSTORE_EIO;
    run->kept++;
    if (run->builder) {
        /* A store with a paragraph index gets the kept documents'
         * paragraphs too (ingest made them with the store's minimum). */
        rc = simstore_builder_add(run->builder, &r->doc);
        if (rc) {
            run->failed = 1;
            return rc;
        }
    }
    return 0;
}

/* A dropped record's id, kept to find repeats at the end. */
static int note_dropped(dedup_run *run, const ingest_record *r)
{
    run->dropped++;
    if (idcheck_add(run->dropped_ids, r->doc.id, r->doc.id_len, r->file, r->line_number)) {
        cli_error(CMD, "cannot keep dropped records' ids in $TMPDIR: %s", strerror(errno));
        run->failed = 1;
        return SIMSTORE_EIO;
    }
    return 0;
}

/* --paragraphs: drop r when a kept record or the store's best covers at
 * least the minimum fraction of its paragraphs (ties: the store). */
static int decide_paragraphs(dedup_run *run, const ingest_record *r)
{
    uint64_t ordinal = 0, shared = 0;
    int rc = r->doc.n_paragraphs ? kept_paragraphs_best(run, r, &ordinal, &shared) : 0;
    if (rc)
        return rc;
    /* The rule by paragraphs, as simstore_query_paragraphs() judges a
     * stored document. */
    if (shared && !simstore_near_duplicate_paragraphs(&run->rule, shared, r->doc.n_paragraphs))
        shared = 0;
    int by_store = (r->note.flags & NOTE_NEAR_STORED) != 0 && r->note.value >= shared;
    if (!by_store && !shared)
        return keep_record(run, r);
    if ((rc = note_dropped(run, r)) != 0)
        return rc;
    if (by_store) {
        run->dropped_by_store++;
        return write_removed_paragraphs(run, r, r->note.text, r->note.text_len, r->note.value);
    }
    size_t len;
    const char *id = kept_id(&run->ids, (size_t)ordinal, &len);
    return write_removed_paragraphs(run, r, id, len, shared);
}

/* One record, in input order: error, drop or keep. */
static int decide(void *ctx, const ingest_record *r)
{
    dedup_run *run = (dedup_run *)ctx;
    run->read++;
    if (r->note.flags & NOTE_ID_STORED) {
        record_error(run, r, "is already in STORE");
        return 0;
    }
    if (kept_contains(&run->ids, r->doc.id, r->doc.id_len)) {
        record_error(run, r, "was given before (to a kept record)");
        return 0;
    }
    if (run->paragraphs)
        return decide_paragraphs(run, r);
    simstore_memindex_match near;
    double near_similarity = SIMSTORE_SIMILARITY_UNKNOWN;
    int found;
    if (run->rule.min_similarity > 0) {
        near_similar ns = {run, r->doc.sketch, 0, {0, 0, 0}, SIMSTORE_SIMILARITY_UNKNOWN};
        found = simstore_memindex_query(run->index, r->doc.fp, run->rule.k, consider_kept, &ns);
        if (found == 0 && run->bands && r->doc.sketch) {
            near_band nb = {&ns, r->doc.fp};
            found = simstore_bandindex_query(run->bands, r->doc.sketch, consider_band, &nb);
        }
        if (found == 0) {
            found = ns.found;
            near = ns.best;
            near_similarity = ns.similarity;
        }
    } else {
        /* The rule by distance alone: the nearest within k. */
        found = simstore_memindex_nearest(run->index, r->doc.fp, run->rule.k, &near);
        if (found > 0 && run->sketch_bytes)
            near_similarity = simstore_sketch_similarity(run->sketch, r->doc.sketch,
                                                         kept_sketch(run, near.value));
    }
    if (found < 0)
        return found;
    int by_store = (r->note.flags & NOTE_NEAR_STORED) != 0;
    if (by_store && found && near.distance < r->note.value)
        by_store = 0; /* ties go to the store */
    if (!by_store && !found)
        return keep_record(run, r);
    int rc = note_dropped(run, r);
    if (rc)
        return rc;
    if (by_store) {
        run->dropped_by_store++;
        return write_removed(run, r, r->note.text, r->note.text_len, (unsigned)r->note.value,
                             r->note.number);
    }
    size_t len;
    const char *id = kept_id(&run->ids, (size_t)near.value, &len);
    return write_removed(run, r, id, len, near.distance, near_similarity);
}

static int id_is_kept(void *ctx, const char *id, size_t len)
{
    return kept_contains(&((dedup_run *)ctx)->ids, id, len);
}

static void report_repeat(void *ctx, const char *file, unsigned long long line, const char *id,
                          size_t len, const char *first_file, unsigned long long first_line)
{
    (void)ctx;
    char esc[CLI_ESCAPED_ID_BYTES];
    cli_escape(id, len, esc, sizeof esc);
    if (first_file)
        fprintf(stderr,
                "simstore %s: %s:%llu: document id '%s' was given before (to a dropped "
                "record, %s:%llu)\n",
                CMD, file, line, esc, first_file, first_line);
    else
        fprintf(stderr,
                "simstore %s: %s:%llu: document id '%s' (a dropped record) is also a kept "
                "record's\n",
                CMD, file, line, esc);
}

/* Dropped records whose id an earlier dropped record or any kept record
 * has: errors, reported in input order after those found on the way. */
static void check_dropped_ids(dedup_run *run)
{
    size_t room = run->errors < MAX_REPORTED ? (size_t)(MAX_REPORTED - run->errors) : 0;
    unsigned long long repeats = 0;
    if (idcheck_finish(run->dropped_ids, id_is_kept, run, report_repeat, run, room, &repeats)) {
        cli_error(CMD, "checking dropped records' ids in $TMPDIR: %s", strerror(errno));
        run->failed = 1;
    }
    run->errors += repeats;
}

/* The near-duplicate rule's parts not given, from what STORE is (or,
 * without one, what `build` would make: its default k, records sketched
 * with `sketch`): simstore_near_rule_resolve(), as every path resolves it;
 * with STORE without bands (SIMSTORE_NEAR_WITHOUT_BANDS: the store is asked
 * one record at a time, and the kept records are judged by the same rule).
 * Its refusal is reported with `what` (STORE, or the options). */
static int resolve_rule(dedup_run *run, unsigned store_k, simstore_sketch_kind sketch,
                        const char *what)
{
    unsigned flags = (run->paragraphs ? SIMSTORE_NEAR_BY_PARAGRAPHS : 0) |
                     (run->store_path ? SIMSTORE_NEAR_WITHOUT_BANDS : 0);
    int rc = simstore_near_rule_resolve(&run->rule, store_k, sketch, flags);
    return rc ? cli_api_error(CMD, rc, "%s", what) : 0;
}

static int open_store(dedup_run *run, int add, textopt_state *text)
{
    unsigned flags =
        add ? SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT : SIMSTORE_OPEN_READONLY;
    if (add) {
        int e = cli_apply_server_log(CMD, run->store_path);
        if (e)
            return e;
    }
    int rc = simstore_open(run->store_path, flags, &run->store);
    if (rc)
        return cli_api_error(CMD, rc, "%s", run->store_path);
    simstore_stats st;
    rc = simstore_get_stats(run->store, &st);
    if (rc)
        return cli_api_error(CMD, rc, "%s", run->store_path);
    if (st.fingerprint_only)
        return cli_error(CMD,
                         "%s keeps no documents (a fingerprint-only store): dedup needs "
                         "document ids",
                         run->store_path);
    if ((rc = resolve_rule(run, st.k, st.sketch, run->store_path)) != 0)
        return rc;
    if (text->given && add) {
        cli_usage_error(CMD, "--add stores fingerprints made with the store's text options: "
                             "give no text options with it");
        return CLI_EXIT_USAGE;
    }
    /* The store's options (its fingerprint version and sketch kind
     * included), with those given over them. */
    simstore_text_options stored;
    simstore_get_text_options(run->store, &stored);
    textopt_over(text, &stored);
    text->opts = stored;
    if (run->paragraphs && !stored.paragraph_min_words) {
        cli_error(CMD,
                  "%s has no paragraph index (build it with --paragraphs): --paragraphs "
                  "needs one",
                  run->store_path);
        return CLI_EXIT_FAIL;
    }
    /* Paragraphs are made only for the documents --add stores, or to judge
     * records by them. */
    if (!add && !run->paragraphs)
        text->opts.paragraph_min_words = 0;
    if (run->print_similarity && stored.sketch == SIMSTORE_SKETCH_NONE) {
        cli_error(CMD,
                  "%s keeps no sketches (built with --sketch none, from fingerprints, or "
                  "before sketches): --similarity needs them",
                  run->store_path);
        return CLI_EXIT_FAIL;
    }
    /* Records are sketched only where a sketch is used: to estimate
     * similarities, or for the documents --add stores. */
    if (!add && !(run->rule.min_similarity > 0 || run->print_similarity))
        text->opts.sketch = SIMSTORE_SKETCH_NONE;
    return 0;
}

static void report(const dedup_run *run, double started)
{
    char bands[64];
    cli_format_bands(&run->rule, bands);
    if (run->paragraphs)
        fprintf(stderr, "simstore %s: rule: k %u, by paragraphs, min fraction %g\n", CMD,
                run->rule.k, run->rule.min_fraction);
    else
        fprintf(stderr, "simstore %s: rule: k %u, min similarity %g, bands %s\n", CMD, run->rule.k,
                run->rule.min_similarity, bands);
    uint64_t index_bytes = simstore_memindex_bytes(run->index) + kept_bytes(&run->ids) +
                           run->kept_sketches_cap + simstore_bandindex_bytes(run->bands) +
                           run->kept_fps_cap * sizeof *run->kept_fps +
                           (run->para_index ? simstore_memindex_bytes(run->para_index) : 0) +
                           run->para_cap * (2 * sizeof(uint32_t) + sizeof(uint64_t));
    fprintf(stderr,
            "simstore %s: %llu %s read, %llu kept, %llu dropped (%llu near a document of "
            "STORE); kept records' index %.1f MiB (%.0f bytes per kept record, %u tables)\n",
            CMD, run->read, CLI_NOUN(run->read, "record"), run->kept, run->dropped,
            run->dropped_by_store, (double)index_bytes / (1 << 20),
            run->kept ? (double)index_bytes / (double)run->kept : 0.0,
            simstore_memindex_tables(run->index));
    cli_report_resources(CMD, started);
}

/* Finish --add: commit the kept records, then compact when the policy says
 * so (as `add` does). */
static int commit_added(dedup_run *run, char **paths)
{
    (void)paths;
    simstore_builder *b = run->builder;
    run->builder = NULL;
    int rc = simstore_builder_finish(b);
    if (rc)
        return cli_api_error(CMD, rc, "nothing added to %s", run->store_path);
    rc = simstore_maybe_compact(run->store, NULL);
    if (rc)
        return cli_api_error(CMD, rc,
                             "%s: the records are added, but the automatic compaction "
                             "failed",
                             run->store_path);
    return 0;
}

static int run_dedup(dedup_run *run, char **paths, int npaths, ingest_options *io, int verbose,
                     double started)
{
    /* Records go out in large writes; once per process (a benchmark calls
     * the command repeatedly). */
    static char outbuf[1 << 20];
    static int buffered;
    if (!buffered)
        setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
    buffered = 1;
    ingest_sink sink = {NULL, NULL, run, decide};
    if (run->store) {
        io->note = note_store;
        io->note_ctx = run;
    }
    ingest_result res;
    int got = ingest_run(&sink, paths, npaths, io, &res);
    if (fflush(stdout) != 0)
        got = 2;
    if (run->removed && fflush(run->removed) != 0)
        run->failed = 1;
    if (got == 0 && !run->failed)
        check_dropped_ids(run);
    if (run->errors > MAX_REPORTED)
        fprintf(stderr, "simstore %s: %llu more bad records not listed\n", CMD,
                run->errors - MAX_REPORTED);
    if (verbose)
        report(run, started);
    if (run->failed && run->removed && ferror(run->removed))
        cli_error(CMD, "%s: cannot write", run->removed_path);
    if (got != 0 || run->errors || res.bad || run->failed) {
        if (run->builder)
            fprintf(stderr, "simstore %s: nothing added to %s\n", CMD, run->store_path);
        return CLI_EXIT_FAIL;
    }
    if (run->builder)
        return commit_added(run, paths) ? CLI_EXIT_FAIL : CLI_EXIT_OK;
    return CLI_EXIT_OK;
}

int cmd_dedup(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"k", required_argument, NULL, OPT_K},
        {"store", required_argument, NULL, OPT_STORE},
        {"add", no_argument, NULL, OPT_ADD},
        {"removed", required_argument, NULL, OPT_REMOVED},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"min-similarity", required_argument, NULL, OPT_MIN_SIMILARITY},
        {"similarity", no_argument, NULL, OPT_SIMILARITY},
        {"sketch", required_argument, NULL, OPT_SKETCH},
        {"bands", required_argument, NULL, OPT_BANDS},
        {"paragraphs", no_argument, NULL, OPT_PARAGRAPHS},
        {"min-fraction", required_argument, NULL, OPT_MIN_FRACTION},
        {"paragraph-min-words", required_argument, NULL, OPT_PARA_MIN},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        TEXTOPT_LONG_OPTIONS,
        INPUT_FIELD_LONG_OPTIONS,
        BOILER_LONG_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    boiler_opts bo;
    boiler_opts_init(&bo);
    boiler_spool spool = {NULL, NULL, 0};
    simstore_boilerplate *set = NULL;
    textopt_state text;
    textopt_init(&text);
    input_fields fields;
    input_fields_init(&fields);
    ingest_options io;
    memset(&io, 0, sizeof io);
    io.cmd = CMD;
    io.format = INGEST_JSONL;
    io.fields = &fields;
    io.text = &text.opts;
    dedup_run run;
    memset(&run, 0, sizeof run);
    int add = 0, verbose = 0, min_fraction_given = 0, sketch_given = 0, k_given = 0, c;
    simstore_sketch_kind sketch = SIMSTORE_SKETCH_DEFAULT;
    unsigned para_min_words = 0;
    simstore_near_rule_init(&run.rule);
    double started = cli_now();
    unsigned long long v;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":vh", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_K:
            if (cli_parse_uint(optarg, 0, SIMSTORE_MAX_K, &v))
                return cli_usage_error(CMD, "--k takes 0..%d, not '%s'", SIMSTORE_MAX_K, optarg);
            run.rule.k = (unsigned)v;
            k_given = 1;
            break;
        case OPT_STORE: run.store_path = cli_store_path(optarg); break;
        case OPT_ADD: add = 1; break;
        case OPT_REMOVED: run.removed_path = optarg; break;
        case OPT_THREADS:
            if (cli_threads_option(CMD, optarg, &io.threads))
                return CLI_EXIT_USAGE;
            break;
        case OPT_MIN_SIMILARITY:
            if (cli_min_similarity_option(CMD, optarg, &run.rule.min_similarity))
                return CLI_EXIT_USAGE;
            break;
        case OPT_SIMILARITY: run.print_similarity = 1; break;
        case OPT_SKETCH:
            if (cli_sketch_option(CMD, optarg, &sketch))
                return CLI_EXIT_USAGE;
            sketch_given = 1;
            break;
        case OPT_BANDS:
            if (cli_bands_option(CMD, optarg, &run.rule.bands))
                return CLI_EXIT_USAGE;
            break;
        case OPT_PARAGRAPHS: run.paragraphs = 1; break;
        case OPT_MIN_FRACTION:
            if (cli_min_fraction_option(CMD, optarg, &run.rule.min_fraction))
                return CLI_EXIT_USAGE;
            min_fraction_given = 1;
            break;
        case OPT_PARA_MIN:
            if (cli_paragraph_min_words_option(CMD, optarg, &para_min_words))
                return CLI_EXIT_USAGE;
            break;
        case 'v': verbose = 1; break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        case '?':
        case ':': return cli_bad_option(CMD, c, argv, optind);
        default: {
            int b = boiler_apply(CMD, c, optarg, &bo);
            if (b == 2)
                return CLI_EXIT_USAGE;
            if (b == 1)
                break;
            int t = textopt_or_field_or_bad_option(CMD, c, argv, optind, &text, &fields, NULL);
            if (t >= 0)
                return t;
        }
        }
    }
    if (textopt_finish(CMD, &text) || boiler_finish(CMD, &bo))
        return CLI_EXIT_USAGE;
    if (add && !run.store_path)
        return cli_usage_error(CMD, "--add needs --store STORE");
    if (bo.given && run.store_path)
        return cli_usage_error(CMD, "--boilerplate with --store: the records are fingerprinted "
                                    "without the boilerplate lines STORE recorded, as its "
                                    "documents were; it computes none of its own");
    if (run.print_similarity && !run.removed_path)
        return cli_usage_error(CMD, "--similarity adds a column to --removed: give --removed "
                                    "FILE");
    if (min_fraction_given && !run.paragraphs)
        return cli_usage_error(CMD, "--min-fraction goes with --paragraphs");
    if (para_min_words && !run.paragraphs)
        return cli_usage_error(CMD, "--paragraph-min-words goes with --paragraphs");
    if (para_min_words && run.store_path)
        return cli_usage_error(CMD, "--paragraph-min-words: with --store, paragraphs are those "
                                    "of the store's minimum");
    if (run.paragraphs && (run.rule.min_similarity > 0 || run.print_similarity))
        return cli_usage_error(CMD, "--paragraphs judges records by their paragraphs: not with "
                                    "--min-similarity or --similarity");
    const char *bands_refused =
        cli_bands_rule_problem(run.rule.bands, k_given, run.rule.min_similarity, run.paragraphs, 0);
    if (bands_refused)
        return cli_usage_error(CMD, "%s", bands_refused);
    if (run.rule.bands == 1 && run.store_path)
        return cli_usage_error(CMD, "--bands on with --store: the store keeps no band index, so a "
                                    "run with STORE is without bands (give --bands off, or "
                                    "nothing)");
    if (sketch_given && run.store_path)
        return cli_usage_error(CMD, "--sketch with --store: records are sketched as STORE's "
                                    "documents are, with its kind");
    if (sketch_given && sketch == SIMSTORE_SKETCH_NONE)
        return cli_usage_error(CMD, "--sketch none: --min-similarity and --similarity need a "
                                    "sketch");
    /* With --store, once it is open (open_store). */
    if (!run.store_path) {
        simstore_build_options built;
        simstore_build_options_init(&built);
        if (resolve_rule(&run, built.k, sketch, "the options"))
            return CLI_EXIT_USAGE;
    }
    if (sketch_given && !(run.rule.min_similarity > 0 || run.print_similarity))
        return cli_usage_error(CMD, "--sketch chooses the sketch --min-similarity and "
                                    "--similarity estimate with: give one of them");
    if (optind >= argc)
        return cli_usage_error(CMD, "missing INPUT (use '-' for standard input)");
    if (run.paragraphs && !run.store_path)
        text.opts.paragraph_min_words =
            para_min_words ? para_min_words : SIMSTORE_PARAGRAPH_MIN_WORDS_DEFAULT;

    int rc = CLI_EXIT_FAIL;
    if (run.store_path && (rc = open_store(&run, add, &text)) != 0)
        goto out;
    rc = CLI_EXIT_FAIL;
    if (run.store)
        io.boilerplate = simstore_get_boilerplate(run.store);
    if (bo.automatic) {
        if (boiler_first_pass(CMD, argv + optind, argc - optind, &io, &bo, BOILERPLATE_MEMORY,
                              &spool, &set))
            goto out;
        io.boilerplate = set;
    }
    /* Records are sketched as the store's documents are (the store's kind,
     * from its text options), or, without a store, with the default kind
     * when similarities are asked for. */
    if (!run.store_path && (run.rule.min_similarity > 0 || run.print_similarity))
        text.opts.sketch = sketch_given ? sketch : SIMSTORE_SKETCH_DEFAULT;
    run.sketch = text.opts.sketch;
    if (run.rule.min_similarity > 0 || run.print_similarity)
        run.sketch_bytes = simstore_sketch_bytes(run.sketch); /* kept records' sketches */
    if (idcheck_new(&run.dropped_ids)) {
        cli_api_error(CMD, SIMSTORE_ENOMEM, "the dropped records' ids");
        goto out;
    }
    if (simstore_memindex_new(run.rule.k, 0, &run.index) != SIMSTORE_OK) {
        cli_api_error(CMD, SIMSTORE_ENOMEM, "the kept records' index");
        goto out;
    }
    if (run.rule.band_count && run.sketch_bytes &&
        simstore_bandindex_new(run.rule.band_rows, run.rule.band_count, &run.bands) !=
            SIMSTORE_OK) {
        cli_api_error(CMD, SIMSTORE_ENOMEM, "the kept records' band index");
        goto out;
    }
    if (run.paragraphs && simstore_memindex_new(run.rule.k, 0, &run.para_index) != SIMSTORE_OK) {
        cli_api_error(CMD, SIMSTORE_ENOMEM, "the kept paragraphs' index");
        goto out;
    }
    if (run.removed_path && !(run.removed = fopen(run.removed_path, "w"))) {
        cli_error(CMD, "%s: cannot create: %s", run.removed_path, strerror(errno));
        goto out;
    }
    if (add) {
        simstore_build_options o;
        simstore_build_options_init(&o);
        o.threads = io.threads;
        o.source_name = ingest_source_name;
        o.source_ctx = argv + optind;
        int e = simstore_add_begin(run.store, &o, &run.builder);
        if (e) {
            cli_api_error(CMD, e, "%s", run.store_path);
            goto out;
        }
    }
    rc = run_dedup(&run, argv + optind, argc - optind, &io, verbose, started);
out:
    simstore_builder_abort(run.builder);
    for (unsigned i = 0; i < MAX_WORKERS; i++)
        simstore_query_free(run.queries[i]);
    simstore_close(run.store);
    simstore_memindex_free(run.index);
    simstore_bandindex_free(run.bands);
    free(run.kept_fps);
    simstore_memindex_free(run.para_index);
    free(run.para_shared);
    free(run.para_last);
    free(run.touched);
    kept_free(&run.ids);
    free(run.kept_sketches);
    idcheck_free(run.dropped_ids);
    boiler_spool_free(&spool);
    simstore_boilerplate_free(set);
    if (run.removed && fclose(run.removed) != 0 && rc == CLI_EXIT_OK)
        rc = cli_error(CMD, "%s: cannot write", run.removed_path);
    return rc;
}
