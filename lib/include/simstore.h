/* simstore.h: the public API of simstore, a compressed on-disk store of 64-bit
 * simhash fingerprints answering exact Hamming-distance-k queries.
 *
 * This is the only header users (and the simstore command) include.
 *
 * Conventions
 *  - Every function that can fail returns int: SIMSTORE_OK (0) or one of the
 *    negative SIMSTORE_E* codes below. simstore_strerror() names a code;
 *    simstore_last_error() gives the detail of the last failure in the calling
 *    thread (what went wrong and where: file, line, block, byte offset).
 *  - Objects the caller owns are returned through an out-parameter and have one
 *    free/close function that accepts NULL.
 *  - Borrowed pointers state how long they stay valid.
 */
#ifndef SIMSTORE_H
#define SIMSTORE_H

#include <stddef.h>
#include <stdint.h>

/* SIMSTORE_API marks the functions the library exports. The library's own
 * objects are compiled with -fvisibility=hidden, so with GCC and clang these
 * (default visibility) are all that libsimstore.so exports; elsewhere it is
 * empty. Define it before including this header to override. */
#ifndef SIMSTORE_API
#if defined(__GNUC__) || defined(__clang__)
#define SIMSTORE_API __attribute__((visibility("default")))
#else
#define SIMSTORE_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Versions ------------------------------------------------------------ */

#define SIMSTORE_VERSION_MAJOR 1
#define SIMSTORE_VERSION_MINOR 0
#define SIMSTORE_VERSION_PATCH 0
#define SIMSTORE_VERSION_NUMBER                                                                    \
    (SIMSTORE_VERSION_MAJOR * 10000 + SIMSTORE_VERSION_MINOR * 100 + SIMSTORE_VERSION_PATCH)
#define SIMSTORE_VERSION_STRING "1.0.0"

/* The library's version, as SIMSTORE_VERSION_NUMBER was when it was built. */
SIMSTORE_API unsigned simstore_version_number(void);
/* The library's version as "MAJOR.MINOR.PATCH"; a static string. */
SIMSTORE_API const char *simstore_version_string(void);

/* ---- Error codes --------------------------------------------------------- */

#define SIMSTORE_OK 0
#define SIMSTORE_ENOTFOUND (-1)  /* no such store, file, document or entry     */
#define SIMSTORE_ECORRUPT (-2)   /* data on disk fails a check: checksum, bound */
#define SIMSTORE_EVERSION (-3)   /* on-disk format version this build can't read */
#define SIMSTORE_ENOMEM (-4)     /* out of memory                               */
#define SIMSTORE_EIO (-5)        /* an operating-system I/O call failed         */
#define SIMSTORE_EFULL (-6)      /* a fixed limit was reached (map size, count) */
#define SIMSTORE_EINVAL (-7)     /* invalid argument or malformed input         */
#define SIMSTORE_EBUSY (-8)      /* another writer holds the store              */
#define SIMSTORE_ERANGE (-9)     /* a distance the store cannot answer          */
#define SIMSTORE_EEXIST (-10)    /* the target already exists                   */
#define SIMSTORE_EREADONLY (-11) /* write attempted on a read-only handle       */

/* A short static description of an error code ("corrupt data", ...). */
SIMSTORE_API const char *simstore_strerror(int err);

/* The detail message of the most recent failure in the calling thread, or ""
 * when none. Valid until the next simstore call in the same thread. */
SIMSTORE_API const char *simstore_last_error(void);

/* ---- Fingerprints -------------------------------------------------------- */

/* Hamming distance between two fingerprints (0..64). Header-only, so it is
 * compiled for the calling program's target: the instruction where that
 * target has one; elsewhere (x86-64 before -mpopcnt or -march=x86-64-v2,
 * the default target of a portable build) a branch-free bit count, not
 * __builtin_popcountll, which is there a call into libgcc. (The library's
 * own queries, batches and joins count with the instruction whenever the
 * running CPU has it, whatever their compile target.) */
static inline unsigned simstore_distance(uint64_t a, uint64_t b)
{
    uint64_t x = a ^ b;
#if (defined(__GNUC__) || defined(__clang__)) &&                                                   \
    (defined(__POPCNT__) || defined(__aarch64__) || defined(__ARM_NEON))
    return (unsigned)__builtin_popcountll(x);
#else
    x = x - ((x >> 1) & UINT64_C(0x5555555555555555));
    x = (x & UINT64_C(0x3333333333333333)) + ((x >> 2) & UINT64_C(0x3333333333333333));
    x = (x + (x >> 4)) & UINT64_C(0x0F0F0F0F0F0F0F0F);
    return (unsigned)((x * UINT64_C(0x0101010101010101)) >> 56);
#endif
}

/* ---- Fingerprinting -------------------------------------------------------
 * UTF-8 text to a 64-bit simhash exactly as format/fingerprint.md specifies:
 * letters and digits form words (case folded), Han runs are cut into words by
 * friso (or character bigrams when its dictionary cannot be loaded), kana runs
 * into bigrams; features are overlapping w-word shingles hashed with XXH3-64
 * (seed 0); weighted bit sums give the bits. Version 2 of the algorithm
 * first normalizes the text (NFKC with case folding), joins Han and kana
 * across a line break, and shingles CJK tokens with a width of their own;
 * version 3 (the default) also joins them across spaces. Versions 1 and 2
 * stay available, and stores record the version they use.
 *
 * Threads: a fingerprinter is used by one thread at a time; any number may
 * exist. The friso dictionary is loaded once per process, on first need (a
 * SIMSTORE_CJK_AUTO fingerprinter's creation, or a SIMSTORE_CJK_FRISO one's
 * first Han text), and shared read-only by all of them. The environment variable
 * SIMSTORE_FRISO_INI, when set, names the friso.ini to use instead of the
 * built-in paths (the one from friso's pkg-config, then /etc/friso/friso.ini).
 */

/* Fingerprint algorithm versions (format/fingerprint.md, "Versions"). */
#define SIMSTORE_FP_VERSION_DEFAULT 3
#define SIMSTORE_FP_VERSION_LATEST 3

/* Shingle size: w words per feature (w = 1: single words). */
#define SIMSTORE_SHINGLE_DEFAULT 3
#define SIMSTORE_SHINGLE_MAX 32
/* Versions 2 and 3: tokens per feature for one starting at a Han or kana token. */
#define SIMSTORE_CJK_SHINGLE_DEFAULT 2
/* λ of the length-aware weighting: default and largest accepted. */
#define SIMSTORE_LAMBDA_DEFAULT 1.0
#define SIMSTORE_LAMBDA_MAX 1000.0

typedef enum simstore_weighting {
    SIMSTORE_WEIGHT_TF = 0,     /* weight = occurrences of the feature         */
    SIMSTORE_WEIGHT_LENGTH = 1, /* Yu, Hu & Zhang: tf + λ·[length >= 4]        */
    SIMSTORE_WEIGHT_LOG = 2     /* versions 2, 3: 1 + ln(tf), sublinear, in
                                   exact fixed point (format/fingerprint.md)   */
} simstore_weighting;

typedef enum simstore_cjk_mode {
    SIMSTORE_CJK_AUTO = 0,  /* friso when its dictionary loads, else bigrams  */
    SIMSTORE_CJK_FRISO = 1, /* friso words; fail if friso is unavailable      */
    SIMSTORE_CJK_BIGRAM = 2 /* overlapping character bigrams                  */
} simstore_cjk_mode;

/* Sketches of a text's shingle set (format/sketch.md): a fixed number of
 * bytes from which simstore_sketch_similarity() estimates the Jaccard
 * similarity of two texts' sets of features (the shingles their
 * fingerprints are made of). Every kind is 1-bit one-permutation MinHash
 * with densification; they differ in their number of bins, one bit each.
 * The number in the name is the bytes a sketch takes. Near J = 0.9 the
 * estimate's standard error is about sqrt((1 - J^2) / bins): 0.0096 for
 * MINHASH256, 0.014 for MINHASH128, 0.019 for MINHASH64, 0.027 for
 * MINHASH32, 0.039 for MINHASH16. */
typedef enum simstore_sketch_kind {
    SIMSTORE_SKETCH_NONE = 0,       /* no sketch                                  */
    SIMSTORE_SKETCH_MINHASH16 = 1,  /* 128 bins: 16 bytes                         */
    SIMSTORE_SKETCH_MINHASH32 = 2,  /* 256 bins: 32 bytes                         */
    SIMSTORE_SKETCH_MINHASH64 = 3,  /* 512 bins: 64 bytes                         */
    SIMSTORE_SKETCH_MINHASH128 = 4, /* 1024 bins: 128 bytes                       */
    SIMSTORE_SKETCH_MINHASH256 = 5  /* 2048 bins: 256 bytes                       */
} simstore_sketch_kind;

/* The kind `simstore build` gives stores of texts unless told otherwise
 * (the library's text options default to SIMSTORE_SKETCH_NONE): the
 * near-duplicate setting's (SIMSTORE_NEAR_SIMILARITY), whose 0.0096
 * standard error at J = 0.9 the quality targets need (format/sketch.md). */
#define SIMSTORE_SKETCH_DEFAULT SIMSTORE_SKETCH_MINHASH256
/* The largest sketch, in bytes: room enough for any kind. */
#define SIMSTORE_SKETCH_MAX_BYTES 256u
/* A similarity that cannot be estimated: the query or a document has no
 * sketch (a query by fingerprint, a store without sketches). */
#define SIMSTORE_SIMILARITY_UNKNOWN (-1.0)

/* Options structs. Every options struct (simstore_text_options,
 * simstore_build_options, simstore_batch_options,
 * simstore_boilerplate_options, simstore_scan_options, simstore_near_rule,
 * simstore_cluster_options, simstore_live_options) begins with its size and
 * has an _init function that fills it with the defaults and sets the size:
 * call it first, then set the fields you want. A call given a struct whose
 * size is not one this library knows (a struct not filled by its _init, or
 * made for another version of this header) fails with SIMSTORE_EINVAL and
 * says so, instead of reading fields that are not there. */
typedef struct simstore_text_options {
    size_t size;            /* sizeof(simstore_text_options), set by simstore_text_options_init() */
    unsigned shingle_words; /* w: 1..SIMSTORE_SHINGLE_MAX (3)               */
    simstore_weighting weighting; /* (SIMSTORE_WEIGHT_TF)                        */
    double lambda;                /* λ for SIMSTORE_WEIGHT_LENGTH: 0..1000 (1.0);
                                     used as round(λ·65536)/65536                  */
    simstore_cjk_mode cjk;        /* how Han runs are segmented (BIGRAM: the
                                     quality benchmark's measure, README)        */
    /* Fields added with fingerprint version 2 (at the end, so that the
     * fields above keep their offsets). */
    unsigned version;     /* the algorithm: 1, 2 or 3, all kept (a published
                             algorithm is a contract); 0 means the current
                             default, SIMSTORE_FP_VERSION_DEFAULT (3), so a
                             zero-filled struct never selects an older
                             version: ask for 1 or 2 by name                 */
    unsigned cjk_shingle; /* versions 2 and 3: tokens per feature starting
                             at a Han or kana token, 1..SIMSTORE_SHINGLE_MAX (2);
                             0 = the default; version 1 ignores it          */
    /* Added with sketches (format/sketch.md). */
    simstore_sketch_kind sketch; /* the sketch a fingerprinter also makes
                             (simstore_fingerprint_sketch) and a store keeps
                             of every document (SIMSTORE_SKETCH_NONE)       */
    /* Added with the paragraph index (format/store.md, "Paragraphs"). */
    unsigned paragraph_min_words; /* a store built with it indexes the
                             fingerprints of its documents' paragraphs of
                             at least this many words (tokens), 1..
                             SIMSTORE_PARAGRAPH_MIN_WORDS_MAX; 0: no
                             paragraph index (0). Fingerprinters ignore it */
} simstore_text_options;

/* The default and the largest paragraph_min_words. */
#define SIMSTORE_PARAGRAPH_MIN_WORDS_DEFAULT 8u
#define SIMSTORE_PARAGRAPH_MIN_WORDS_MAX 255u

/* Fill *opts with the defaults above (version 3). Set fields after calling
 * it, so that fields added later keep their defaults. */
SIMSTORE_API void simstore_text_options_init(simstore_text_options *opts);

/* Which segmenter SIMSTORE_CJK_AUTO uses in this process, loading the friso
 * dictionary if that has not happened yet (thread-safe; ~0.05 s once).
 * Returns SIMSTORE_CJK_FRISO or SIMSTORE_CJK_BIGRAM. If description is not
 * NULL, *description is set to a static sentence saying which and why, e.g.
 * "friso 1.6.4 (complex mode), dictionary /usr/share/friso/dict/UTF-8/ (...)"
 * or "character bigrams (friso dictionary not loadable: <reason>)"; it stays
 * valid for the life of the process. */
SIMSTORE_API int simstore_cjk_segmenter(const char **description);

typedef struct simstore_fingerprinter simstore_fingerprinter;

/* Create a fingerprinter: the options plus scratch buffers that grow to the
 * largest document seen, so that fingerprinting allocates nothing per document
 * in steady state (friso itself allocates while segmenting Han runs).
 *   opts  the options, copied; NULL for the defaults.
 *   out   receives the fingerprinter, owned by the caller, released with
 *         simstore_fingerprinter_free(); NULL on failure.
 * Errors:
 *   SIMSTORE_EINVAL    out is NULL, an option is out of range, or
 *                      SIMSTORE_WEIGHT_LOG with version 1.
 *   SIMSTORE_ENOTFOUND opts->cjk is SIMSTORE_CJK_FRISO and the friso
 *                      dictionary could not be loaded (the detail says why).
 *                      With SIMSTORE_CJK_FRISO the dictionary is loaded at
 *                      the fingerprinter's first Han text, not here, when
 *                      the friso.ini tried first names a readable lexicon
 *                      index (so Latin text never waits for it); a
 *                      dictionary that then fails to load makes that
 *                      fingerprint fail with SIMSTORE_ENOTFOUND.
 *                      simstore_cjk_segmenter() loads it at once.
 *   SIMSTORE_ENOMEM    out of memory. */
SIMSTORE_API int simstore_fingerprinter_new(const simstore_text_options *opts,
                                            simstore_fingerprinter **out);

/* Release a fingerprinter; NULL is allowed. */
SIMSTORE_API void simstore_fingerprinter_free(simstore_fingerprinter *fpr);

/* The segmenter this fingerprinter uses for Han runs: SIMSTORE_CJK_FRISO or
 * SIMSTORE_CJK_BIGRAM (AUTO resolved when it was created). */
SIMSTORE_API simstore_cjk_mode simstore_fingerprinter_cjk(const simstore_fingerprinter *fpr);

/* Flags reported with a fingerprint. */
#define SIMSTORE_FP_EMPTY 0x1u        /* no tokens: the fingerprint is 0        */
#define SIMSTORE_FP_INVALID_UTF8 0x2u /* ill-formed UTF-8 was read as U+FFFD    */

/* Fingerprint one document.
 *   fpr    a fingerprinter, not in use by another thread.
 *   text   len bytes of UTF-8, not necessarily NUL-terminated; may hold any
 *          bytes (ill-formed sequences separate words, see the spec). May be
 *          NULL when len is 0.
 *   fp     receives the fingerprint (0 for a document without tokens).
 *   flags  if not NULL, receives SIMSTORE_FP_* bits.
 * Errors: SIMSTORE_EINVAL (fpr or fp NULL, or text NULL with len > 0),
 * SIMSTORE_ENOMEM (a scratch buffer could not grow; *fp is then 0),
 * SIMSTORE_ENOTFOUND (the first Han text of a SIMSTORE_CJK_FRISO
 * fingerprinter, and friso's dictionary does not load: see
 * simstore_fingerprinter_new()). */
SIMSTORE_API int simstore_fingerprint_text(simstore_fingerprinter *fpr, const char *text,
                                           size_t len, uint64_t *fp, unsigned *flags);

/* Documents in, fingerprints out: fingerprint texts[0..n) (lens[i] bytes
 * each) on `threads` threads (0: simstore_default_threads()) of the ordered
 * pool (simstore_ordered_*), in chunks, with options o (NULL: the defaults)
 * and no boilerplate set (for one, use fingerprinters of your own with
 * simstore_fingerprinter_set_boilerplate()).
 * fps[i] (and flags[i], when flags is not NULL) receive exactly what
 * simstore_fingerprint_text() gives for texts[i], whatever the thread count.
 * Memory beyond the caller's arrays: one fingerprinter per thread and a
 * bounded number of chunk descriptors.
 * Errors: those of simstore_fingerprinter_new() and of
 * simstore_fingerprint_text() (the first failing document's, by index;
 * fps of the others are still written); SIMSTORE_EINVAL (texts, lens or fps
 * NULL with n > 0); SIMSTORE_ENOMEM; SIMSTORE_EIO (no thread started). */
SIMSTORE_API int simstore_fingerprint_many(const simstore_text_options *o, unsigned threads,
                                           const char *const *texts, const size_t *lens, size_t n,
                                           uint64_t *fps, unsigned *flags);

/* One paragraph, as passed to a simstore_paragraph_fn. Paragraphs are the
 * maximal groups of consecutive non-blank lines: lines end at LF (U+000A),
 * and a line is blank when it is empty or holds only White_Space code points
 * (tab, CR, space, NBSP, U+3000, ...). A paragraph is fingerprinted exactly
 * like a document of its own; paragraphs without tokens are skipped and take
 * no number. */
typedef struct simstore_paragraph {
    unsigned long number; /* 1, 2, ... in text order, over reported paragraphs */
    size_t offset;        /* first byte of its first line in the text          */
    size_t length;        /* bytes up to the end of its last line, without the
                              line's LF                                         */
    uint64_t fingerprint;
    unsigned flags; /* SIMSTORE_FP_INVALID_UTF8 when it had ill-formed bytes */
    uint64_t words; /* its tokens (format/fingerprint.md, section 4): what
                              a store's paragraph_min_words counts */
} simstore_paragraph;

/* Called once per paragraph; `para` is valid only during the call. Return 0
 * to continue, anything else to stop. */
typedef int (*simstore_paragraph_fn)(void *ctx, const simstore_paragraph *para);

/* Fingerprint each paragraph of a document, in order.
 *   fpr, text, len  as for simstore_fingerprint_text().
 *   fn, ctx         the callback and its first argument.
 *   count           if not NULL, receives the number of paragraphs reported.
 *   flags           if not NULL, receives SIMSTORE_FP_EMPTY when no paragraph
 *                   had tokens, SIMSTORE_FP_INVALID_UTF8 when any paragraph
 *                   had ill-formed UTF-8.
 * Returns 0; the callback's nonzero value when it stopped the iteration;
 * SIMSTORE_EINVAL (fpr or fn NULL, or text NULL with len > 0);
 * SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_fingerprint_paragraphs(simstore_fingerprinter *fpr, const char *text,
                                                 size_t len, simstore_paragraph_fn fn, void *ctx,
                                                 unsigned long *count, unsigned *flags);

/* The fingerprints of the paragraphs of `text` (simstore_fingerprint_
 * paragraphs) with at least min_words words, in text order, repeats kept:
 * the paragraphs a store with paragraph_min_words = min_words indexes, and
 * those a paragraph query counts. Up to cap of them go to fps; *n receives
 * how many there are (call again with a larger array when *n > cap).
 * Errors: SIMSTORE_EINVAL (fpr or n NULL, fps NULL with cap > 0, text NULL
 * with len > 0), SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_paragraph_fingerprints(simstore_fingerprinter *fpr, const char *text,
                                                 size_t len, unsigned min_words, uint64_t *fps,
                                                 size_t cap, size_t *n);

/* ---- Sketches -------------------------------------------------------------
 * A sketch is made in the same pass as the fingerprint, from the same
 * features (format/sketch.md): so a sketch and a fingerprint always
 * describe the same set, and sketching costs no second tokenization. */

/* Bytes of a sketch of this kind (16, 32, 64); 0 for SIMSTORE_SKETCH_NONE
 * and for a value that names no kind. Cannot fail. */
SIMSTORE_API size_t simstore_sketch_bytes(simstore_sketch_kind kind);

/* The kind's name as the tool spells it: "none", "minhash16", "minhash32",
 * "minhash64"; NULL for a value that names no kind. A static string. */
SIMSTORE_API const char *simstore_sketch_name(simstore_sketch_kind kind);

/* The kind named `name` (as simstore_sketch_name() spells it) to *kind.
 * Errors: SIMSTORE_EINVAL (NULL argument, or no kind has that name). */
SIMSTORE_API int simstore_sketch_parse(const char *name, simstore_sketch_kind *kind);

/* The estimated Jaccard similarity of the shingle sets two sketches of kind
 * `kind` were made from: with D the bins whose bits differ out of m,
 * max(0, (m - 2 D) / m), in 0..1; 1 for equal sketches (identical texts).
 * Unbiased for sets of any size, with the standard error given with
 * simstore_sketch_kind. Returns SIMSTORE_SIMILARITY_UNKNOWN (-1) when a or b
 * is NULL or kind is not a sketch kind. Pure and thread-safe. */
SIMSTORE_API double simstore_sketch_similarity(simstore_sketch_kind kind, const uint8_t *a,
                                               const uint8_t *b);

/* LSH bands of sketches (format/sketch.md, section 6.2): a pair of
 * documents whose sketches agree on every bit of one band is a candidate
 * whatever its fingerprints' distance. Band i is the `rows` bits i * rows
 * .. (i + 1) * rows - 1 of a sketch (bin order). The shape for a minimum
 * similarity t: the largest rows (at most 32) for which the fewest bands
 * that make a pair at estimated similarity t a candidate with probability
 * at least 0.99 fit in the sketch's bins, and that many bands. No bands
 * (0, 0) below SIMSTORE_NEAR_BANDS_MIN_SIMILARITY, above 1, or for
 * SIMSTORE_SKETCH_NONE. Pure: the same shape on every machine. */
#define SIMSTORE_NEAR_BANDS_MIN_SIMILARITY 0.5
SIMSTORE_API void simstore_sketch_bands(simstore_sketch_kind kind, double min_similarity,
                                        unsigned *rows, unsigned *count);

/* The sketch kind fpr makes (its options' sketch). Cannot fail. */
SIMSTORE_API simstore_sketch_kind simstore_fingerprinter_sketch(const simstore_fingerprinter *fpr);

/* Fingerprint one document and sketch it, in one pass.
 *   fpr     a fingerprinter made with a sketch kind (its options' sketch).
 *   text, len, fp, flags  as simstore_fingerprint_text(), which gives the
 *           same fingerprint and flags.
 *   sketch  receives simstore_sketch_bytes(simstore_fingerprinter_sketch(fpr))
 *           bytes. A document without features (SIMSTORE_FP_EMPTY) has the
 *           sketch of all zero bytes.
 * Errors: SIMSTORE_EINVAL (a NULL argument, text NULL with len > 0, or fpr
 * made without a sketch kind), SIMSTORE_ENOMEM (fp is then 0 and the sketch
 * all zero). */
SIMSTORE_API int simstore_fingerprint_sketch(simstore_fingerprinter *fpr, const char *text,
                                             size_t len, uint64_t *fp, uint8_t *sketch,
                                             unsigned *flags);

/* ---- Stores --------------------------------------------------------------
 * A store is a directory (format/store.md): an LMDB environment holding the
 * documents (id -> fingerprint, metadata) and one compressed table file per
 * permuted table of its design, per segment. A store made for distance k
 * answers queries for any distance up to k exactly: every stored document
 * whose fingerprint is within the distance, and nothing farther.
 *
 * Threads: a simstore handle may be shared by any number of threads for
 * queries, each using its own simstore_query. One process at a time may hold
 * a store open for writing (SIMSTORE_EBUSY otherwise); readers in other
 * processes keep answering while it commits. */

typedef struct simstore simstore;
typedef struct simstore_query simstore_query;
typedef struct simstore_builder simstore_builder;

/* Largest document id, in bytes (LMDB's key limit). */
#define SIMSTORE_MAX_ID_BYTES 511
/* The one rule for a document id a writer may store (builds, adds, the live
 * store, the server, Python): 1..SIMSTORE_MAX_ID_BYTES bytes of valid UTF-8
 * (no overlong forms, surrogates or code points above U+10FFFF) holding no
 * control character (C0 U+0000..U+001F: tab, newline, NUL, ...; DEL U+007F;
 * C1 U+0080..U+009F). Such an id prints as one field of a TSV line and reads
 * back unchanged. Returns NULL for an id that follows it, else a short
 * static phrase saying why not ("empty id", "id is not valid UTF-8", ...).
 * Cannot fail. Readers and deletes take any id of 1..SIMSTORE_MAX_ID_BYTES
 * bytes, so that an id an older version stored can still be found and
 * removed. */
SIMSTORE_API const char *simstore_id_problem(const char *id, size_t len);

/* Largest metadata value, in bytes. */
#define SIMSTORE_MAX_META_BYTES (1u << 20)
/* Largest distance a store can be designed for. */
#define SIMSTORE_MAX_K 7

/* Table blocks (format/table.md): a store's table files are cut into blocks
 * of its block size, a power of two from SIMSTORE_MIN_BLOCK_BYTES to
 * SIMSTORE_MAX_BLOCK_BYTES; a build uses SIMSTORE_DEFAULT_BLOCK_BYTES unless
 * told otherwise. Smaller blocks decode less per query, larger ones keep
 * fewer block keys in RAM. */
#define SIMSTORE_MIN_BLOCK_BYTES 256u
#define SIMSTORE_MAX_BLOCK_BYTES 65536u
#define SIMSTORE_DEFAULT_BLOCK_BYTES 512u

/* 1 when block_bytes is a block size the format allows (a power of two from
 * SIMSTORE_MIN_BLOCK_BYTES to SIMSTORE_MAX_BLOCK_BYTES), else 0: the one
 * check behind builds, table files, store records and the tool's option.
 * Cannot fail. */
SIMSTORE_API int simstore_block_bytes_valid(uint64_t block_bytes);

/* The smallest memory budget (simstore_build_options.memory_bytes) a build,
 * add or compaction works with: a smaller one is raised to it. */
#define SIMSTORE_MIN_MEMORY_BYTES ((uint64_t)16 << 20)

/* Progress of a long operation: `phase` names the step ("reading",
 * "sorting table 2", "writing documents", ...); `total` is 0 when unknown. */
typedef void (*simstore_progress_fn)(void *ctx, const char *phase, uint64_t done, uint64_t total);

/* Names the source of a document for messages (e.g. "in.jsonl:17"), from the
 * `source` value given with it. Writes a NUL-terminated string to buf. */
typedef void (*simstore_source_fn)(void *ctx, uint64_t source, char *buf, size_t size);

/* A document whose id clashes: the id is already stored (an add), or an
 * earlier document of the same builder had it. */
typedef struct simstore_clash {
    const char *id; /* id_len bytes, not NUL-terminated; valid only
                              during the call                               */
    size_t id_len;
    uint64_t source;       /* the clashing document's simstore_doc.source  */
    int repeated;          /* 1: given earlier to this builder, at
                              first_source; 0: already in the store         */
    uint64_t first_source; /* where the id was first given (repeated only) */
} simstore_clash;

/* Receives each clash found by simstore_builder_finish(), in id order (for
 * one id: in the order of the documents' positions, which is the order they
 * were added; simstore_builder_set_position). */
typedef void (*simstore_clash_fn)(void *ctx, const simstore_clash *clash);

/* What a compaction did. */
typedef struct simstore_compaction {
    uint64_t segments_before;
    uint64_t segments_after;       /* 1, or 0 when no fingerprint is live  */
    uint64_t fingerprints_dropped; /* dead fingerprints dropped, per table */
} simstore_compaction;

/* Called after each compaction that committed (simstore_compact(), and the
 * automatic ones after an add or a delete; see "Changing a store"). */
typedef void (*simstore_compacted_fn)(void *ctx, const simstore_compaction *c);

typedef struct simstore_build_options {
    size_t size;     /* sizeof(simstore_build_options), set by simstore_build_options_init() */
    unsigned k;      /* distance the design is exact for: 0..7 (3)     */
    unsigned tables; /* table count; 0 chooses by the cost model (0)   */
    uint64_t expected_fps;             /* size the automatic design plans for; 0 = the
                                  distinct fingerprints of this build (0)        */
    unsigned block_bytes;              /* table block size: see simstore_block_bytes_valid()
                                  (SIMSTORE_DEFAULT_BLOCK_BYTES)                 */
    int fingerprint_only;              /* no documents: answers are the fingerprints (0) */
    int replace;                       /* build over an existing store, swapping it
                                  atomically when done (0: existing = EEXIST)    */
    const simstore_text_options *text; /* how the documents' texts are (or
                                  would be) fingerprinted, recorded in the store
                                  for text queries; NULL = the defaults (NULL)   */
    uint64_t memory_bytes;             /* memory budget for sorting, raised to at least
                                  SIMSTORE_MIN_MEMORY_BYTES (1 GiB)              */
    unsigned threads;                  /* worker threads; 0 = every core (0)             */
    simstore_progress_fn progress;
    void *progress_ctx;
    simstore_source_fn source_name;
    void *source_ctx;
    int skip_existing;       /* a document whose id is already stored, or was
                                  given to this builder before, is skipped (the
                                  first one given is kept) instead of failing
                                  the finish; see simstore_builder_finish() (0) */
    simstore_clash_fn clash; /* receives every clashing id; NULL: none (NULL) */
    void *clash_ctx;
    simstore_compacted_fn compacted; /* told of compactions made with these
                                  options; NULL: not told (NULL)               */
    void *compacted_ctx;
} simstore_build_options;

/* Fill *o with the defaults shown above. */
SIMSTORE_API void simstore_build_options_init(simstore_build_options *o);

/* One document for a builder. id: 1..SIMSTORE_MAX_ID_BYTES bytes; meta:
 * NULL or up to SIMSTORE_MAX_META_BYTES bytes (JSON text by convention);
 * source: an opaque value passed back to source_name() in messages. The
 * fields after source may stay zero (a struct initialised with the first
 * six fields only is a document with none of them):
 *   flags: SIMSTORE_DOC_INTEGER_ID or 0;
 *   sketch: NULL, or simstore_sketch_bytes(kind) bytes (copied) of the
 *     store's sketch kind (simstore_get_text_options(), or the build's text
 *     options), made from the document's text with those options
 *     (simstore_fingerprint_sketch). Every document of a store that keeps
 *     sketches has one; a store that keeps none takes none;
 *   paragraphs, n_paragraphs: the document's paragraph fingerprints
 *     (simstore_paragraph_fingerprints with the store's
 *     paragraph_min_words: n_paragraphs of them, in text order; copied),
 *     for a store with a paragraph index (format/store.md, "Paragraphs");
 *     a document given none has no paragraphs in the index. */
typedef struct simstore_doc {
    const char *id;
    size_t id_len;
    uint64_t fp;
    const char *meta;
    size_t meta_len;
    uint64_t source;
    unsigned flags;
    const uint8_t *sketch;
    const uint64_t *paragraphs;
    size_t n_paragraphs;
} simstore_doc;

/* simstore_doc.flags: the id is the decimal form of an integer the input
 * gave as a number (a JSON integer); it is stored with the document, and
 * matches report it (SIMSTORE_MATCH_INTEGER_ID) so output can give it back
 * as a number. */
#define SIMSTORE_DOC_INTEGER_ID 1u

/* Start building a new store at `path` (a directory that must not exist,
 * unless o->replace). Nothing appears at `path` until
 * simstore_builder_finish() succeeds; the build happens in a temporary
 * directory beside it. o may be NULL for the defaults.
 * Errors: SIMSTORE_EINVAL (bad option), SIMSTORE_EEXIST, SIMSTORE_EIO,
 * SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_build_begin(const char *path, const simstore_build_options *o,
                                      simstore_builder **out);

/* Start a new segment in a store opened with SIMSTORE_OPEN_WRITE: the
 * documents added become visible to queries, all at once, when
 * simstore_builder_finish() commits. Only memory_bytes, threads, progress,
 * source_name, skip_existing, clash and compacted of o are used (the design
 * is the store's); compacted is told of the automatic compaction after the
 * commit, if there is one.
 * Errors: SIMSTORE_EREADONLY, SIMSTORE_EBUSY (a builder is already open),
 * SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_add_begin(simstore *s, const simstore_build_options *o,
                                    simstore_builder **out);

/* Add one document (documents may come in any order). Ids are checked for
 * length here; duplicates are found at finish.
 * Errors: SIMSTORE_EINVAL (empty or oversized id or metadata; an unknown
 * flag; a document given to a fingerprint-only builder; a sketch given to a
 * store that keeps none, or none given to one that keeps them; paragraphs
 * given to a store without a paragraph index, or more than
 * SIMSTORE_MAX_PARAGRAPHS of them), SIMSTORE_EIO, SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_builder_add(simstore_builder *b, const simstore_doc *doc);
#define SIMSTORE_MAX_PARAGRAPHS (1u << 20)

/* Set the position of the next document added: it takes `position`, the
 * documents after it position + 1, position + 2, ... A document's position
 * is the P of its insertion number, (generation << 40) | P (format/store.md,
 * "The document record"; simstore_match.insertion): without this call the
 * builder's documents take 0, 1, 2, ... in the order added. A builder that
 * gets only part of an input (a shard of a sharded store, format/shards.md)
 * gives each document its position in the whole input, so that its
 * insertion numbers, and every order kept by them (SIMSTORE_KEEP_FIRST,
 * export in insertion order), are those of one store of that input.
 * Positions only increase, so each is given once: gaps are allowed, and a
 * call with the position the next document would take anyway changes
 * nothing. Of documents given the same id, the one at the smallest position
 * is the first (kept with o->skip_existing; the source a clash names first),
 * whatever order they were added in.
 * Errors (the builder is left as it was): SIMSTORE_EINVAL (a fingerprint-only
 * builder; `position` below the next document's: at or below a position
 * already given), SIMSTORE_EFULL (`position` 2^40 or more: no insertion
 * number has it; a document added past 2^40 - 1 fails the finish the same
 * way). */
SIMSTORE_API int simstore_builder_set_position(simstore_builder *b, uint64_t position);

/* Add a bare fingerprint to a fingerprint-only builder.
 * Errors: SIMSTORE_EINVAL (the store keeps documents), SIMSTORE_EIO. */
SIMSTORE_API int simstore_builder_add_fp(simstore_builder *b, uint64_t fp);

/* Sort, write the tables, commit the documents in one LMDB transaction and
 * publish. Frees b whatever the outcome; on failure nothing changes: a new
 * store does not appear, an existing store keeps its last committed state.
 *
 * Clashing ids (a document id given twice, or, for an add, already stored;
 * fingerprint-only builders have none): each clash goes to o->clash, when
 * set, before the commit, in id order. With o->skip_existing the clashing
 * documents are skipped (neither stored nor counted; the first document
 * given with an id is the one kept) and the finish goes on. Without it the
 * finish fails with SIMSTORE_EINVAL: without o->clash at the first clash, the
 * detail naming both sources; with o->clash after reporting every clash, the
 * detail giving their number.
 *
 * Errors: SIMSTORE_EINVAL (clashing ids, above), SIMSTORE_EIO,
 * SIMSTORE_EFULL (also when the documents cannot be given insertion numbers,
 * simstore_match: 2^40 or more documents, or an add to a store at generation
 * 2^24 - 1), SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_builder_finish(simstore_builder *b);

/* Abandon a build; removes everything it wrote. Accepts NULL. */
SIMSTORE_API void simstore_builder_abort(simstore_builder *b);

#define SIMSTORE_OPEN_READONLY 0u
#define SIMSTORE_OPEN_WRITE 1u                /* take the writer lock: add, delete, compact */
#define SIMSTORE_OPEN_SKIP_BLOCK_CHECKSUMS 2u /* trust table blocks (faster) */
#define SIMSTORE_OPEN_NO_AUTO_COMPACT 4u      /* writers: never compact on their own */
/* Skip every check of data.mdb's pages (format/store.md, "Trusting
 * LMDB"): for a store whose disk is trusted; a damaged data.mdb may then
 * crash LMDB or give wrong answers. */
#define SIMSTORE_OPEN_TRUST_LMDB 8u
/* A read-only open checks, at open, only data.mdb's two meta pages, its
 * free list and its main database, and then, before each read of a query,
 * get or stats, the pages that read touches (format/store.md, "Trusting
 * LMDB"): its cost does not grow with the store. Whole-store scans (pairs,
 * clusters, export) walk the whole file first, as writers do at open. This
 * flag (`simstore query --full-walk`) makes a read-only open walk the whole
 * file at once instead. Either way
 * a damaged byte gives an error or a correct answer. */
#define SIMSTORE_OPEN_FULL_WALK 16u
/* Ask the kernel to bring the store's table and document files into the
 * page cache in 2 MiB folios as this process first reads them
 * (MADV_HUGEPAGE on their mappings): the first read of a 2 MiB region
 * reads all of it, and queries then find each region under one TLB entry
 * instead of 512. For query hosts that keep the store in RAM, after a
 * reboot or an eviction (a store just built, added to or compacted on the
 * machine is held so already: its writers write whole aligned 2 MiB
 * pieces); not for a store larger than RAM read at random, which would
 * read 2 MiB for each page it needs. A hint: with a kernel or file system
 * without large folios it changes nothing, and no answer depends on it. */
#define SIMSTORE_OPEN_HUGE_PAGES 32u

/* Open the store at `path`. Read-only opens work on read-only copies.
 * Errors: SIMSTORE_ENOTFOUND (no store there), SIMSTORE_ECORRUPT,
 * SIMSTORE_EVERSION, SIMSTORE_EBUSY (SIMSTORE_OPEN_WRITE while another
 * writer holds the store), SIMSTORE_EIO, SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_open(const char *path, unsigned flags, simstore **out);

/* Close a store; every simstore_query made from it must be freed first.
 * Accepts NULL. */
SIMSTORE_API void simstore_close(simstore *s);

/* Whether the path s was opened with now names another directory than the
 * one s opened, or nothing: build --replace swapped a new store in (or the
 * store was removed). A handle keeps answering from the store it opened
 * (its files stay mapped), so a long-running reader that must follow the
 * path calls this before each batch of queries and, on 1, closes s and
 * opens the path again. One stat() of the path; thread-safe. Returns 1 or 0
 * (0 for NULL). */
SIMSTORE_API int simstore_replaced(const simstore *s);

/* One answer. id and meta borrow the query object's memory: valid until the
 * next query on it or its free. For a fingerprint-only store id is NULL.
 * meta is NULL unless SIMSTORE_QUERY_WITH_META was set (or the document has
 * none).
 *
 * insertion orders documents as they were inserted: a document of a later
 * commit (build, then each add) has a larger number than every document of
 * an earlier one, and within one commit the documents given earlier have the
 * smaller numbers. The value is (the commit's generation << 40) | the
 * document's 0-based position among the documents given to that builder
 * (format/store.md, "The document record"). It is 0 for a fingerprint-only
 * store and for documents written by a simstore that predates it, which
 * therefore sort before every document inserted since. */
typedef struct simstore_match {
    const char *id; /* NUL-terminated as a convenience; id_len is the length */
    size_t id_len;
    uint64_t fp;
    unsigned distance;
    const char *meta;
    size_t meta_len;
    unsigned flags;     /* SIMSTORE_MATCH_INTEGER_ID or 0 */
    uint64_t insertion; /* insertion order, 0 when unknown (above) */
    /* Added with sketches (format/sketch.md). */
    double similarity;     /* the estimated Jaccard similarity of the query's
                           and the document's shingle sets, 0..1
                           (simstore_sketch_similarity); SIMSTORE_SIMILARITY_
                           UNKNOWN (-1) when the query came without a sketch
                           (by fingerprint) or the document has none (a store
                           without sketches, a fingerprint-only store)     */
    const uint8_t *sketch; /* the document's sketch, simstore_sketch_bytes()
                           of the store's kind; NULL when it has none.
                           Valid as id                                      */
} simstore_match;

/* simstore_match.flags: the document's id was given as an integer
 * (SIMSTORE_DOC_INTEGER_ID). */
#define SIMSTORE_MATCH_INTEGER_ID 1u

#define SIMSTORE_QUERY_WITH_META 1u

/* A query context for one thread. Errors: SIMSTORE_ENOMEM, SIMSTORE_EIO. */
SIMSTORE_API int simstore_query_new(simstore *s, unsigned flags, simstore_query **out);
SIMSTORE_API void simstore_query_free(simstore_query *q);

/* Every stored document whose fingerprint is within distance k of fp, sorted
 * by distance, then id bytes. *matches stays valid until the next call on q.
 * Allocates only when an answer outgrows the buffers of earlier ones.
 * k may exceed the store's k (its design's, simstore_stats.k) up to
 * SIMSTORE_MAX_K: the answer is as exact, each table probed at every prefix
 * within a few bits of the query's (format/design.md, "Beyond k"), so it
 * takes longer.
 * Errors: SIMSTORE_ERANGE (k above SIMSTORE_MAX_K, or a k whose probes would
 * pass 2^20 per segment: a k = 0 store asked 5 or more), SIMSTORE_ECORRUPT,
 * SIMSTORE_EIO, SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_query_fp(simstore_query *q, uint64_t fp, unsigned k,
                                   const simstore_match **matches, size_t *count);

/* simstore_query_fp() with the query's sketch (NULL: none), of the store's
 * sketch kind (simstore_get_text_options()), made from its text with the
 * store's text options: each match gets the estimated similarity of the
 * query's and its document's sets. Same answers, order and errors. */
SIMSTORE_API int simstore_query_fp_sketch(simstore_query *q, uint64_t fp, const uint8_t *sketch,
                                          unsigned k, const simstore_match **matches,
                                          size_t *count);

/* Fingerprint `text` with fpr (simstore_fingerprint_text) and query it; the
 * fingerprint goes to *fp when fp is not NULL. When the store records a
 * boilerplate set (simstore_get_boilerplate), the text is fingerprinted
 * without its lines, whatever set fpr carries (fpr keeps its own for other
 * calls). When fpr makes sketches of the store's kind (a fingerprinter made
 * with the store's text options does), the text is sketched in the same
 * pass and the matches carry their similarity (simstore_query_fp_sketch);
 * otherwise it is unknown. Same errors, plus those of fingerprinting. */
SIMSTORE_API int simstore_query_text(simstore_query *q, simstore_fingerprinter *fpr,
                                     const char *text, size_t len, unsigned k, uint64_t *fp,
                                     const simstore_match **matches, size_t *count);

/* One answer of simstore_query_paragraphs(): a stored document that has,
 * for `shared` of the query's `of` paragraphs, a paragraph within distance
 * k. id and meta as in simstore_match, valid until the next call on q. */
typedef struct simstore_paragraph_match {
    const char *id; /* NUL-terminated as a convenience */
    size_t id_len;
    unsigned flags; /* SIMSTORE_MATCH_INTEGER_ID or 0 */
    size_t shared;
    size_t of;
    double fraction;  /* shared / of */
    uint64_t fp;      /* the document's (whole-text) fingerprint */
    const char *meta; /* with SIMSTORE_QUERY_WITH_META, else NULL */
    size_t meta_len;
} simstore_paragraph_match;

/* The documents sharing near-duplicate paragraphs with a query document
 * whose paragraphs (simstore_paragraph_fingerprints with the store's
 * paragraph_min_words) are fps[0..n): for each stored document, shared =
 * how many of the n query paragraphs (repeats counted each) have at least
 * one of its indexed paragraphs within distance k, of = n; those with
 * shared > 0 and shared / n >= min_fraction, sorted by fraction (larger
 * first), then id bytes. Found through the paragraph tables (exact, as
 * simstore_query_fp is for documents). *matches stays valid until the next
 * call on q. n = 0 answers nothing.
 * Errors: SIMSTORE_EINVAL (the store has no paragraph index, fps NULL with
 * n > 0, min_fraction outside 0..1), SIMSTORE_ERANGE (k above the store's
 * design), SIMSTORE_ECORRUPT, SIMSTORE_EIO, SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_query_paragraphs(simstore_query *q, const uint64_t *fps, size_t n,
                                           unsigned k, double min_fraction,
                                           const simstore_paragraph_match **matches, size_t *count);

/* Whether a document with this id is stored, in the state committed now:
 * 1 (its fingerprint to *fp when fp is not NULL), 0 when not. A fingerprint-
 * only store has no documents (always 0). Errors: SIMSTORE_EINVAL (q or id
 * NULL, id_len 0 or above SIMSTORE_MAX_ID_BYTES); SIMSTORE_ECORRUPT,
 * SIMSTORE_EIO. Uses q's read transaction: same threads rule as queries. */
SIMSTORE_API int simstore_query_has_id(simstore_query *q, const char *id, size_t id_len,
                                       uint64_t *fp);
/* ---- Batch queries --------------------------------------------------------
 * Many queries at once (lib/scan/batch.c): per table of every segment the
 * queries are sorted by their permuted probe range, then the table is either
 * merge-scanned (its blocks walked in order, each needed block decoded once
 * for every query whose range touches it) or probed query by query in that
 * order; the candidates are de-duplicated per query and their documents
 * looked up in fingerprint order. The answers are exactly those of
 * simstore_query_fp(): the same matches, in the same order, with the same
 * flags and metadata and the same checks (corruption is an error, never a
 * wrong answer), all from one committed state of the store. */

typedef enum simstore_batch_strategy {
    SIMSTORE_BATCH_AUTO = 0,  /* per table and segment, by the cost model:
                                 blocks to decode against probes to make    */
    SIMSTORE_BATCH_PROBE = 1, /* probe every table for every query          */
    SIMSTORE_BATCH_SCAN = 2   /* merge-scan every table                     */
} simstore_batch_strategy;

typedef struct simstore_batch_options {
    size_t size;      /* sizeof(simstore_batch_options), set by simstore_batch_options_init() */
    unsigned threads; /* worker threads; 0 = simstore_default_threads() (0) */
    uint64_t memory_bytes;            /* working memory: queries are answered in chunks
                                whose sorting and bookkeeping take half of it
                                (about 16 * (2 * threads + 4) bytes a query);
                                a chunk whose candidates and documents pass
                                the other half is answered again in halves,
                                down to one query, whose answer is held whole
                                as simstore_query_fp() holds it (256 MiB)       */
    simstore_batch_strategy strategy; /* (SIMSTORE_BATCH_AUTO)                 */
    unsigned flags;                   /* SIMSTORE_QUERY_WITH_META or 0 (0)              */
} simstore_batch_options;

/* Fill *o with the defaults shown above. Set fields after calling it. */
SIMSTORE_API void simstore_batch_options_init(simstore_batch_options *o);

/* Receives the answer to query `index` (fps[index] = fp), exactly as
 * simstore_query_fp() would give it: `matches` (count of them) are valid
 * only during the call. Return 0 to go on, anything else to stop the batch. */
typedef int (*simstore_batch_fn)(void *ctx, size_t index, uint64_t fp,
                                 const simstore_match *matches, size_t count);

/* Answer the queries fps[0..n) for distance k, calling fn once per query in
 * input order (index 0, 1, ..., n - 1), from the calling thread.
 *   o    the options; NULL for the defaults.
 * Returns SIMSTORE_OK; fn's nonzero value when it stopped the batch;
 * SIMSTORE_EINVAL (s or fn NULL, fps NULL with n > 0, an unknown strategy or
 * flag); SIMSTORE_ERANGE (as simstore_query_fp(); above the store's k each
 * query has a probe range per prefix near its own); SIMSTORE_ECORRUPT,
 * SIMSTORE_EIO, SIMSTORE_ENOMEM (queries answered before the failure have
 * had their callbacks; no other will); SIMSTORE_EBUSY (the store kept
 * changing while the batch began).
 * Threads: any number of batches and queries may run on one handle at once;
 * the batch starts its own worker threads. */
SIMSTORE_API int simstore_query_batch(simstore *s, const uint64_t *fps, size_t n, unsigned k,
                                      const simstore_batch_options *o, simstore_batch_fn fn,
                                      void *ctx);

/* simstore_query_batch() with the queries' sketches: sketches holds n
 * sketches of the store's kind one after another (query i's at
 * i * simstore_sketch_bytes(kind)), each made from its query's text with the
 * store's text options, as simstore_query_fp_sketch() takes them; the
 * matches carry their similarity. NULL, or a store that keeps no sketches:
 * exactly simstore_query_batch(). */
SIMSTORE_API int simstore_query_batch_sketches(simstore *s, const uint64_t *fps,
                                               const uint8_t *sketches, size_t n, unsigned k,
                                               const simstore_batch_options *o,
                                               simstore_batch_fn fn, void *ctx);

typedef struct simstore_stats {
    unsigned k;
    unsigned tables;
    unsigned block_bytes;
    int fingerprint_only;
    uint64_t documents;
    uint64_t fingerprints; /* distinct, with at least one document */
    uint64_t segments;
    uint64_t generation;
    uint64_t table_fps;       /* fingerprints held per table, all segments */
    uint64_t table_bytes;     /* all table files */
    uint64_t lmdb_bytes;      /* data.mdb */
    uint64_t block_key_bytes; /* block keys held in RAM by an open store */
    char design[160]; /* e.g. "k=3: 1 level (4 blocks choose 1), 4 tables, prefix 16 bits" */
    /* Added with sketches. */
    simstore_sketch_kind sketch; /* the sketch every document keeps (NONE)  */
    unsigned sketch_bytes;       /* its bytes in each document record (0)    */
    /* Added with the split by part: data.mdb's bytes (lmdb_bytes) by what
     * holds them; the five add up to lmdb_bytes, less any partial page. */
    uint64_t lmdb_records_bytes; /* docs: the document records, by id        */
    uint64_t lmdb_mapping_bytes; /* fps: fingerprint -> document ids         */
    uint64_t lmdb_other_bytes;   /* meta pages and database, LMDB's trees, the
                                    paragraph index (pfps)                  */
    uint64_t lmdb_free_bytes;    /* freed pages LMDB reuses for later writes  */
    uint64_t lmdb_tail_bytes;    /* the file past its last page in use        */
    /* Added with the paragraph index (0 in a store without one). */
    unsigned paragraph_min_words; /* the store's minimum, 0: no index        */
    uint64_t paragraph_entries;   /* (paragraph, document) entries in pfps   */
    uint64_t paragraph_fps;       /* distinct paragraph fingerprints there   */
    uint64_t paragraph_segments;
    uint64_t paragraph_table_fps; /* held per table, all paragraph segments  */
    uint64_t paragraph_table_bytes;
    /* Added with document files (format/store.md, "Document files"; 0 in a
     * store whose documents are all in LMDB). */
    uint64_t document_file_bytes;
    /* Added with the log's recovery (format/wal.md): the store's live.wal,
     * read without changing it. While a server runs, pending changes are
     * ones it holds in memory; after it stopped, ones the next writer
     * applies first (simstore_live_recover()). */
    uint64_t wal_bytes;           /* the file's size (0: no log)               */
    uint64_t wal_pending_records; /* acknowledged changes the store's files do
                                     not hold yet (after the applied one)     */
    uint64_t wal_torn_bytes;      /* bytes after the last whole record: a group
                                     being written, or a torn tail            */
    int wal_damaged;              /* the log fails its checks (verify says
                                     where); the counts above are then 0      */
} simstore_stats;

/* Counts and sizes of an open store. Errors: SIMSTORE_EIO, SIMSTORE_ECORRUPT. */
SIMSTORE_API int simstore_get_stats(simstore *s, simstore_stats *out);

/* The text options the store's documents were fingerprinted with (recorded
 * at build, with SIMSTORE_CJK_AUTO resolved to the segmenter then in effect),
 * for fingerprinting text queries the same way. Cannot fail. */
SIMSTORE_API void simstore_get_text_options(const simstore *s, simstore_text_options *out);

/* ---- Boilerplate -----------------------------------------------------------
 * Lines that occur in more than a fraction of a corpus's documents (a site's
 * navigation, headers and footers), found in a first pass over the corpus
 * and removed from every text before it is fingerprinted, so that pages of
 * one site do not look alike through their template and copies under other
 * templates still do (format/fingerprint.md, "Boilerplate"):
 *  - a line is a run of bytes between LFs; its key is the XXH3-64 (seed
 *    "SIMSLINE") of its tokens joined by spaces, made by the fingerprint's
 *    own tokenizer (so case, normalization, spacing and punctuation do not
 *    matter); a line without tokens has no key and is never boilerplate;
 *  - a counter takes the corpus's documents and counts, exactly and in
 *    bounded memory (spilling sorted runs), the documents holding each key;
 *    the set is the keys held by more than `fraction` of N documents (and at
 *    least 2), N being at least min_documents, else the set is empty;
 *  - a fingerprinter carrying a set fingerprints the text without the lines
 *    whose key is in it; a text that is nothing but such lines is
 *    fingerprinted whole and flagged SIMSTORE_FP_ONLY_BOILERPLATE;
 *  - a store built with a set records it (format/store.md, the boilerplate
 *    record) and applies it to adds and text queries: it never changes.
 * Threads: a set is immutable once made, and may be shared by any number of
 * fingerprinters on any threads. A counter is used by one thread at a time. */

/* simstore_fingerprint_text() and simstore_fingerprint_paragraphs() flag:
 * with a boilerplate set, every line of the text that has tokens is
 * boilerplate. The fingerprint is then that of the whole text (no line
 * removed); paragraphs report none. */
#define SIMSTORE_FP_ONLY_BOILERPLATE 0x4u

/* Defaults of simstore_boilerplate_options. */
#define SIMSTORE_BOILERPLATE_FRACTION_DEFAULT 0.1
#define SIMSTORE_BOILERPLATE_MIN_DOCUMENTS_DEFAULT 100u

typedef struct simstore_boilerplate simstore_boilerplate;
typedef struct simstore_boilerplate_counter simstore_boilerplate_counter;

typedef struct simstore_boilerplate_options {
    size_t
        size; /* sizeof(simstore_boilerplate_options), set by simstore_boilerplate_options_init() */
    double fraction;        /* a line is boilerplate when more than this share
                               of the documents hold it: 0 < f < 1, used in
                               millionths, round(f * 10^6) in 1..999999 (0.1) */
    uint64_t min_documents; /* with fewer documents no line is boilerplate
                               (SIMSTORE_BOILERPLATE_MIN_DOCUMENTS_DEFAULT)   */
    uint64_t memory_bytes;  /* for the counts: 16 bytes per line occurrence
                               held before a sorted run spills to tmp_dir, at
                               least 1 MiB (64 MiB)                           */
    const char *tmp_dir;    /* spilled runs (unlinked files); NULL: $TMPDIR,
                               else /tmp (NULL)                               */
} simstore_boilerplate_options;

/* Fill *o with the defaults above. */
SIMSTORE_API void simstore_boilerplate_options_init(simstore_boilerplate_options *o);

/* What a set is: the parameters and counts it was made with. */
typedef struct simstore_boilerplate_info {
    double fraction;              /* fraction_millionths / 10^6            */
    uint32_t fraction_millionths; /* 1..999999                             */
    uint64_t min_documents;       /* fewer documents: no line boilerplate  */
    uint64_t documents;           /* documents the first pass counted (N)  */
    uint64_t lines;               /* keys in the set                       */
} simstore_boilerplate_info;

/* Start counting the lines of a corpus whose texts are fingerprinted with
 * `text` (NULL: the defaults): line keys depend on the fingerprint version
 * and the Han segmenter, so count with the options the texts will be
 * fingerprinted with. o: NULL for the defaults.
 *   out  receives the counter, released with
 *        simstore_boilerplate_counter_free(); NULL on failure.
 * Errors: SIMSTORE_EINVAL (out NULL, fraction outside (0, 1) or rounding
 * to 0 or 10^6 millionths; a text option out of range, as
 * simstore_fingerprinter_new()), SIMSTORE_ENOTFOUND (friso asked for and
 * not loadable), SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_boilerplate_counter_new(const simstore_text_options *text,
                                                  const simstore_boilerplate_options *o,
                                                  simstore_boilerplate_counter **out);

/* Count one document: its text (len bytes of UTF-8, as for
 * simstore_fingerprint_text()). Each key counts once per document.
 * Errors: SIMSTORE_EINVAL (NULL c, text NULL with len > 0, after finish),
 * SIMSTORE_EIO (spilling), SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_boilerplate_counter_add(simstore_boilerplate_counter *c, const char *text,
                                                  size_t len);

/* Count one document given by its line keys (from
 * simstore_fingerprinter_line_keys(), made with the counter's text options,
 * typically on other threads): keys[0..n) in any order, repeats counted
 * once. Same errors as simstore_boilerplate_counter_add(). */
SIMSTORE_API int simstore_boilerplate_counter_add_keys(simstore_boilerplate_counter *c,
                                                       const uint64_t *keys, size_t n);

/* Documents counted so far; 0 for NULL. */
SIMSTORE_API uint64_t simstore_boilerplate_counter_documents(const simstore_boilerplate_counter *c);

/* Merge the counts and make the set. The counter takes no more documents
 * (free it). out receives the set, owned by the caller (release with
 * simstore_boilerplate_free()). Errors: SIMSTORE_EINVAL (called twice),
 * SIMSTORE_EIO (reading spilled runs), SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_boilerplate_counter_finish(simstore_boilerplate_counter *c,
                                                     simstore_boilerplate **out);

/* Receives one key's document count: the number of counted documents
 * holding a line with that key. Returns 0, or an error code that stops the
 * walk (and is returned by it). */
typedef int (*simstore_line_count_fn)(void *ctx, uint64_t key, uint64_t documents);

/* Every key's document count, keys strictly increasing, to fn: for counts
 * merged elsewhere (simstore-mpi adds up its ranks' counts; the set is then
 * the keys whose sum passes simstore_boilerplate_is_line() for the sum of
 * the documents). The first call ends the counting (no more documents:
 * SIMSTORE_EINVAL); it may be called again, and
 * simstore_boilerplate_counter_finish() after it. Memory: a read buffer;
 * spilled runs are merged from disk again on every call. Errors:
 * SIMSTORE_EINVAL (NULL c or fn), SIMSTORE_EIO (reading spilled runs),
 * SIMSTORE_ENOMEM, or fn's code. */
SIMSTORE_API int simstore_boilerplate_counter_each(simstore_boilerplate_counter *c,
                                                   simstore_line_count_fn fn, void *ctx);

/* The counter's parameters and its documents so far to *out (lines 0).
 * c must not be NULL. Cannot fail. */
SIMSTORE_API void simstore_boilerplate_counter_info(const simstore_boilerplate_counter *c,
                                                    simstore_boilerplate_info *out);

/* The rule of format/fingerprint.md, "Boilerplate": 1 when a key held by
 * df of info->documents documents is boilerplate (info->documents at least
 * info->min_documents, df at least 2, and df * 10^6 greater than
 * info->fraction_millionths * info->documents, exactly), else 0. Only
 * documents, min_documents and fraction_millionths are read. Cannot fail. */
SIMSTORE_API int simstore_boilerplate_is_line(const simstore_boilerplate_info *info, uint64_t df);

/* Release a counter and its spilled runs; NULL is allowed. */
SIMSTORE_API void simstore_boilerplate_counter_free(simstore_boilerplate_counter *c);

/* A set from known keys[0..n) (any order; repeats dropped): for tests and
 * for sets kept elsewhere. info supplies fraction, min_documents and
 * documents (NULL: the default fraction and minimum, 0 documents); its
 * `lines` is ignored. Errors: SIMSTORE_EINVAL (out NULL, keys NULL with
 * n > 0, a fraction as for the counter), SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_boilerplate_new(const uint64_t *keys, size_t n,
                                          const simstore_boilerplate_info *info,
                                          simstore_boilerplate **out);

/* Release a set; NULL is allowed. Fingerprinters and builders given it must
 * be done with it first (a store's own set is the store's: never free it). */
SIMSTORE_API void simstore_boilerplate_free(simstore_boilerplate *bp);

/* Fill *out. Cannot fail. */
SIMSTORE_API void simstore_boilerplate_get_info(const simstore_boilerplate *bp,
                                                simstore_boilerplate_info *out);

/* The set's keys, strictly increasing (info.lines of them); valid as long
 * as the set. */
SIMSTORE_API const uint64_t *simstore_boilerplate_keys(const simstore_boilerplate *bp);

/* 1 when key is in the set, else 0 (also for a NULL set). */
SIMSTORE_API int simstore_boilerplate_contains(const simstore_boilerplate *bp, uint64_t key);

/* The key of every line of text[0..len) that has one, distinct and
 * increasing, made with fpr's options: *keys (count of them) stays valid
 * until the next call on fpr. Errors: SIMSTORE_EINVAL (NULL fpr, keys or
 * count, text NULL with len > 0), SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_fingerprinter_line_keys(simstore_fingerprinter *fpr, const char *text,
                                                  size_t len, const uint64_t **keys, size_t *count);

/* From now on fingerprint texts (and paragraphs) without the lines whose key
 * is in bp; NULL stops removing. bp is borrowed: it must outlive fpr's use
 * of it. A set of no keys removes nothing and costs nothing.
 * Errors: SIMSTORE_EINVAL (fpr NULL), SIMSTORE_ENOMEM (fpr keeps the set it
 * had). */
SIMSTORE_API int simstore_fingerprinter_set_boilerplate(simstore_fingerprinter *fpr,
                                                        const simstore_boilerplate *bp);

/* The set fpr removes, or NULL. */
SIMSTORE_API const simstore_boilerplate *
simstore_fingerprinter_boilerplate(const simstore_fingerprinter *fpr);

/* The boilerplate set the store recorded when it was built, or NULL when it
 * has none (built without one). Owned by s: valid until simstore_close().
 * simstore_query_text() applies it; a fingerprinter that makes documents
 * for an add or a query must carry it (simstore_fingerprinter_set_boilerplate).
 * Cannot fail (a damaged record fails simstore_open() with
 * SIMSTORE_ECORRUPT). */
SIMSTORE_API const simstore_boilerplate *simstore_get_boilerplate(const simstore *s);

/* Record bp in the store a builder of simstore_build_begin() makes (before
 * simstore_builder_finish()); the documents given must have been
 * fingerprinted without its lines (a fingerprinter carrying it, with the
 * builder's text options). The set is copied. A store's set never changes:
 * adds apply it, they do not take a new one.
 * Errors: SIMSTORE_EINVAL (NULL argument; an add's builder; a
 * fingerprint-only builder), SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_builder_set_boilerplate(simstore_builder *b,
                                                  const simstore_boilerplate *bp);

/* ---- Changing a store ----------------------------------------------------
 * Adds (simstore_add_begin) create a new segment; deletes remove documents at
 * once but leave their fingerprints in the table files ("dead") until a
 * compaction rewrites the live fingerprints into one segment. The automatic
 * policy: after an add, a writer compacts when the store has more than
 * SIMSTORE_MAX_SEGMENTS segments; after a delete, when more than
 * SIMSTORE_COMPACT_DEAD_SHARE of the tables' fingerprints are dead. Open with
 * SIMSTORE_OPEN_NO_AUTO_COMPACT to compact only on request. Every change is
 * one commit: readers see the store before it or after it. */

#define SIMSTORE_MAX_SEGMENTS 8
#define SIMSTORE_COMPACT_DEAD_SHARE 0.5

/* Called with each id simstore_delete() did not find. */
typedef void (*simstore_missing_fn)(void *ctx, const char *id, size_t id_len);

/* Delete the documents with the given ids, in one transaction. Ids that are
 * not stored are not errors: they go to `missing` (may be NULL) after the
 * commit. *deleted (may be NULL) receives the number removed. The store must
 * be open with SIMSTORE_OPEN_WRITE and keep documents.
 * Errors: SIMSTORE_EREADONLY, SIMSTORE_EINVAL (a fingerprint-only store),
 * SIMSTORE_ECORRUPT, SIMSTORE_EIO, SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_delete(simstore *s, const char *const *ids, const size_t *id_lens,
                                 size_t n, uint64_t *deleted, simstore_missing_fn missing,
                                 void *ctx);

/* The resources (memory_bytes, threads, progress of o; NULL: the defaults)
 * the automatic compaction after simstore_delete() may use on this handle,
 * and whom it tells (compacted). o is copied. Adds use their builder's
 * options instead. Errors: SIMSTORE_EINVAL (o not filled by
 * simstore_build_options_init()). */
SIMSTORE_API int simstore_set_maintenance_options(simstore *s, const simstore_build_options *o);

/* Rewrite every segment into one that holds only live fingerprints; remove
 * the old files after the commit. A store of one segment without dead
 * fingerprints is left as it is. o supplies memory_bytes, threads,
 * progress and compacted (told after the commit; not when the store was
 * left as it is) (NULL: defaults). Errors: SIMSTORE_EREADONLY, SIMSTORE_EBUSY,
 * SIMSTORE_ECORRUPT, SIMSTORE_EIO, SIMSTORE_EFULL, SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_compact(simstore *s, const simstore_build_options *o);

/* Give data.mdb's free pages back to the file system. LMDB never shrinks its
 * file: pages freed by deletes, adds and compactions are kept for reuse.
 * This writes a compact copy of data.mdb (free pages left out) beside the
 * store, with hard links to its table files, checks the copy (the whole of
 * it walked), and swaps it in for the store at `path` in one atomic
 * exchange, as build --replace does, holding the store's writer lock from
 * start to end; then removes the old directory. Processes that have the
 * store open keep answering from what they opened (reopen to see the new
 * one); a crash at any instant leaves the old store or the new one, each
 * whole (format/store.md, "Shrinking data.mdb"). The sizes of data.mdb
 * before and after go to *bytes_before and *bytes_after (either may be
 * NULL). Errors: SIMSTORE_ENOTFOUND, SIMSTORE_EBUSY (a writer or a server
 * holds the store), SIMSTORE_ECORRUPT, SIMSTORE_EIO, SIMSTORE_EFULL,
 * SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_shrink(const char *path, uint64_t *bytes_before, uint64_t *bytes_after);

/* Compact when the automatic policy says so (see above); otherwise do
 * nothing. Same errors as simstore_compact(). */
SIMSTORE_API int simstore_maybe_compact(simstore *s, const simstore_build_options *o);

/* The policy after a delete: compact only when more than
 * SIMSTORE_COMPACT_DEAD_SHARE of the tables' fingerprints are dead (a delete
 * adds no segment). Same errors as simstore_compact(). */
SIMSTORE_API int simstore_maybe_compact_dead(simstore *s, const simstore_build_options *o);

/* ---- Inspection and verification -----------------------------------------
 * Looking inside a store, or one table file, without trusting it
 * (format/table.md, format/store.md). A table handle opens one table file
 * alone (no store, no LMDB) or one table of an open store; it validates the
 * header, footer and index at open and every block it decodes.
 * simstore_verify() checks a whole store or one table file and reports every
 * problem through a callback, continuing past a problem wherever that is
 * safe.
 *
 * Threads: a table handle may be used by several threads at once (it is
 * read-only after open). simstore_verify() keeps its state on the caller's
 * stack and heap; its callback runs in the calling thread. */

typedef struct simstore_table simstore_table;

/* Open the table file at `path` for inspection: map it and validate header,
 * footer and index (checksums, bounds, key order); blocks are checked as they
 * are read.
 *   path  a table file (format/table.md); not a store directory.
 *   out   receives the handle, owned by the caller, released with
 *         simstore_table_close(); NULL on failure.
 * Errors: SIMSTORE_EINVAL (path or out NULL); SIMSTORE_ENOTFOUND (no such
 * file); SIMSTORE_ECORRUPT (the detail names the rule broken and its byte
 * offset); SIMSTORE_EVERSION (a table format this build does not read);
 * SIMSTORE_EIO; SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_table_open(const char *path, simstore_table **out);

/* Open table `table` of the segment at position `segment` (0-based, in the
 * order of the store's committed state; see simstore_get_segment()) of an
 * open store. The handle shares the store's mapping of the file and keeps it
 * alive until simstore_table_close(), even past simstore_close(s).
 * Errors: SIMSTORE_EINVAL (NULL argument, or table beyond the design's
 * tables); SIMSTORE_ENOTFOUND (no such segment: a writer may have committed
 * since the count was read); SIMSTORE_ECORRUPT, SIMSTORE_EIO (loading the
 * segment's files); SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_open_segment_table(simstore *s, uint64_t segment, unsigned table,
                                             simstore_table **out);

/* Release a table handle; NULL is allowed. */
SIMSTORE_API void simstore_table_close(simstore_table *t);

/* A table file's facts, all validated at open. */
typedef struct simstore_table_info {
    const char *path; /* the file; valid until simstore_table_close() */
    unsigned format_version;
    unsigned block_bytes;
    unsigned prefix_bits; /* the leading bits a query probes on        */
    uint64_t store_tag;   /* the store the file belongs to             */
    unsigned table_index; /* its table number in that store's design   */
    uint64_t fingerprints;
    uint64_t blocks;
    uint64_t max_block_fingerprints; /* the most any block holds: room enough
                                        for simstore_table_read_block()     */
    uint64_t file_bytes;
    uint64_t blocks_offset; /* byte offset of block 0                   */
    uint64_t index_offset;  /* byte offset of the block index           */
    uint64_t footer_offset;
    uint64_t key_ram_bytes;   /* the index a reader keeps in memory       */
    double bits_per_fp;       /* 8 * file_bytes / fingerprints (0 if none) */
    double floor_bits_per_fp; /* 64 - log2(fingerprints) + 1.443: the
                                  information-theoretic size of a sorted set */
    uint8_t perm[64];         /* bit i of a permuted value is bit perm[i] of
                                  the fingerprint (bit 63 most significant) */
    uint8_t code_lengths[64]; /* Huffman code length of leading-bit position
                                  j (0: no code)                           */
    char permutation[192];    /* perm and prefix in words, e.g. "prefix bits
                                  63..48 (16), then 47..0"                 */
} simstore_table_info;

/* Fill *out. Cannot fail. */
SIMSTORE_API void simstore_table_get_info(const simstore_table *t, simstore_table_info *out);

/* One block, as the index describes it. */
typedef struct simstore_block_info {
    uint64_t block;
    uint64_t offset;       /* byte offset of the block in the file      */
    uint32_t fingerprints; /* values it holds                           */
    uint32_t checksum;     /* as stored in the index: table format 1,
                              the block's; format 2, that of the blocks
                              of its 4 KiB page                         */
    uint64_t first;        /* its first (smallest) permuted value       */
    uint64_t key;          /* its last (largest) permuted value: the key
                              readers keep in memory                    */
    uint64_t used_bits;    /* bits its values occupy; the rest is zero
                              padding                                   */
} simstore_block_info;

/* Verify (checksum, decode, count, last value = key, zero padding) and
 * decode block `block`.
 *   info    if not NULL, receives the block's facts.
 *   values  if not NULL, receives its permuted values in increasing order
 *           (unpermute with simstore_table_unpermute()); room for cap values.
 *   n       if not NULL, receives the number of values.
 * Errors: SIMSTORE_EINVAL (block out of range; values given with cap below
 * the block's count); SIMSTORE_ECORRUPT (the detail names the file, block
 * and byte offset). */
SIMSTORE_API int simstore_table_read_block(const simstore_table *t, uint64_t block,
                                           simstore_block_info *info, uint64_t *values, size_t cap,
                                           size_t *n);

/* The first block whose key is >= `permuted` (the only block that can hold
 * it), or the block count when there is none. Cannot fail. */
SIMSTORE_API uint64_t simstore_table_find_block(const simstore_table *t, uint64_t permuted);

/* A fingerprint under the table's permutation, and back. */
SIMSTORE_API uint64_t simstore_table_permute(const simstore_table *t, uint64_t fp);
SIMSTORE_API uint64_t simstore_table_unpermute(const simstore_table *t, uint64_t permuted);

/* The histogram of the leading 1-bit position j of consecutive differences
 * (the symbols the Huffman code codes). */
typedef struct simstore_histogram {
    uint64_t count[64];   /* differences whose leading 1-bit is j      */
    uint64_t differences; /* their sum                                 */
    uint64_t blocks_decoded;
    uint64_t payload_bits; /* bits the decoded blocks' values occupy    */
    int exact;             /* every block was decoded                   */
} simstore_histogram;

/* Decode blocks (verifying each) and count. max_blocks = 0 decodes every
 * block: exact, but a large table takes a few seconds per 10^8
 * fingerprints; otherwise at most max_blocks blocks spread evenly over the
 * table, a sample (divide count[j] by differences for shares).
 * Errors: SIMSTORE_ECORRUPT (a block fails its checks; the detail names the
 * file, block and byte offset); SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_table_histogram(const simstore_table *t, uint64_t max_blocks,
                                          simstore_histogram *out);

/* One segment of an open store's committed state. */
typedef struct simstore_segment_info {
    uint64_t id;           /* names its files: sIIIIIIIIII-tTTT.tbl          */
    uint64_t fingerprints; /* in each of its tables (live and dead)          */
    uint64_t created_unix;
    unsigned tables;
    int paragraphs; /* a paragraph segment (format/store.md,
                              "Paragraphs"): positions segments ..
                              segments + paragraph_segments - 1         */
    /* Added with document files: the segment's, sIIIIIIIIII.doc
     * (format/docfile.md), its documents and its bytes by part; all 0 for a
     * segment without one. */
    uint64_t docfile_documents;
    uint64_t docfile_bytes;       /* the whole file */
    uint64_t docfile_block_bytes; /* record blocks: fingerprints, ids, insertion
                                     numbers, metadata, sketches */
    uint64_t docfile_index_bytes; /* block table, fingerprint directory, id
                                     entries and id directory */
} simstore_segment_info;

/* Segment number `segment` (0 <= segment < simstore_stats.segments, then,
 * in a store with a paragraph index, the paragraph segments up to
 * segments + paragraph_segments) of the state committed now. Errors: SIMSTORE_EINVAL (NULL argument);
 * SIMSTORE_ENOTFOUND (no such segment); SIMSTORE_ECORRUPT, SIMSTORE_EIO. */
SIMSTORE_API int simstore_get_segment(simstore *s, uint64_t segment, simstore_segment_info *out);

/* Table `table` of the store's design in words, e.g. "blocks 0 | 1: bits
 * 63..48 47..36 (p=28)" (chosen level-1 blocks, "|" then level-2 blocks,
 * then the prefix's original bit ranges). snprintf conventions: returns the
 * length the whole text needs; SIMSTORE_EINVAL for a table beyond the
 * design. */
SIMSTORE_API int simstore_describe_table(const simstore *s, unsigned table, char *buf, size_t size);

/* What simstore_verify() checks:
 *  - a store directory: data.mdb's B-tree structure (every page; LMDB 0.9
 *    keeps no checksums), the store, text, state and design records, every
 *    live table file (header, footer, index and block checksums; decoding,
 *    order and uniqueness inside and across blocks; counts; tag, table number,
 *    block size, permutation and count against the store), every table of a
 *    segment holding the same fingerprint set, every fps fingerprint held by
 *    a live segment, docs and fps agreeing both ways, the state's counts, and
 *    files the store does not use (warnings);
 *  - one table file: everything a file can say about itself.
 * Sets are compared exactly (sorted) for segments of up to 2^22
 * fingerprints, beyond that by an order-independent digest (count, sum and
 * xor of a 64-bit mix of each fingerprint), which misses a difference only
 * by a 2^-64-scale coincidence. */
#define SIMSTORE_VERIFY_QUICK                                                                      \
    1u /* headers, indexes, records and counts only:
                                    no block decoding, no set or document
                                    cross-checks (the LMDB walk still runs) */

/* What one problem is about (stable numbers, for programs and tests). */
typedef enum simstore_problem_kind {
    SIMSTORE_PROBLEM_IO = 1,            /* a file could not be read           */
    SIMSTORE_PROBLEM_MISSING,           /* a file the store needs is missing  */
    SIMSTORE_PROBLEM_LEFTOVER,          /* (warning) a file the store does not
                                          use: a temporary or stale file     */
    SIMSTORE_PROBLEM_LMDB,              /* data.mdb's own structure           */
    SIMSTORE_PROBLEM_RECORD,            /* the store, state, text or design
                                          record                             */
    SIMSTORE_PROBLEM_TABLE,             /* a table file's header, footer or
                                          index                              */
    SIMSTORE_PROBLEM_BLOCK,             /* a table block                      */
    SIMSTORE_PROBLEM_TABLE_STORE,       /* a table file that does not belong:
                                          store tag, table number, block size,
                                          permutation or count               */
    SIMSTORE_PROBLEM_TABLE_SET,         /* the tables of a segment hold
                                          different fingerprints             */
    SIMSTORE_PROBLEM_SEGMENT_OVERLAP,   /* a fingerprint held by two segments */
    SIMSTORE_PROBLEM_DOC,               /* a document record fails its checks */
    SIMSTORE_PROBLEM_DOC_WITHOUT_FPS,   /* a document missing from fps        */
    SIMSTORE_PROBLEM_FPS_WITHOUT_DOC,   /* an fps entry without its document,
                                          or under another fingerprint       */
    SIMSTORE_PROBLEM_FPS_WITHOUT_TABLE, /* an fps fingerprint no live segment
                                          holds                              */
    SIMSTORE_PROBLEM_COUNTS,            /* the state's counts disagree        */
    SIMSTORE_PROBLEM_LOG                /* the write-ahead log (live.wal): damage
                                          (an error); changes not yet in the
                                          store's files, a torn tail (warnings) */
} simstore_problem_kind;

/* One problem. The strings are valid only during the callback. */
typedef struct simstore_problem {
    simstore_problem_kind kind;
    int warning;         /* 1: harmless to answers (leftover files, LMDB
                             pages neither used nor free, dead duplicates, a
                             document without the sketch its store keeps);
                             0: an error                                    */
    const char *file;    /* the file concerned (path), or NULL             */
    int64_t block;       /* the table block, or the LMDB page for
                             SIMSTORE_PROBLEM_LMDB; -1 when none            */
    int64_t offset;      /* byte offset in the file; -1 when unknown       */
    const char *message; /* one line naming what is wrong and where        */
} simstore_problem;

/* Receives each problem; return 0 to go on, nonzero to stop verify (which
 * then returns that value). */
typedef int (*simstore_problem_fn)(void *ctx, const simstore_problem *p);

typedef struct simstore_verify_summary {
    int store; /* 1: a store directory; 0: one table file   */
    uint64_t errors;
    uint64_t warnings;
    uint64_t table_files;       /* table files opened                        */
    uint64_t blocks;            /* blocks decoded                            */
    uint64_t fingerprints;      /* values decoded, over all tables           */
    uint64_t documents;         /* docs entries checked                      */
    uint64_t fps_entries;       /* fps (fingerprint, id) entries checked     */
    uint64_t lmdb_pages;        /* data.mdb pages walked                     */
    uint64_t dead_fingerprints; /* held by tables, without documents        */
    int sets_by_digest;         /* some segment was compared by digest       */
    /* Added with the paragraph index. */
    uint64_t paragraph_entries; /* pfps (paragraph, id) entries checked      */
    /* Added with the log's checks. */
    uint64_t log_records; /* whole records of live.wal checked          */
    uint64_t log_pending; /* changes among them the store's files do
                                  not hold yet                               */
    unsigned attempts;    /* checks made: more than 1 when a writer
                                  committed meanwhile and the store was
                                  checked again in its new state             */
} simstore_verify_summary;

/* Verify the store directory or table file at `path`.
 *   flags    0 or SIMSTORE_VERIFY_QUICK.
 *   fn, ctx  receive each problem as it is found (fn may be NULL).
 *   summary  if not NULL, receives counts (also on failure).
 * Returns SIMSTORE_OK when no error was found (warnings allowed);
 * SIMSTORE_ECORRUPT when at least one was (each went to fn; the detail holds
 * the first); SIMSTORE_EINVAL (NULL path, unknown flag); SIMSTORE_ENOTFOUND
 * (nothing at path, or neither a directory nor a regular file);
 * SIMSTORE_ENOMEM; or fn's nonzero value. Verify opens the store read-only
 * and never changes it; a writer may keep working meanwhile: a check that
 * finds errors while a writer has committed since it began (a compaction
 * removing the files of the state it read) is made again on the new state,
 * and only the last check's problems reach fn. */
SIMSTORE_API int simstore_verify(const char *path, unsigned flags, simstore_problem_fn fn,
                                 void *ctx, simstore_verify_summary *summary);

/* ---- Deduplicating a store: pairs and clusters ----------------------------
 * The self-join of a store: every pair of stored documents within distance
 * k, found by scanning each permuted table once (a pair comes only from the
 * first table of the design whose prefix its differing bits avoid), and the
 * clusters those pairs form, each with the one document it keeps. A k above
 * the store's design (up to SIMSTORE_MAX_K) is answered by a join of the
 * store's distinct fingerprints in memory under a design for k instead:
 * the same answers a store built for k gives, at the memory cost
 * simstore_pairs() states. Answers
 * are exact and come in a fixed order, the same for every thread count, and
 * a store with several segments and deleted documents answers as it would
 * after a compaction. Both read one committed state (a long read
 * transaction: writers go on, but LMDB cannot reuse the pages it holds). */

typedef struct simstore_scan_options {
    size_t size;           /* sizeof(simstore_scan_options), set by simstore_scan_options_init() */
    unsigned k;            /* the near-duplicate rule's k (simstore_near_rule):
                              0..SIMSTORE_MAX_K, SIMSTORE_NEAR_STORE_K or
                              SIMSTORE_NEAR_DEFAULT_K (the default). Above
                              the store's k: exact, by a join in memory (see
                              simstore_pairs())                              */
    unsigned threads;      /* 0 (default): simstore_default_threads()        */
    uint64_t memory_bytes; /* for sorting pairs and the clusters' tables
                              (spilled beyond it but for stars); 0 (default):
                              1 GiB                                          */
    const char *tmp_dir;   /* spill files; NULL (default): $TMPDIR or /tmp   */
    simstore_progress_fn progress; /* may be NULL                           */
    void *progress_ctx;
    /* Added with sketches (format/sketch.md). */
    double min_similarity; /* the near-duplicate rule's minimum similarity:
                              0 (every pair within k), (0, 1] (only pairs
                              of documents whose estimated similarity
                              (simstore_pair.similarity) is at least this; a
                              document without a sketch is in no such pair;
                              needs a store that keeps sketches) or
                              SIMSTORE_NEAR_DEFAULT_SIMILARITY (the
                              default). Resolved as simstore_near_rule_
                              resolve() resolves a rule                      */
    /* Added with bands (format/sketch.md 6.2). */
    int bands; /* the near-duplicate rule's bands (simstore_near_
                              rule): SIMSTORE_NEAR_DEFAULT_BANDS (the
                              default), 0 or 1                               */
} simstore_scan_options;

/* ---- The near-duplicate rule ----------------------------------------------
 * One rule decides "is candidate c a near-duplicate of document d?" for every
 * path that asks: simstore_pairs() and simstore_clusters(), the live store's
 * insert-if-new (simstore_live_insert_if_new(), simstore_live_apply_batch()),
 * and through them `simstore pairs`, `clusters` and `dedup` (alone and with
 * --store), the server's insert-if-new, the Python module and simstore-mpi.
 *
 * c is a near-duplicate of d when it is a candidate, their fingerprints
 * within k bits or (with bands) their sketches agreeing on every bit of one
 * of the rule's bands (simstore_sketch_bands(), format/sketch.md 6.2), and,
 * when min_similarity > 0, the estimated Jaccard similarity of their sketches
 * (simstore_sketch_similarity()) is at least min_similarity; an unknown
 * similarity (either has no sketch) is below every minimum:
 * simstore_near_duplicate_sketches() (simstore_near_duplicate() when the
 * candidate is known to be within k). Judged by paragraphs instead (partial copies:
 * `dedup --paragraphs`), c is a near-duplicate of d when d covers at least
 * one of c's paragraphs (a paragraph of d within k of it) and a share of at
 * least min_fraction of them: simstore_near_duplicate_paragraphs().
 *
 * The defaults, resolved in one place (simstore_near_rule_resolve()) from
 * what the store is: with neither k nor min_similarity given, on a store
 * that keeps sketches, the near-duplicate setting (README, "How well it
 * finds near-duplicates"): estimated similarity SIMSTORE_NEAR_SIMILARITY
 * (0.9) or more among candidates within the store's k or sharing a band
 * (bands on by default from a minimum of SIMSTORE_NEAR_BANDS_MIN_SIMILARITY;
 * the bands find what a larger k would, and more, at the cost of a scan of
 * the sketches instead of a join beyond the store's design). Without
 * bands (turned off, below 0.5, or SIMSTORE_NEAR_WITHOUT_BANDS) a minimum
 * similarity takes candidates within SIMSTORE_NEAR_K (7). On a store
 * without sketches, the store's k by distance alone. A k given alone is a
 * rule by distance alone; a minimum similarity given alone takes the
 * candidates above (a minimum of 0: distance alone, within the store's k).
 * Judged by paragraphs, or between fingerprints (pairs by fingerprint),
 * there is no similarity: the store's k, and min_fraction
 * SIMSTORE_NEAR_FRACTION (0.3). */
typedef struct simstore_near_rule {
    size_t size;           /* sizeof(simstore_near_rule), set by simstore_near_rule_init() */
    unsigned k;            /* the largest distance in bits, 0..SIMSTORE_MAX_K;
                              SIMSTORE_NEAR_STORE_K: the store's k;
                              SIMSTORE_NEAR_DEFAULT_K (the default)          */
    double min_similarity; /* 0: by distance alone; (0, 1]: also an estimated
                              similarity at least this (needs sketches);
                              SIMSTORE_NEAR_DEFAULT_SIMILARITY (the default) */
    double min_fraction;   /* by paragraphs: the share of c's paragraphs d
                              must cover, 0..1; SIMSTORE_NEAR_DEFAULT_FRACTION
                              (the default)                                  */
    /* Added with bands (format/sketch.md 6.2). */
    int bands;          /* candidates also from the sketches' bands: 1,
                              0 (within k only) or SIMSTORE_NEAR_DEFAULT_
                              BANDS (the default: 1 when the rule has a
                              minimum similarity of at least SIMSTORE_NEAR_
                              BANDS_MIN_SIMILARITY, else 0)                 */
    unsigned band_rows; /* resolved from the sketch kind and minimum
                              similarity (simstore_sketch_bands()): bits a
                              band; 0 with band_count 0: no bands            */
    unsigned band_count;
} simstore_near_rule;

#define SIMSTORE_NEAR_STORE_K 0xFFFFFFFFu
#define SIMSTORE_NEAR_DEFAULT_K 0xFFFFFFFEu
#define SIMSTORE_NEAR_DEFAULT_SIMILARITY (-1.0)
#define SIMSTORE_NEAR_DEFAULT_FRACTION (-1.0)
#define SIMSTORE_NEAR_DEFAULT_BANDS (-1)
/* The defaults the rule resolves to (above). */
#define SIMSTORE_NEAR_K 7u
#define SIMSTORE_NEAR_SIMILARITY 0.9
/* Whether the rule's bands are on when not given (SIMSTORE_NEAR_DEFAULT_BANDS). */
#define SIMSTORE_NEAR_BANDS_BY_DEFAULT 1
#define SIMSTORE_NEAR_FRACTION 0.3

/* simstore_near_rule_resolve() flags: how candidates are judged. */
#define SIMSTORE_NEAR_BY_PARAGRAPHS 1u /* by the paragraphs they share      */
/* Candidates of a stored store one document at a time (a query, the live
 * store's insert-if-new, `dedup --store`'s answers from the store): the
 * store keeps no index of its sketches' bands yet, so bands default to off
 * there and asking for them is refused (issue 36); k and the minimum
 * similarity resolve as without the flag. (An in-memory set of sketches can
 * be banded: simstore_bandindex, as `dedup` without STORE does.) */
#define SIMSTORE_NEAR_WITHOUT_BANDS 4u
#define SIMSTORE_NEAR_BY_FINGERPRINT                                                               \
    2u /* fingerprints, not documents: no
                                           similarity                        */

/* Fill *rule with the defaults (every part SIMSTORE_NEAR_DEFAULT_*). NULL is
 * allowed. */
SIMSTORE_API void simstore_near_rule_init(simstore_near_rule *rule);

/* Resolve the parts of *rule left at their defaults, in place, for a store
 * of design k store_k (a client without a store: simstore_build_options'
 * default k) that keeps sketches of kind `sketch` (SIMSTORE_SKETCH_NONE:
 * none), judging with `flags` (0, SIMSTORE_NEAR_BY_PARAGRAPHS or
 * SIMSTORE_NEAR_BY_FINGERPRINT, either with SIMSTORE_NEAR_WITHOUT_BANDS,
 * which changes the bands alone), and check the whole: afterwards k is in
 * 0..SIMSTORE_MAX_K, both minimums in 0..1 and bands 0 or 1 with their
 * shape. The one place the defaults are decided.
 * Errors: SIMSTORE_EINVAL (NULL rule, unknown flags, a minimum outside
 * 0..1, a minimum similarity without sketches, by paragraphs or by
 * fingerprint, bands other than 0, 1 or the default, bands asked for
 * without a minimum similarity of SIMSTORE_NEAR_BANDS_MIN_SIMILARITY or
 * with SIMSTORE_NEAR_WITHOUT_BANDS), SIMSTORE_ERANGE (k above
 * SIMSTORE_MAX_K); the message
 * (simstore_last_error()) names the part, as every client reports it. */
SIMSTORE_API int simstore_near_rule_resolve(simstore_near_rule *rule, unsigned store_k,
                                            simstore_sketch_kind sketch, unsigned flags);

/* The resolved rule's answer: 1 when a candidate at `distance` bits whose
 * estimated similarity is `similarity` (SIMSTORE_SIMILARITY_UNKNOWN: not
 * known) is a near-duplicate, else 0. */
SIMSTORE_API int simstore_near_duplicate(const simstore_near_rule *rule, unsigned distance,
                                         double similarity);

/* The resolved rule's answer for two documents whose fingerprints are
 * `distance` bits apart, with sketches a and b (NULL: none) of kind `kind`:
 * 1 when they are candidates (within k, or with the rule's bands sharing
 * one) and their estimated similarity meets the minimum, else 0.
 * *similarity (may be NULL) receives the estimate
 * (simstore_sketch_similarity()). */
SIMSTORE_API int simstore_near_duplicate_sketches(const simstore_near_rule *rule,
                                                  simstore_sketch_kind kind, unsigned distance,
                                                  const uint8_t *a, const uint8_t *b,
                                                  double *similarity);

/* The resolved rule's answer by paragraphs: 1 when a document covering
 * `shared` of a candidate's `of` paragraphs makes it a near-duplicate
 * (shared > 0 and shared / of >= min_fraction), else 0. */
SIMSTORE_API int simstore_near_duplicate_paragraphs(const simstore_near_rule *rule, uint64_t shared,
                                                    uint64_t of);

/* The k and minimum similarity a scan of s with options o uses (o NULL:
 * the defaults), as simstore_pairs() and simstore_clusters() resolve them;
 * for clients that print or forward them (a sharded scan). Errors as
 * simstore_pairs() gives for them. */
SIMSTORE_API int simstore_scan_resolve(const simstore *s, const simstore_scan_options *o,
                                       unsigned *k, double *min_similarity);

/* Fill *o with the defaults above. */
SIMSTORE_API void simstore_scan_options_init(simstore_scan_options *o);

/* One pair. Strings are valid only during the callback. */
typedef struct simstore_pair {
    const char *id_a; /* id_a_len bytes, byte order id_a < id_b; NULL in a
                          fingerprint-only store or by fingerprint         */
    size_t id_a_len;
    const char *id_b;
    size_t id_b_len;
    unsigned flags_a; /* SIMSTORE_MATCH_INTEGER_ID or 0                 */
    unsigned flags_b;
    uint64_t fp_a; /* the fingerprints of a and b; by fingerprint and in
                          a fingerprint-only store fp_a <= fp_b             */
    uint64_t fp_b;
    unsigned distance;
    uint64_t count_a; /* SIMSTORE_PAIRS_BY_FINGERPRINT: documents holding
                          fp_a and fp_b (1 each in a fingerprint-only store);
                          else 0                                            */
    uint64_t count_b;
    double similarity; /* estimated Jaccard similarity of the two documents
                          (simstore_sketch_similarity of their sketches);
                          SIMSTORE_SIMILARITY_UNKNOWN when either has no
                          sketch, by fingerprint, in a fingerprint-only
                          store                                             */
} simstore_pair;

/* Receives each pair; nonzero stops simstore_pairs(), which returns it. */
typedef int (*simstore_pair_fn)(void *ctx, const simstore_pair *p);

/* Pairs of distinct fingerprints with their document counts instead of
 * pairs of documents (a fingerprint held by several documents is paired
 * with itself at distance 0): for stores where one fingerprint has millions
 * of documents. */
#define SIMSTORE_PAIRS_BY_FINGERPRINT 1u

/* Every unordered pair of stored documents within o->k, each once, ordered
 * by distance, then id_a, then id_b (byte order); documents sharing a
 * fingerprint are pairs at distance 0. In a fingerprint-only store, and by
 * fingerprint, pairs of fingerprints ordered by distance, fp_a, fp_b. With
 * o->min_similarity, only the pairs of documents whose similarity is at
 * least it (not by fingerprint: SIMSTORE_EINVAL).
 *   o      NULL for the defaults.
 *   flags  0 or SIMSTORE_PAIRS_BY_FINGERPRINT.
 * o->k may exceed the store's k, up to SIMSTORE_MAX_K: the store's tables
 * cannot find those pairs, so its N distinct fingerprints (dead ones
 * included) are read once and joined under a design for o->k, as
 * simstore_join_fingerprints() does; the answers are exactly those of a
 * store built for o->k.
 * Memory: half of o->memory_bytes for the two sorts of pairs (more spills
 * to o->tmp_dir), a quarter for the threads' prefix groups (values sharing
 * a table's prefix, about 40 bytes a value while a group is split), and the
 * documents of the two fingerprints of a pair being read (a fingerprint
 * shared by very many documents: SIMSTORE_PAIRS_BY_FINGERPRINT reads none).
 * Above the store's k, the other half holds the fingerprints: in memory
 * when 8 * N * (1 + 2 * threads) bytes fit (the array, and per join thread
 * a permuted copy and its sort scratch; threads at most the design's table
 * count), else each thread sorts its tables through a spilling sorter of
 * its share, its runs in o->tmp_dir (N * 8 bytes each, one table at a
 * time a thread).
 * Errors: SIMSTORE_EINVAL (NULL s or fn, unknown flag, min_similarity
 * outside 0..1 or on a store without sketches), SIMSTORE_ERANGE (k above
 * SIMSTORE_MAX_K), SIMSTORE_EFULL (one prefix group needs more than its
 * threads' share of the memory),
 * SIMSTORE_ECORRUPT, SIMSTORE_EIO, SIMSTORE_ENOMEM, or fn's nonzero
 * value. */
SIMSTORE_API int simstore_pairs(simstore *s, const simstore_scan_options *o, unsigned flags,
                                simstore_pair_fn fn, void *ctx);

/* Receives a pair of distinct fingerprints (a < b) within the distance. */
/* One pair of simstore_paragraph_pairs(). Ids are valid only during the
 * callback (not NUL-terminated). */
typedef struct simstore_paragraph_pair {
    const char *id_a; /* id_a < id_b in byte order */
    size_t id_a_len;
    const char *id_b;
    size_t id_b_len;
    unsigned flags_a; /* SIMSTORE_MATCH_INTEGER_ID or 0 */
    unsigned flags_b;
    size_t shared_a; /* of a's of_a indexed paragraphs, those with one of
                         b's within k (a's paragraph query, SHARED/OF) */
    size_t of_a;
    size_t shared_b; /* and the same from b's side */
    size_t of_b;
    double fraction; /* the larger of shared_a/of_a and shared_b/of_b */
} simstore_paragraph_pair;

typedef int (*simstore_paragraph_pair_fn)(void *ctx, const simstore_paragraph_pair *p);

/* Every unordered pair of stored documents sharing near-duplicate
 * paragraphs (format/store.md, "Paragraphs"), each once, with fraction (the
 * larger of the two sides' SHARED/OF: a page that copies a few paragraphs
 * of a long article pairs with it by the page's side) at least
 * min_fraction, ordered by fraction (larger first), then id_a, then id_b.
 * The same as simstore_query_paragraphs() of each document against the
 * others, read from one committed state. k: up to SIMSTORE_MAX_K (above
 * the store's k each paragraph query probes more, as simstore_query_fp()
 * does), or SIMSTORE_NEAR_STORE_K.
 * Memory: every document's id and paragraph list, and 16 bytes per
 * directed pair, held at once.
 * Errors: SIMSTORE_EINVAL (NULL s or fn, no paragraph index, min_fraction
 * outside 0..1), SIMSTORE_ERANGE, SIMSTORE_EBUSY (the store kept changing),
 * SIMSTORE_ECORRUPT, SIMSTORE_EIO, SIMSTORE_ENOMEM, or fn's nonzero value. */
SIMSTORE_API int simstore_paragraph_pairs(simstore *s, unsigned k, double min_fraction,
                                          simstore_paragraph_pair_fn fn, void *ctx);

typedef int (*simstore_fp_pair_fn)(void *ctx, uint64_t a, uint64_t b, unsigned distance);

/* The same join over fps[0..n) in memory (any order, repeats allowed and
 * ignored), under the design that joins n fingerprints at k
 * (1..SIMSTORE_MAX_K) at the least cost (more tables than a store's for
 * queries, where a table costs a sort and saves comparisons): every pair
 * of distinct values within k, once each,
 * in increasing (a, b) order. Memory: half of o->memory_bytes for the
 * pairs, a quarter for the prefix groups (as simstore_pairs()), plus 16 n
 * bytes per thread for the permuted copy of fps. Errors: SIMSTORE_EINVAL
 * (k out of range, NULL arguments), SIMSTORE_EFULL (a prefix group past its
 * share), SIMSTORE_ENOMEM, SIMSTORE_EIO, or fn's nonzero value. */
SIMSTORE_API int simstore_join_fingerprints(const uint64_t *fps, size_t n, unsigned k,
                                            const simstore_scan_options *o, simstore_fp_pair_fn fn,
                                            void *ctx);

typedef enum simstore_cluster_mode {
    SIMSTORE_CLUSTER_COMPONENTS = 0, /* connected components of the
                                        within-k graph                     */
    SIMSTORE_CLUSTER_STAR = 1        /* in keep order, each document not yet
                                        taken becomes a centre and takes every
                                        document not yet taken within k      */
} simstore_cluster_mode;

typedef enum simstore_keep_rule {
    SIMSTORE_KEEP_FIRST = 0,   /* inserted first (documents written before
                                  insertion numbers count as inserted at 0) */
    SIMSTORE_KEEP_MIN_ID = 1,  /* smallest id                               */
    SIMSTORE_KEEP_MIN_KEY = 2, /* smallest key (from the key callback)      */
    SIMSTORE_KEEP_MAX_KEY = 3  /* largest key                               */
} simstore_keep_rule;

/* A document's key for SIMSTORE_KEEP_MIN_KEY / MAX_KEY, read from its
 * metadata (meta_len bytes of JSON, NULL when it has none): return 1 and set
 * *key, or 0 when it has none (documents without a key sort last). Called
 * from the thread that called simstore_clusters(). */
typedef int (*simstore_doc_key_fn)(void *ctx, const char *meta, size_t meta_len, double *key);

typedef struct simstore_cluster_options {
    size_t size; /* sizeof(simstore_cluster_options), set by simstore_cluster_options_init() */
    simstore_scan_options scan;
    simstore_cluster_mode mode; /* (SIMSTORE_CLUSTER_COMPONENTS)           */
    simstore_keep_rule keep;    /* (SIMSTORE_KEEP_FIRST); ties: smallest id */
    simstore_doc_key_fn key;    /* for the key rules                        */
    void *key_ctx;
    int singletons; /* 1: also report each document in no pair,
                                    as a cluster of its own (0)              */
} simstore_cluster_options;

/* Fill *o with the defaults above. */
SIMSTORE_API void simstore_cluster_options_init(simstore_cluster_options *o);

/* One clustered document. Strings are valid only during the callback. */
typedef struct simstore_cluster_member {
    const char *cluster; /* the kept document's id (NULL in a
                              fingerprint-only store)                      */
    size_t cluster_len;
    unsigned cluster_flags; /* SIMSTORE_MATCH_INTEGER_ID or 0              */
    const char *id;         /* this document's id (NULL in a fingerprint-only
                              store)                                        */
    size_t id_len;
    unsigned flags;
    uint64_t fp;
    uint64_t cluster_fp; /* the kept document's fingerprint              */
    int kept;            /* 1 for the cluster's kept document            */
    unsigned distance;   /* to the kept document                         */
    double similarity;   /* estimated similarity to the kept document (1
                              for the kept one itself);
                              SIMSTORE_SIMILARITY_UNKNOWN when either has no
                              sketch                                        */
} simstore_cluster_member;

typedef int (*simstore_cluster_fn)(void *ctx, const simstore_cluster_member *m);

typedef struct simstore_cluster_summary {
    uint64_t documents; /* documents reported                            */
    uint64_t clusters;
    uint64_t dropped; /* documents not kept                            */
    uint64_t largest; /* documents in the largest cluster              */
} simstore_cluster_summary;

/* The clusters of the store's documents at distance o->scan.k: one call of
 * fn per clustered document, clusters in the byte order of their kept
 * document's id, each kept document first, then the others by id (in a
 * fingerprint-only store, where documents are fingerprints: by
 * fingerprint). Clusters have two documents or more unless o->singletons.
 * With o->scan.min_similarity, two documents are joined only when they are
 * within the distance AND their estimated similarity is at least it (so
 * documents sharing a fingerprint may fall in different clusters); without
 * it, documents sharing a fingerprint are always together.
 * The same store gives the same clusters on every run and thread count.
 * o->scan.k may exceed the store's k up to SIMSTORE_MAX_K, as in
 * simstore_pairs() (exact: the clusters of a store built for it).
 * Memory: that of simstore_pairs(), plus about 48 bytes per pair and per
 * clustered document, the clustered documents' ids and sketches while they
 * fit in o->scan.memory_bytes. Beyond it, components go on in
 * o->scan.memory_bytes by spilling sorted runs to o->scan.tmp_dir (the same
 * answer, a few sorts of the pairs and documents slower), while stars, and
 * any clustering with a minimum similarity (8 bytes more per pair of
 * documents joined), stop with SIMSTORE_EFULL.
 * Errors: those of simstore_pairs(); SIMSTORE_EINVAL for a key rule without
 * a key callback, or a rule a fingerprint-only store cannot apply (the key
 * rules); SIMSTORE_EFULL (stars beyond the memory budget). */
SIMSTORE_API int simstore_clusters(simstore *s, const simstore_cluster_options *o,
                                   simstore_cluster_fn fn, void *ctx,
                                   simstore_cluster_summary *summary);

/* ---- Documents by id ---------------------------------------------------------
 * A stored document as simstore_get() and simstore_export() give it. Its
 * pointers stay valid until the callback returns. */
typedef struct simstore_document {
    const char *id; /* NUL-terminated; NULL in a fingerprint-only store      */
    size_t id_len;
    unsigned flags; /* SIMSTORE_MATCH_INTEGER_ID or 0                     */
    uint64_t fp;
    const char *meta; /* compact JSON, NUL-terminated, or NULL              */
    size_t meta_len;
    uint64_t insertion;    /* insertion number (simstore_match), 0 when unknown */
    const uint8_t *sketch; /* the document's sketch (format/sketch.md), of the
                              store's kind, or NULL                        */
    size_t sketch_bytes;
    uint64_t segment;          /* simstore_get: the newest live segment whose tables
                           hold fp; 0 in simstore_export                    */
    int missing;               /* simstore_get: no document has this id (only id,
                           id_len are set)                                   */
    const uint8_t *paragraphs; /* a store with a paragraph index: the
                           document's paragraph fingerprints as listed
                           (simstore_doc.paragraphs), text order,
                           paragraph_count 8-byte little-endian values, not
                           aligned; NULL when none. Valid during the call  */
    size_t paragraph_count;
} simstore_document;

typedef int (*simstore_document_fn)(void *ctx, const simstore_document *doc);

/* The documents ids[0..n) (lens[i] bytes each), read from one committed
 * state, handed to fn in the order given; an id no document has comes with
 * missing = 1. Errors: SIMSTORE_EINVAL (NULL arguments, an empty or
 * oversized id, a fingerprint-only store), SIMSTORE_ECORRUPT (a record that
 * fails its checks, or a fingerprint no live segment holds), SIMSTORE_EIO,
 * SIMSTORE_ENOMEM, or fn's nonzero value. */
SIMSTORE_API int simstore_get(simstore *s, const char *const *ids, const size_t *lens, size_t n,
                              simstore_document_fn fn, void *ctx);

/* simstore_export() flags: documents in insertion order (ties and documents
 * without a number, which come first, by id) instead of id order, so that a
 * store built from the export numbers them in the same relative order
 * (clusters --keep first keeps the same documents). Sorted in o's memory,
 * spilling to o's tmp_dir. */
#define SIMSTORE_EXPORT_BY_INSERTION 1u

/* Every live document from one committed state, in id byte order (or by
 * insertion number), to fn; in a fingerprint-only store every distinct
 * stored fingerprint in increasing order (id NULL). o: memory_bytes and
 * tmp_dir for the sorts (NULL: defaults; k and threads are not used).
 * Errors: SIMSTORE_EINVAL (unknown flag; SIMSTORE_EXPORT_BY_INSERTION on a
 * fingerprint-only store), SIMSTORE_ECORRUPT, SIMSTORE_EIO, SIMSTORE_ENOMEM,
 * or fn's nonzero value. */
SIMSTORE_API int simstore_export(simstore *s, const simstore_scan_options *o, unsigned flags,
                                 simstore_document_fn fn, void *ctx);

/* ---- In-memory near-duplicate index ---------------------------------------
 * An exact index of (fingerprint, value) entries in RAM that grows one entry
 * at a time and answers "which entries are within distance k of this
 * fingerprint?": what `simstore dedup` remembers its kept records in, and
 * what an insert-if-new service keeps in front of a store. It uses the
 * store's table designs (every set of k flipped bits leaves some table's
 * prefix untouched) over hash chains, re-choosing the design as it grows, so
 * answers are exact for every k up to the index's (and above it, slower).
 * Memory: per slot of its capacity (the count rounded up to a power of two)
 * 16 bytes plus 6 bytes per table of its design, at most 16 tables: for
 * k = 3, 4 tables up to
 * about a million entries (40..80 bytes an entry), 10 beyond. An index
 * for k = 5..7 is designed for k = 3 and probes each table's prefix and
 * its neighbours within a bit or two (as a store answers a k above its
 * own), which measured 3 to 90 times faster than the designs for k itself
 * (whose at most 16 tables leave short prefixes and long chains); its cost
 * per query still grows with the count (about n / 1000 entries compared at
 * k = 7), so a very large corpus is better paired through a store.
 * simstore_memindex_bytes() tells. Queries allocate nothing.
 *
 * Threads: one writer. Queries may run on any number of threads at once,
 * but not while an add runs (an add may rebuild the chains). */

typedef struct simstore_memindex simstore_memindex;

/* Create an empty index exact for distances up to k (0..SIMSTORE_MAX_K),
 * with room for expected_count entries before its first growth (0 is fine:
 * it grows as needed).
 *   out  receives the index, owned by the caller, released with
 *        simstore_memindex_free(); NULL on failure.
 * Errors: SIMSTORE_EINVAL (out NULL, k above SIMSTORE_MAX_K); SIMSTORE_EFULL
 * (expected_count above 2^32 - 2, the most entries an index holds);
 * SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_memindex_new(unsigned k, uint64_t expected_count,
                                       simstore_memindex **out);

/* Release an index; NULL is allowed. */
SIMSTORE_API void simstore_memindex_free(simstore_memindex *ix);

/* Add an entry: fingerprint fp with the caller's value (a record number, an
 * offset, a pointer cast to an integer). The same fingerprint may be added
 * any number of times, with the same or other values; each is an entry.
 * Errors: SIMSTORE_EINVAL (ix NULL); SIMSTORE_EFULL (2^32 - 2 entries);
 * SIMSTORE_ENOMEM (growing failed: the index is unchanged and still valid). */
SIMSTORE_API int simstore_memindex_add(simstore_memindex *ix, uint64_t fp, uint64_t value);

/* Receives one entry within the distance: its fingerprint, value and
 * distance to the query. Return 0 to go on, nonzero to stop the query
 * (which then returns that value). */
typedef int (*simstore_memindex_fn)(void *ctx, uint64_t fp, uint64_t value, unsigned distance);

/* Call fn(ctx, ...) once for every entry whose fingerprint is within
 * distance k of fp, in no particular order. k may be above the index's (up
 * to SIMSTORE_MAX_K), exactly all the same: each table's chains are then
 * visited at every prefix within a few bits of the query's (as a store
 * answers a k above its own), or every entry is compared when that reads
 * less; slower than at the index's k.
 * Returns SIMSTORE_OK, fn's nonzero value when it stopped the query, or
 * SIMSTORE_EINVAL (ix or fn NULL), SIMSTORE_ERANGE (k above
 * SIMSTORE_MAX_K). */
SIMSTORE_API int simstore_memindex_query(const simstore_memindex *ix, uint64_t fp, unsigned k,
                                         simstore_memindex_fn fn, void *ctx);

/* The nearest entry of a query. */
typedef struct simstore_memindex_match {
    uint64_t fp;
    uint64_t value;
    unsigned distance;
} simstore_memindex_match;

/* The entry within distance k of fp with the smallest distance, ties going
 * to the smallest value (so, with values numbered in insertion order, to
 * the earliest entry). Returns 1 with *out filled, 0 when no entry is
 * within k (*out untouched), or SIMSTORE_EINVAL, SIMSTORE_ERANGE as
 * simstore_memindex_query(). */
SIMSTORE_API int simstore_memindex_nearest(const simstore_memindex *ix, uint64_t fp, unsigned k,
                                           simstore_memindex_match *out);

/* Entries added; 0 for NULL. */
SIMSTORE_API uint64_t simstore_memindex_count(const simstore_memindex *ix);

/* Tables of the design the index uses now (it changes as the index grows);
 * 0 for NULL. */
SIMSTORE_API unsigned simstore_memindex_tables(const simstore_memindex *ix);

/* Bytes the index holds allocated (entries, chains and room for growth);
 * 0 for NULL. */
SIMSTORE_API uint64_t simstore_memindex_bytes(const simstore_memindex *ix);

/* ---- In-memory band index -------------------------------------------------
 * An exact index of (sketch, value) entries in RAM that grows one entry at
 * a time and answers "which entries' sketches agree with this sketch on
 * every bit of at least one band?": the band candidates of the
 * near-duplicate rule (simstore_near_rule's band_rows and band_count,
 * simstore_sketch_bands(), format/sketch.md 6.2), what `simstore dedup`
 * keeps beside its simstore_memindex of the kept records. Band i of a
 * sketch is its bits i * rows .. i * rows + rows - 1 (bit j of a sketch is
 * bit j % 8 of byte j / 8), as simstore_near_duplicate_sketches() and the
 * scans read them. Each band hashes its keys into chains of its own.
 * Memory: per slot of its capacity (the count rounded up to a power of
 * two) the first rows x count bits of the sketch in whole bytes, 8 bytes of
 * value and 6 bytes per band: at the near-duplicate defaults (minhash256,
 * J 0.9: 22 bands of 32 bits) 228 bytes a slot, so 228 to 456 bytes an
 * entry with the room for growth. simstore_bandindex_bytes() tells. A query
 * allocates only when more than 256 entries answer it.
 *
 * Threads: one writer. Queries may run on any number of threads at once,
 * but not while an add runs. */

typedef struct simstore_bandindex simstore_bandindex;

/* Create an empty index of `count` bands of `rows` bits (rows 1..32, count
 * at least 1, rows x count at most 65536 bits).
 *   out  receives the index, owned by the caller, released with
 *        simstore_bandindex_free(); NULL on failure.
 * Errors: SIMSTORE_EINVAL (out NULL, a shape outside those limits);
 * SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_bandindex_new(unsigned rows, unsigned count, simstore_bandindex **out);

/* Release an index; NULL is allowed. */
SIMSTORE_API void simstore_bandindex_free(simstore_bandindex *x);

/* Add an entry: a sketch of at least rows x count bits (the index copies
 * those) with the caller's value (a record number, say). Equal sketches or
 * values may be added any number of times; each is an entry.
 * Errors: SIMSTORE_EINVAL (x or sketch NULL); SIMSTORE_EFULL (2^32 - 2
 * entries); SIMSTORE_ENOMEM (growing failed: the index is unchanged and
 * still valid). */
SIMSTORE_API int simstore_bandindex_add(simstore_bandindex *x, const uint8_t *sketch,
                                        uint64_t value);

/* Receives one value. Return 0 to go on, nonzero to stop the query (which
 * then returns that value). */
typedef int (*simstore_bandindex_fn)(void *ctx, uint64_t value);

/* Call fn(ctx, value) once for every distinct value of the entries whose
 * sketch agrees with `sketch` (at least rows x count bits) on every bit of
 * at least one band, in ascending value order: each value once, however
 * many bands or entries it shares.
 * Returns SIMSTORE_OK, fn's nonzero value when it stopped the query, or
 * SIMSTORE_EINVAL (x, sketch or fn NULL), SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_bandindex_query(const simstore_bandindex *x, const uint8_t *sketch,
                                          simstore_bandindex_fn fn, void *ctx);

/* Entries added; 0 for NULL. */
SIMSTORE_API uint64_t simstore_bandindex_count(const simstore_bandindex *x);

/* Bytes the index holds allocated (entries, chains and room for growth);
 * 0 for NULL. */
SIMSTORE_API uint64_t simstore_bandindex_bytes(const simstore_bandindex *x);

/* ---- Live stores: online writes ------------------------------------------
 * A live store serves one store and changes it without rebuilding: inserts
 * and deletes are made durable in the store's write-ahead log
 * (STORE/live.wal, format/wal.md) and kept in an in-memory table that
 * queries search together with the on-disk segments; when the table passes
 * a size it is flushed into the store as a new segment through the add
 * path (simstore_add_begin ... finish, simstore_delete for its deletes),
 * whose commit records the last log record it holds (format/store.md, "The
 * state record"), and the log is trimmed. Opening replays the log's records
 * after that one, so after a crash at any instant every acknowledged change
 * is there, exactly once, and no partial one is.
 *
 * A live store holds the store's writer lock for its whole life: add,
 * delete, compact and dedup --add from other processes (other simstore
 * handles opened with SIMSTORE_OPEN_WRITE) fail with SIMSTORE_EBUSY, "the
 * store is held by a server (pid N)"; read-only handles keep working and
 * see the flushed changes (not those still in memory).
 *
 * Answers are those simstore_query_fp() would give had every acknowledged
 * change been applied to the store with add and delete: the same matches,
 * order, flags, metadata, sketches and similarities, except that a document
 * not yet flushed has insertion number 0 (unknown: it gets one when its
 * flush commits).
 *
 * Threads: every call may be made from any number of threads at once, each
 * thread using its own simstore_live_query. Readers never wait for a flush
 * or a compaction (only for the pointer swaps around them), and writers
 * wait for neither while they have room: changes keep going to a new
 * in-memory table while the old one is written. Only when that new table
 * too passes memtable_bytes before the old one is written do writers wait
 * for the flush (or, with no flush thread or after a failed flush, get
 * SIMSTORE_EFULL), so the in-memory tables hold at most about twice
 * memtable_bytes. Writers share fsyncs (the log's group commit). */

typedef struct simstore_live simstore_live;
typedef struct simstore_live_query simstore_live_query;

typedef struct simstore_live_options {
    size_t size; /* sizeof(simstore_live_options), set by simstore_live_options_init() */
    uint64_t memtable_bytes; /* flush once the changes in the in-memory
                                table add this many bytes (changes, ids,
                                index) to an empty table's (about 100 KiB);
                                writes go on into a second table during the
                                flush, up to this size again (64 MiB) */
    int background_flush;    /* 1: a thread of the live store flushes when
                                the limit is passed; 0: the caller calls
                                simstore_live_flush() (1)                    */
    unsigned open_flags;     /* SIMSTORE_OPEN_SKIP_BLOCK_CHECKSUMS,
                                SIMSTORE_OPEN_TRUST_LMDB and
                                SIMSTORE_OPEN_HUGE_PAGES, passed on (0)      */
    uint64_t memory_bytes;   /* flushes' and compactions' memory budget
                                (simstore_build_options) (256 MiB)           */
    unsigned threads;        /* their threads; 0 = every core (0)            */
    size_t wal_group_bytes;  /* the log's group bound (format/wal.md); 0:
                                16 MiB (0)                                   */
} simstore_live_options;

/* Fill *o with the defaults above. */
SIMSTORE_API void simstore_live_options_init(simstore_live_options *o);

/* Open the store at `path` as a live store: take its writer lock (noting
 * this process as a server in writer.lock), open or create its log and
 * replay the records its state has not applied into the in-memory table.
 *   o    NULL for the defaults.
 *   out  receives the live store, released with simstore_live_close().
 * Errors: those of simstore_open() with SIMSTORE_OPEN_WRITE (SIMSTORE_EBUSY
 * when another writer or server holds the store); SIMSTORE_EINVAL (a
 * fingerprint-only store: it has no documents to insert); SIMSTORE_ECORRUPT
 * (a damaged log, another store's log, or a log that misses records the
 * store has not applied); SIMSTORE_EVERSION; SIMSTORE_EIO; SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_live_open(const char *path, const simstore_live_options *o,
                                    simstore_live **out);

/* Stop the flush thread and close. Changes still in memory stay in the log
 * (the next open replays them): call simstore_live_flush() first to leave
 * an empty log. Every simstore_live_query must be freed first, and no call
 * may be running. NULL is allowed. */
SIMSTORE_API void simstore_live_close(simstore_live *live);

/* The store the live store serves, for reads of its flushed state
 * (simstore_get_stats(), simstore_get_text_options(), batch queries).
 * Owned by live. Do not change it (add, delete, compact) directly. */
SIMSTORE_API simstore *simstore_live_store(simstore_live *live);

/* Insert a document (simstore_doc, as a builder takes it: its sketch is
 * needed when the store keeps sketches, and refused when it keeps none;
 * source is not used; a live store takes no paragraphs); returns once its
 * log record is durable.
 * Errors: SIMSTORE_EEXIST (a document with this id is stored, or inserted
 * and not deleted since); SIMSTORE_EINVAL (an empty or oversized id or
 * metadata, an unknown flag, paragraphs, a sketch missing or given against the store's
 * kind); SIMSTORE_EIO (the log could not be written: this and every later
 * change fail until the live store is opened again); SIMSTORE_EFULL (both
 * in-memory tables full and nothing flushing them: above); SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_live_insert(simstore_live *live, const simstore_doc *doc);

/* Delete the document with this id; returns once its log record is
 * durable. Errors: SIMSTORE_ENOTFOUND (no such document); SIMSTORE_EINVAL
 * (an empty or oversized id); SIMSTORE_EIO, SIMSTORE_ENOMEM as
 * simstore_live_insert(). */
SIMSTORE_API int simstore_live_delete(simstore_live *live, const char *id, size_t id_len);

/* A query context for one thread: flags as simstore_query_new()
 * (SIMSTORE_QUERY_WITH_META). Errors: SIMSTORE_ENOMEM, SIMSTORE_EIO. */
SIMSTORE_API int simstore_live_query_new(simstore_live *live, unsigned flags,
                                         simstore_live_query **out);
/* NULL is allowed. */
SIMSTORE_API void simstore_live_query_free(simstore_live_query *q);

/* Every document within distance k of fp, on disk or in memory, as
 * simstore_query_fp_sketch() would answer after the changes (sketch: the
 * query's, or NULL). *matches stays valid until the next call on q. k may
 * be above the store's, as for simstore_query_fp(): the in-memory changes
 * are answered as exactly.
 * Errors: SIMSTORE_ERANGE (k above SIMSTORE_MAX_K, or a k
 * simstore_query_fp() refuses for the store), SIMSTORE_ECORRUPT,
 * SIMSTORE_EIO, SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_live_query_fp(simstore_live_query *q, uint64_t fp, const uint8_t *sketch,
                                        unsigned k, const simstore_match **matches, size_t *count);

/* Insert doc only if no document is a near-duplicate of it by the
 * near-duplicate rule (simstore_near_rule: rule NULL for the defaults;
 * resolved for the store, its k and its sketches, by
 * simstore_near_rule_resolve() with SIMSTORE_NEAR_WITHOUT_BANDS: on a
 * store that keeps sketches, within SIMSTORE_NEAR_K bits at estimated
 * similarity SIMSTORE_NEAR_SIMILARITY or more, as `simstore dedup --store`
 * and `dedup --bands off`), atomically with respect to every other
 * change: of near-duplicates posted at once, exactly one is inserted.
 * *inserted gets 1 when it was (and *count 0), else 0 with the
 * near-duplicates in *matches (as simstore_live_query_fp() gives them at
 * the rule's k, with doc->sketch as the query's sketch, those the rule
 * keeps), valid until the next call on q. Returns once the answer is
 * durable (the insert's record, or the changes the answer saw).
 * Errors: those of simstore_live_insert() (SIMSTORE_EEXIST: no
 * near-duplicate, but a document has the id), simstore_near_rule_resolve()
 * and simstore_live_query_fp(). */
SIMSTORE_API int simstore_live_insert_if_new(simstore_live_query *q, const simstore_doc *doc,
                                             const simstore_near_rule *rule, int *inserted,
                                             const simstore_match **matches, size_t *count);

/* What simstore_live_apply_batch() does with one change. */
typedef enum simstore_live_op {
    SIMSTORE_LIVE_INSERT = 1,        /* as simstore_live_insert()           */
    SIMSTORE_LIVE_INSERT_IF_NEW = 2, /* as simstore_live_insert_if_new()    */
    SIMSTORE_LIVE_DELETE = 3         /* as simstore_live_delete(): doc.id and
                                        doc.id_len only                      */
} simstore_live_op;

/* One change of a batch. Borrowed for the call. */
typedef struct simstore_live_change {
    simstore_live_op op;
    simstore_doc doc;
} simstore_live_change;

/* What became of one change of a batch. */
typedef struct simstore_live_result {
    /* SIMSTORE_OK, or the change's own refusal: SIMSTORE_EEXIST (an
     * insert's id exists; an insert-if-new with no near-duplicate whose id
     * exists), SIMSTORE_ENOTFOUND (a delete of nothing), SIMSTORE_EINVAL (a
     * bad document, as simstore_live_insert() checks it, or an unknown op). */
    int rc;
    /* 1: the change was made (inserted or deleted). */
    int applied;
    /* An insert-if-new not made: the near-duplicates it found, as
     * simstore_live_insert_if_new() gives them, valid until the next call on
     * q (NULL, 0: none). */
    const simstore_match *matches;
    size_t count;
} simstore_live_result;

/* Apply changes[0..count) in order, as the calls of their ops one after the
 * other would (each decided on every change before it, the batch's own
 * included: an insert-if-new sees a near-duplicate inserted earlier in the
 * batch), and return once every record they logged (and every change their
 * answers rest on) is durable: all of the batch's records are made durable
 * together, in the log's groups, normally with one fsync for the whole
 * batch instead of one per change. Changes of other threads may be decided
 * between two changes of the batch; each change is atomic with respect to
 * them, as the single calls are.
 *   rule     the near-duplicate rule of the batch's insert-if-new changes
 *            (NULL: the defaults), as simstore_live_insert_if_new().
 *   results  count entries, one per change, filled in.
 * A crash before the call returns leaves, after the next open, the
 * batch's changes up to some point in order (format/wal.md, "Batches"):
 * none is acknowledged before all are durable.
 * Returns SIMSTORE_OK when every change got its result (results[i].rc, a
 * refusal of that change alone). Else the error that stopped the batch at
 * change i: results[i..count) have rc set to it and made nothing; the
 * changes before i are answered and durable, unless the log could not be
 * written (then every result has rc SIMSTORE_EIO, none is known durable,
 * and every later change fails until the live store is opened again).
 * Errors: those of simstore_near_rule_resolve() (before any change);
 * SIMSTORE_ERANGE (a k simstore_query_fp() refuses for the store, at the
 * first insert-if-new), SIMSTORE_EINVAL (changes or results NULL),
 * SIMSTORE_ECORRUPT, SIMSTORE_EIO, SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_live_apply_batch(simstore_live_query *q,
                                           const simstore_live_change *changes, size_t count,
                                           const simstore_near_rule *rule,
                                           simstore_live_result *results);

/* The document with this id, in memory or on disk: 1 with *doc filled (its
 * pointers valid until the next call on q; metadata always; segment and
 * insertion 0 for a document not yet flushed), 0 when there is none.
 * Errors: SIMSTORE_EINVAL (an empty or oversized id), SIMSTORE_ECORRUPT,
 * SIMSTORE_EIO, SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_live_get(simstore_live_query *q, const char *id, size_t id_len,
                                   simstore_document *doc);

/* Write every change made so far into the store (the in-memory table, and
 * one left by a failed flush) and trim the log; the background thread does
 * the same on its own once the table passes its limit. Queries and changes
 * go on meanwhile. Errors: those of simstore_add_begin(),
 * simstore_builder_finish() and simstore_delete(); SIMSTORE_EIO (the log
 * could not be trimmed, or an earlier write failed). A flush that fails
 * keeps its table in memory and the store unchanged past its last commit:
 * the next flush tries again. */
SIMSTORE_API int simstore_live_flush(simstore_live *live);

/* Compact the store: with force, simstore_compact(); without,
 * simstore_maybe_compact() (only when the policy says so). Meant for a
 * background thread of the caller: queries and changes go on meanwhile
 * (flushes wait for it). Errors: those of simstore_compact(). */
SIMSTORE_API int simstore_live_compact(simstore_live *live, int force);

/* The in-memory part of a live store, for monitoring. */
typedef struct simstore_live_stats {
    uint64_t memtable_docs;    /* ids whose newest change in a table is an
                                  insert (summed over the active table and the
                                  one being flushed)                          */
    uint64_t memtable_deletes; /* ... is a delete                                */
    uint64_t memtable_changes; /* changes held (both tables)                    */
    uint64_t memtable_bytes;   /* bytes the in-memory tables hold                */
    int flushing;              /* a table is being written (or waits to be)     */
    uint64_t wal_bytes;        /* the log file's size                           */
    uint64_t wal_records;      /* records in it                                 */
    uint64_t wal_syncs;        /* fsyncs of groups since open                   */
    uint64_t wal_last_seq;     /* the last change's sequence number             */
    uint64_t wal_applied_seq;  /* the last one the store holds                  */
    uint64_t replayed;         /* records replayed at open                      */
    uint64_t flushes;          /* flushes committed since open                  */
    uint64_t compactions;      /* compactions committed since open              */
    uint64_t inserts;          /* changes acknowledged since open               */
    uint64_t deletes;
    /* Added with the log's recovery. */
    int failing;           /* changes are refused now: the log could not be
                                  written (they are taken again once it can be,
                                  e.g. when the disk has room) or the last
                                  flush failed and the tables are full; 0 when
                                  healthy                                    */
    char failure[256];     /* why, while failing: the failure's message,
                                  naming the file and the system's reason
                                  ("... live.wal: write: No space left on
                                  device"); empty when healthy               */
    uint64_t torn_bytes;   /* a torn tail the open dropped from the log:
                                  the bytes of a group whose fsync had not
                                  returned, none of it acknowledged (0: none) */
    uint64_t torn_records; /* whole records among them                      */
    char torn_name[64];    /* the file in the store directory that keeps
                                  them ("live.wal.torn-..."; empty: none)      */
} simstore_live_stats;

/* Fill *out. Cannot fail. */
SIMSTORE_API void simstore_live_get_stats(simstore_live *live, simstore_live_stats *out);

/* What simstore_live_recover() did. */
typedef struct simstore_live_recovery {
    uint64_t applied;    /* logged changes written into the store's files  */
    uint64_t torn_bytes; /* as simstore_live_stats: a torn tail set aside   */
    uint64_t torn_records;
    char torn_name[64];
} simstore_live_recovery;

/* Apply the changes a live store (a server) acknowledged and logged in
 * STORE/live.wal but did not write into the store's files before it
 * stopped (a crash, a kill, a failed final flush): open the store as a live
 * store, which replays them, flush them into a segment, trim the log and
 * close; exactly what the next serve would do at its start. A store whose
 * log holds nothing to apply is left as it is. Writers (simstore_open()
 * with SIMSTORE_OPEN_WRITE, and so add, delete, compact and shrink) refuse
 * a store whose log holds changes to apply (SIMSTORE_EBUSY, saying so):
 * call this first. out may be NULL.
 * Errors: those of simstore_live_open() (SIMSTORE_EBUSY: a server or writer
 * holds the store; SIMSTORE_ECORRUPT: the log is damaged, named with the
 * byte offset; it is left as it is) and of simstore_live_flush(). */
SIMSTORE_API int simstore_live_recover(const char *path, simstore_live_recovery *out);

/* ---- Threads ------------------------------------------------------------- */

/* The default number of worker threads: the cores online (at least 1). The
 * one rule behind every "0 = every core" option of the library and tool. */
SIMSTORE_API unsigned simstore_default_threads(void);

/* ---- Sharded stores (format/shards.md) ------------------------------------
 * A sharded store is a directory holding R shards, each an ordinary store
 * (every function above works on one alone), and a manifest, MANIFEST,
 * published last and atomically, that names them, the rule that assigns
 * documents to them and what they all share (k, block size, kind, text
 * options, boilerplate set). A document lives on shard
 * simstore_shard_of(id) (a fingerprint-only store's fingerprint on
 * simstore_shard_of_fp(fp)), its record and its fingerprint together, so a
 * query asks every shard and merges: the answers, and their order, are
 * those of one store holding the same documents. A directory of shards
 * without a manifest (a build that did not finish) is not a sharded store. */

/* The most shards a sharded store may have, and the manifest's file name. */
#define SIMSTORE_SHARDS_MAX 4096u
#define SIMSTORE_MANIFEST_NAME "MANIFEST"

typedef struct simstore_sharded simstore_sharded;
typedef struct simstore_sharded_query simstore_sharded_query;

/* The shard of a document: XXH3-64 (seed 0) of its id's bytes, modulo
 * shards (which must be 1..SIMSTORE_SHARDS_MAX; 0 is answered 0). */
SIMSTORE_API unsigned simstore_shard_of(const char *id, size_t id_len, unsigned shards);

/* The shard of a fingerprint in a fingerprint-only store: XXH3-64 (seed 0)
 * of its 8 little-endian bytes, modulo shards. */
SIMSTORE_API unsigned simstore_shard_of_fp(uint64_t fp, unsigned shards);

/* The name of shard i (0-based) that simstore_sharded_prepare() and
 * simstore_sharded_publish() use, "shard-0000" and up, into buf (at least
 * 16 bytes). */
SIMSTORE_API void simstore_shard_name(unsigned shard, char *buf, size_t size);

/* What `path` is: 1 a sharded store (it holds a manifest, which is not
 * checked here), 2 a directory of shards without a manifest (a sharded
 * build that did not finish), 0 anything else (a store, nothing at all). */
SIMSTORE_API int simstore_is_sharded(const char *path);

/* Make `path` ready to receive a sharded store of `shards` shards, each to be
 * built at path/simstore_shard_name(i) (with simstore_build_options.replace
 * set, since a shard of an unfinished build may be there), then published
 * with simstore_sharded_publish(). A missing path is created; an existing
 * one must hold nothing but shards, their builders' temporary directories
 * and a manifest. A manifest there is refused unless `replace`, which
 * removes it first, so that the directory stops being a sharded store until
 * the new manifest is published. Shards numbered `shards` and up are
 * removed; leftover temporary files of a manifest too.
 * Errors: SIMSTORE_EINVAL (shards out of range; path is a file, or a
 * directory holding anything else, a store among them), SIMSTORE_EEXIST (a
 * sharded store is there and replace is 0), SIMSTORE_EIO. */
SIMSTORE_API int simstore_sharded_prepare(const char *path, unsigned shards, int replace);

/* Publish the manifest of the `shards` shards path/shard-0000... : each is
 * opened read-only and checked to agree with the first (k, block size,
 * kind, text options, boilerplate set), then MANIFEST is written (temp,
 * fsync, rename, fsync the directory). Call it when every shard is built.
 * Errors: SIMSTORE_ENOTFOUND (a shard is missing), SIMSTORE_EINVAL (shards
 * out of range, shards that disagree), those of simstore_open(),
 * SIMSTORE_EIO, SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_sharded_publish(const char *path, unsigned shards);

/* Open the sharded store at `path`: its manifest, then every shard with
 * `flags` (SIMSTORE_OPEN_READONLY and the read-only flags of
 * simstore_open(); not SIMSTORE_OPEN_WRITE), each checked to agree with the
 * manifest. Errors name the file at fault: SIMSTORE_ENOTFOUND (no manifest,
 * a directory of shards without one, or a missing shard), SIMSTORE_ECORRUPT
 * (a damaged manifest, or a shard that disagrees with it),
 * SIMSTORE_EVERSION, SIMSTORE_EINVAL (a write flag), and those of
 * simstore_open(). */
SIMSTORE_API int simstore_sharded_open(const char *path, unsigned flags, simstore_sharded **out);

/* Close every shard. Every simstore_sharded_query must be freed first.
 * Accepts NULL. */
SIMSTORE_API void simstore_sharded_close(simstore_sharded *sh);

/* R, the number of shards. */
SIMSTORE_API unsigned simstore_sharded_count(const simstore_sharded *sh);

/* Shard i (0..R-1), owned by sh: valid until simstore_sharded_close(); NULL
 * out of range. Shards agree on k, text options and boilerplate, so shard
 * 0 answers simstore_get_text_options() and simstore_get_boilerplate() for
 * the whole store. */
SIMSTORE_API simstore *simstore_sharded_shard(simstore_sharded *sh, unsigned i);

/* The path of shard i (valid as the shard), NULL out of range. */
SIMSTORE_API const char *simstore_sharded_shard_path(const simstore_sharded *sh, unsigned i);

/* The stats of the whole store: counts and sizes summed over the shards;
 * k, block bytes, kind, sketch and paragraph minimum as they all have them;
 * tables and design those of shard 0, with ", R shards" appended to the
 * design. Errors: those of simstore_get_stats(). */
SIMSTORE_API int simstore_sharded_get_stats(simstore_sharded *sh, simstore_stats *out);

/* A query context for one thread (one simstore_query per shard).
 * Errors: SIMSTORE_ENOMEM, SIMSTORE_EIO. */
SIMSTORE_API int simstore_sharded_query_new(simstore_sharded *sh, unsigned flags,
                                            simstore_sharded_query **out);
SIMSTORE_API void simstore_sharded_query_free(simstore_sharded_query *q);

/* simstore_query_fp_sketch() on every shard, merged: every match within k,
 * sorted by distance, then id bytes (fingerprint-only stores: then
 * fingerprint), exactly as one store holding the same documents answers.
 * sketch may be NULL. *matches stays valid until the next call on q.
 * Errors: those of simstore_query_fp(), SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_sharded_query_fp(simstore_sharded_query *q, uint64_t fp,
                                           const uint8_t *sketch, unsigned k,
                                           const simstore_match **matches, size_t *count);

/* simstore_query_paragraphs() on every shard, merged in its order (the
 * fraction, larger first, then id bytes): exactly the answer of one store
 * holding the same documents. *matches stays valid until the next call on
 * q. Errors: those of simstore_query_paragraphs(), SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_sharded_query_paragraphs(simstore_sharded_query *q, const uint64_t *fps,
                                                   size_t n, unsigned k, double min_fraction,
                                                   const simstore_paragraph_match **matches,
                                                   size_t *count);

/* simstore_query_batch_sketches() over every shard (sketches may be NULL),
 * merged: fn receives the answer to query `index` in input order, exactly
 * as simstore_sharded_query_fp() gives it (the matches carry no sketch:
 * simstore_match.sketch is NULL). Each shard answers the whole batch first
 * and the answers of every shard are held until it ends, so callers bound
 * n (the command reads up to --memory / 128 queries a batch).
 * Returns SIMSTORE_OK, fn's nonzero value when it stopped the batch, or the
 * errors of simstore_query_batch(). */
SIMSTORE_API int simstore_sharded_query_batch(simstore_sharded *sh, const uint64_t *fps,
                                              const uint8_t *sketches, size_t n, unsigned k,
                                              const simstore_batch_options *o, simstore_batch_fn fn,
                                              void *ctx);

#ifdef __cplusplus
}
#endif

#endif /* SIMSTORE_H */
