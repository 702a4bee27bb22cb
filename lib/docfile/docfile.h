/* docfile.h: the document file of one segment (format/docfile.md; where a
 * store keeps its documents: format/store.md, "Document files"): documents
 * in fingerprint order in checksummed blocks,
 * found by fingerprint or by id through two small checksummed directories.
 * The writer streams documents in order and publishes atomically; the
 * reader maps the file, reads the header at open, and checks each piece a
 * lookup reads (directory page, block-table page, id-entry page, block)
 * before using it. Readers are safe to share between threads. */
#ifndef SIMS_DOCFILE_DOCFILE_H
#define SIMS_DOCFILE_DOCFILE_H

#include <stddef.h>
#include <stdint.h>

#define DOCFILE_VERSION 1u
#define DOCFILE_HEADER_BYTES 64u
#define DOCFILE_BLOCK_DOCS 64u
#define DOCFILE_ID_MAX 511u
#define DOCFILE_MAX_DOCS ((uint64_t)1 << 40)
#define DOCFILE_PARAGRAPHS_MAX ((uint32_t)1 << 20)

/* One document. Pointers from a reader point into its mapping (valid while
 * it is open); a writer copies what it is given. */
typedef struct docfile_doc {
    uint64_t ordinal; /* set by readers; ignored by the writer */
    uint64_t fingerprint;
    uint64_t insertion;
    const uint8_t *id;
    uint32_t id_len;       /* 1..511 */
    int id_is_int;         /* the id was a JSON integer */
    const uint8_t *meta;   /* NULL: no metadata */
    uint32_t meta_len;     /* 0 iff meta is NULL */
    const uint8_t *sketch; /* sketch_bytes bytes, or NULL when the file keeps none */
    /* The paragraph list (format/store.md, "Paragraphs"): paragraph_count
     * 8-byte little-endian fingerprints, text order, not aligned; NULL and
     * 0 when the document has none (else 1..DOCFILE_PARAGRAPHS_MAX). */
    const uint8_t *paragraphs;
    uint32_t paragraph_count;
} docfile_doc;

/* ---- writer ---------------------------------------------------------------- */

typedef struct docfile_writer docfile_writer;

/* Start writing `path` (published by sims_docfile_writer_commit). sketch_bytes:
 * 0, 16, 32, 64, 128 or 256. The writer holds one block and, within
 * memory_bytes (0: 64 MiB), the block table and the id entries; beyond it
 * they spill to unlinked files in tmp_dir (NULL: $TMPDIR or /tmp). */
int sims_docfile_writer_open(const char *path, unsigned sketch_bytes, size_t memory_bytes,
                             const char *tmp_dir, docfile_writer **out);
/* Append a document: in the file's order (fingerprint, then id bytes), so
 * strictly after the previous one. Ids must be distinct: the writer does
 * not check it across fingerprints (its caller dedups them; sims_docfile_verify
 * finds a repeated id). */
int sims_docfile_writer_add(docfile_writer *w, const docfile_doc *d);
/* Write the indexes, fsync, publish, fsync the directory; frees w (also
 * on failure, the temporary file then removed). `sizes` (may be NULL)
 * receives the parts of the file written. */
struct docfile_sizes;
int sims_docfile_writer_commit(docfile_writer *w, struct docfile_sizes *sizes);
/* Discard (the temporary file removed); frees w; NULL is fine. */
void sims_docfile_writer_abort(docfile_writer *w);

/* Sizes of the parts of a file, in bytes (the writer's, or a reader's). */
typedef struct docfile_sizes {
    uint64_t total;
    uint64_t blocks;      /* record blocks, all fields */
    uint64_t block_table; /* first fingerprints and ends */
    uint64_t fp_dir;
    uint64_t id_entries;
    uint64_t id_dir;
} docfile_sizes;

/* ---- reader ---------------------------------------------------------------- */

typedef struct docfile_reader docfile_reader;

/* Open a file: maps it and checks the header and the section sizes alone. */
int sims_docfile_open(const char *path, docfile_reader **out);
/* Ask for the file's pages in 2 MiB folios as they come into the page
 * cache (sims_map_advise_huge); nothing for a file in memory. */
void sims_docfile_advise_huge(const docfile_reader *r);
/* The same over bytes the caller keeps alive (tests, fuzzing); `name`
 * names them in messages. */
int sims_docfile_open_memory(const uint8_t *data, size_t size, const char *name,
                             docfile_reader **out);
void sims_docfile_close(docfile_reader *r);
/* A file of no documents, never closed: what a store without a document
 * file reads (its documents, all in docs, are then changes to nothing). */
const docfile_reader *sims_docfile_empty(void);

uint64_t sims_docfile_count(const docfile_reader *r);
unsigned sims_docfile_sketch_bytes(const docfile_reader *r);
void sims_docfile_sizes_of(const docfile_reader *r, docfile_sizes *out);

/* Call each(ctx, doc) for every document with fingerprint fp, in order;
 * each returns 0 to go on, anything else stops and is returned. Returns 0,
 * or an error (SIMSTORE_ECORRUPT naming the piece). */
int sims_docfile_find_fp(const docfile_reader *r, uint64_t fp,
                         int (*each)(void *ctx, const docfile_doc *d), void *ctx);
/* Hint that sims_docfile_find_fp(r, fp) follows: prefetch the directory lines it
 * reads first (a query calls it as its tables find each candidate). Reads
 * nothing itself; never fails. */
void sims_docfile_prefetch_fp(const docfile_reader *r, uint64_t fp);
/* The next hint, once the directory's lines have come: prefetch the block
 * table lines sims_docfile_find_fp(r, fp) reads next (the directory's entries
 * read unchecked, to choose the lines only). Never fails. */
void sims_docfile_prefetch_fp_table(const docfile_reader *r, uint64_t fp);
/* The document with this id: 1 and *out, 0 when there is none, or an error. */
int sims_docfile_find_id(const docfile_reader *r, const void *id, size_t len, docfile_doc *out);
/* The document at an ordinal (< sims_docfile_count). */
int sims_docfile_get(const docfile_reader *r, uint64_t ordinal, docfile_doc *out);
/* Every document in order, as sims_docfile_find_fp calls back. */
int sims_docfile_each(const docfile_reader *r, int (*each)(void *ctx, const docfile_doc *d),
                      void *ctx);
/* Read and check everything (format/docfile.md, "What a lookup trusts"),
 * in bounded memory (the ids' hashes sorted within 64 MiB, spilling to
 * $TMPDIR beyond). */
int sims_docfile_verify(const docfile_reader *r);

/* The id hash of the format (XXH3-64 with the id seed). */
uint64_t sims_docfile_id_hash(const void *id, size_t len);

#endif
