/* records.h: encode and decode the records simstore keeps in LMDB (the store
 * record, the state record, document records), as format/store.md specifies.
 * Pure functions over byte buffers: no LMDB, no I/O, fuzzable. */
#ifndef SIMS_STORE_RECORDS_H
#define SIMS_STORE_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#define SIMS_STORE_FORMAT_VERSION 2u
#define SIMS_STORE_FLAG_FP_ONLY 1u

/* The store record's feature words (format/store.md, "Versions and
 * features"): a later change to the disk sets a bit instead of changing
 * the format version. A reader refuses a store with an incompatible
 * feature it does not know (SIMSTORE_EVERSION) and ignores compatible ones
 * it does not know. Incompatible bit 0: the store's texts are fingerprinted
 * with fingerprint version 3 (its text record says 3), which a reader
 * knowing versions 1 and 2 only would fingerprint queries and adds with
 * wrongly. No compatible bit is defined. */
#define SIMS_STORE_INCOMPAT_FP_V3 UINT64_C(1)
#define SIMS_STORE_INCOMPAT_KNOWN SIMS_STORE_INCOMPAT_FP_V3
#define SIMS_STORE_COMPAT_KNOWN UINT64_C(0)

#define SIMS_STORE_RECORD_SEED 0x53494D53544F5245ULL /* "SIMSTORE" */
#define SIMS_STATE_RECORD_SEED 0x53494D5354415445ULL /* "SIMSTATE" */
#define SIMS_DOC_RECORD_SEED 0x53494D53444F4353ULL   /* "SIMSDOCS" */

#define SIMS_MAX_SEGMENTS 65536u
#define SIMS_DOC_RECORD_OVERHEAD 14u

/* The store record: fixed at creation. `design` borrows the design record's
 * bytes (inside the decoded buffer, or the caller's when encoding). */
typedef struct sims_store_record {
    uint32_t format_version;
    uint32_t flags;
    uint64_t store_tag;
    uint32_t block_bytes;
    uint64_t created_unix;
    uint64_t incompat_features; /* SIMS_STORE_INCOMPAT_KNOWN bits only */
    uint64_t compat_features;   /* any bits: unknown ones are ignored */
    const uint8_t *design;
    uint32_t design_len;
} sims_store_record;

/* Bytes sims_store_record_encode() writes. */
size_t sims_store_record_size(const sims_store_record *r);
/* Write the record into buf (cap >= sims_store_record_size()). Returns the
 * size written, or 0 when cap is too small. */
size_t sims_store_record_encode(const sims_store_record *r, uint8_t *buf, size_t cap);
/* Parse and check a store record. SIMSTORE_ECORRUPT for a bad magic, length,
 * checksum, reserved field or block size; SIMSTORE_EVERSION for a format
 * version other than SIMS_STORE_FORMAT_VERSION (checked first) or an
 * incompatible feature bit outside SIMS_STORE_INCOMPAT_KNOWN (checked after
 * the checksum), the message naming them. The design bytes are returned
 * unparsed (the design decoder checks them). */
int sims_store_record_decode(const uint8_t *buf, size_t len, sims_store_record *out);

typedef struct sims_segment_entry {
    uint64_t id;
    uint64_t fp_count;
    uint64_t created_unix;
    uint32_t table_count;
    uint32_t flags; /* SIMS_SEGMENT_FLAG_*; 0 in a paragraph segment */
} sims_segment_entry;

/* Segment entry flag bit 0: the segment's documents are in its document
 * file, sSSSSSSSSSS.doc (format/store.md, "Document files"). */
#define SIMS_SEGMENT_FLAG_DOCFILE 1u
/* Bit 1 (only with bit 0): docs may hold documents added since the file
 * was written and tombstones of its deleted or replaced documents. */
#define SIMS_SEGMENT_FLAG_CHANGED 2u

/* The state record. `segments` points at `segment_count` entries owned by the
 * caller (when encoding) or allocated by the decoder (free with
 * sims_state_record_release()). */
typedef struct sims_state_record {
    uint64_t generation;
    uint64_t next_segment_id;
    uint64_t doc_count;
    uint64_t fp_count;
    uint32_t segment_count;
    sims_segment_entry *segments;
    /* The paragraph segments (format/store.md, "Paragraphs"): their own
     * list, after the document segments, in one allocation with them when
     * decoded. */
    uint32_t para_segment_count;
    sims_segment_entry *para_segments;
    /* The last write-ahead log sequence number whose change this state
     * holds (format/store.md, "The state record"; format/wal.md): 0 when no
     * live store ever flushed into the store (the field is then absent). */
    uint64_t wal_applied;
} sims_state_record;

/* Bytes of a state record with these segment counts and no applied WAL
 * sequence number. */
size_t sims_state_record_size2(uint32_t segment_count, uint32_t para_segment_count);
size_t sims_state_record_size(uint32_t segment_count);
/* Bytes sims_state_record_encode() writes for r: sims_state_record_size2()
 * plus 8 when r->wal_applied is not 0. */
size_t sims_state_record_bytes(const sims_state_record *r);
size_t sims_state_record_encode(const sims_state_record *r, uint8_t *buf, size_t cap);
/* Parse and check a state record: magic, length, checksum, reserved fields,
 * segment ids >= 1, strictly increasing and below next_segment_id (in each
 * list; the two lists share no id), table counts equal to
 * `expect_table_count`, an applied WAL sequence number (when present) not 0.
 * SIMSTORE_ECORRUPT or SIMSTORE_ENOMEM on failure (nothing to release
 * then). */
int sims_state_record_decode(const uint8_t *buf, size_t len, uint32_t expect_table_count,
                             sims_state_record *out);
void sims_state_record_release(sims_state_record *r);

/* The text record: how the store's texts were fingerprinted. */
#define SIMS_TEXT_RECORD_SEED 0x53494D5354455854ULL /* "SIMSTEXT" */
#define SIMS_TEXT_RECORD_BYTES 40u

typedef struct sims_text_record {
    uint32_t shingle_words;       /* 1..32 */
    uint32_t weighting;           /* 0 tf, 1 length, 2 log (versions 2, 3) */
    uint32_t cjk;                 /* 1 friso, 2 bigram (never auto) */
    uint64_t lambda_fixed;        /* round(lambda * 65536) */
    uint32_t version;             /* fingerprint version: 1 (stored as 0), 2, 3 */
    uint32_t cjk_shingle;         /* versions 2, 3: 1..32; version 1: 0 */
    uint32_t sketch;              /* the sketch kind of every document: 0 none,
                               1..SIMS_SKETCH_KIND_MAX (simstore_sketch_kind) */
    uint32_t paragraph_min_words; /* 0: no paragraph index; else 1..255 */
} sims_text_record;

#define SIMS_PARAGRAPH_MIN_WORDS_MAX 255u

/* The incompatible features a store of fingerprint version `version` carries. */
static inline uint64_t sims_store_incompat_of_version(uint32_t version)
{
    return version >= 3 ? SIMS_STORE_INCOMPAT_FP_V3 : 0;
}
/* SIMSTORE_ECORRUPT when the store record's incompatible features (known
 * ones, as decoded) and the text record's version disagree. */
int sims_store_incompat_check(uint64_t incompat, const sims_text_record *text);

void sims_text_record_encode(const sims_text_record *r, uint8_t buf[SIMS_TEXT_RECORD_BYTES]);
/* SIMSTORE_ECORRUPT for a bad length, magic, checksum, reserved field or value.
 * Version 3 is accepted here; the store's opener checks that the store record
 * carries SIMS_STORE_INCOMPAT_FP_V3 exactly then (sims_store_incompat_check). */
int sims_text_record_decode(const uint8_t *buf, size_t len, sims_text_record *out);

/* A document record, the value of `docs` for one id. */
#define SIMS_DOC_FLAG_META 1u       /* metadata present */
#define SIMS_DOC_FLAG_INTEGER_ID 2u /* the id was given as a JSON integer */
#define SIMS_DOC_FLAG_INSERTION 4u  /* the insertion number is present */
#define SIMS_DOC_INSERTION_BYTES 8u
/* Flag bits 3..4 and 6: the kind of the sketch the record holds (0: none),
 * bits 3..4 its low two bits and bit 6 its third (kinds 4 and 5). */
#define SIMS_DOC_SKETCH_SHIFT 3
#define SIMS_DOC_SKETCH_HIGH 64u
#define SIMS_DOC_SKETCH_MASK ((3u << SIMS_DOC_SKETCH_SHIFT) | SIMS_DOC_SKETCH_HIGH)
#define SIMS_DOC_FLAG_SKETCH(kind)                                                                 \
    ((((unsigned)(kind)&3u) << SIMS_DOC_SKETCH_SHIFT) |                                            \
     ((unsigned)(kind)&4u ? SIMS_DOC_SKETCH_HIGH : 0u))
#define SIMS_DOC_SKETCH_KIND(flags)                                                                \
    ((((unsigned)(flags) >> SIMS_DOC_SKETCH_SHIFT) & 3u) |                                         \
     ((unsigned)(flags)&SIMS_DOC_SKETCH_HIGH ? 4u : 0u))
/* Flag bit 5: the record lists the document's paragraph fingerprints. */
#define SIMS_DOC_FLAG_PARAGRAPHS 32u
/* At most this many paragraphs per document (a record's list stays below
 * 8 MiB). */
#define SIMS_DOC_MAX_PARAGRAPHS (1u << 20)

/* Insertion numbers (format/store.md, "The document record"):
 * (commit generation << 40) | the document's 0-based position in that
 * commit's input. */
#define SIMS_DOC_POSITION_BITS 40
#define SIMS_DOC_POSITION_LIMIT ((uint64_t)1 << SIMS_DOC_POSITION_BITS)
#define SIMS_DOC_GENERATION_LIMIT ((uint64_t)1 << (64 - SIMS_DOC_POSITION_BITS))

/* The insertion number of the document at `position` (0-based, in the order
 * given) in the input of the commit that makes generation `generation`.
 * SIMSTORE_EFULL when generation >= SIMS_DOC_GENERATION_LIMIT or position >=
 * SIMS_DOC_POSITION_LIMIT (*out is then left alone). */
int sims_doc_insertion_number(uint64_t generation, uint64_t position, uint64_t *out);

typedef struct sims_doc_record {
    uint64_t fp;
    unsigned flags;        /* SIMS_DOC_FLAG_INTEGER_ID, SIMS_DOC_FLAG_INSERTION (META
                              is implied by meta, the sketch bits by sketch_kind) */
    uint64_t insertion;    /* 0 unless flags has SIMS_DOC_FLAG_INSERTION */
    unsigned sketch_kind;  /* 0: no sketch */
    const uint8_t *sketch; /* simstore_sketch_bytes(sketch_kind) bytes, or NULL;
                              borrowed */
    const uint8_t *meta;   /* NULL when absent; borrowed */
    size_t meta_len;
    uint32_t para_count;  /* paragraph fingerprints listed (0: none) */
    const uint8_t *paras; /* para_count little-endian 8-byte fingerprints, in
                              text order, or NULL; borrowed */
} sims_doc_record;

/* Bytes sims_doc_record_encode() writes for meta_len bytes of metadata and
 * `flags` (the sketch kind in them included). */
size_t sims_doc_record_size(size_t meta_len, unsigned flags);
/* Encode for document `id`; flags: SIMS_DOC_FLAG_INTEGER_ID and
 * SIMS_DOC_FLAG_INSERTION or 0; insertion is written only with
 * SIMS_DOC_FLAG_INSERTION (a record without it, as stores before it was
 * specified hold, when clear). meta may be NULL or empty (absent). Returns
 * bytes written or 0 when cap is too small. */
size_t sims_doc_record_encode(const uint8_t *id, size_t id_len, uint64_t fp, unsigned flags,
                              uint64_t insertion, const uint8_t *meta, size_t meta_len,
                              uint8_t *buf, size_t cap);
/* The same with a sketch: flags may also hold SIMS_DOC_FLAG_SKETCH(kind) of
 * a sketch kind, whose simstore_sketch_bytes(kind) bytes `sketch` gives. */
size_t sims_doc_record_encode_sketch(const uint8_t *id, size_t id_len, uint64_t fp, unsigned flags,
                                     uint64_t insertion, const uint8_t *sketch, const uint8_t *meta,
                                     size_t meta_len, uint8_t *buf, size_t cap);
/* The same with the document's paragraph fingerprints: para_count of them
 * (at most SIMS_DOC_MAX_PARAGRAPHS), in text order, as 8-byte little-endian
 * values at paras (the record's own layout); SIMS_DOC_FLAG_PARAGRAPHS is set
 * when para_count > 0. The size is sims_doc_record_size() of flags |
 * SIMS_DOC_FLAG_PARAGRAPHS plus 8 * para_count. */
size_t sims_doc_record_encode_full(const uint8_t *id, size_t id_len, uint64_t fp, unsigned flags,
                                   uint64_t insertion, const uint8_t *sketch, const uint8_t *paras,
                                   uint32_t para_count, const uint8_t *meta, size_t meta_len,
                                   uint8_t *buf, size_t cap);
/* A tombstone (format/store.md, "Document files"): the docs value that
 * takes a store's document-file document of `id` (fingerprint fp) out of
 * the store; 14 bytes: version 1, flags SIMS_DOC_FLAG_TOMBSTONE alone, fp,
 * check. Returns the size, or 0 when cap is too small. */
#define SIMS_DOC_FLAG_TOMBSTONE 128u
size_t sims_doc_tombstone_encode(const uint8_t *id, size_t id_len, uint64_t fp, uint8_t *buf,
                                 size_t cap);
/* Decode a docs value of a store with a document file: a document record
 * (*tombstone 0, as sims_doc_record_decode), or a tombstone (*tombstone 1,
 * out->fp its fingerprint, every other field zero). sims_doc_record_decode
 * rejects tombstones as corrupt (flag bit 7). */
int sims_doc_entry_decode(const uint8_t *id, size_t id_len, const uint8_t *buf, size_t len,
                          sims_doc_record *out, int *tombstone);
/* Decode and check the record stored under `id`. SIMSTORE_ECORRUPT on a bad
 * length, version, flags (a sketch kind that names none) or check. meta and
 * sketch borrow from buf; insertion is 0 for a record without the field,
 * sketch_kind 0 and sketch NULL for one without a sketch. */
int sims_doc_record_decode(const uint8_t *id, size_t id_len, const uint8_t *buf, size_t len,
                           sims_doc_record *out);

#endif
