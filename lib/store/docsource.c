/* docsource.c: documents read from a store's document file (format/store.md,
 * "Document files") in the shapes the readers of docs and fps use: a
 * document as its record (sims_doc_record), and every document in id order
 * (the file keeps fingerprint order; its ids are sorted here through the
 * spilling record sorter, in bounded memory). */
#include "store/store_internal.h"

#include "common/bytes.h"
#include "common/error.h"
#include "sort/recsort.h"

#include <string.h>

void sims_docfile_record(const simstore *s, const docfile_doc *d, sims_doc_record *rec)
{
    memset(rec, 0, sizeof *rec);
    rec->fp = d->fingerprint;
    rec->flags = SIMS_DOC_FLAG_INSERTION | (d->id_is_int ? SIMS_DOC_FLAG_INTEGER_ID : 0);
    rec->insertion = d->insertion;
    if (d->sketch) {
        rec->sketch_kind = (unsigned)s->text.sketch;
        rec->sketch = d->sketch;
    }
    rec->meta = d->meta;
    rec->meta_len = d->meta ? d->meta_len : 0;
    rec->para_count = d->paragraph_count;
    rec->paras = d->paragraphs;
}

typedef struct by_id {
    sims_recsort *sorter;
} by_id;

static int push_id(void *ctx, const docfile_doc *d)
{
    by_id *b = (by_id *)ctx;
    uint8_t ord[8];
    le_store64(ord, d->ordinal);
    return sims_recsort_push(b->sorter, d->id, d->id_len, ord, 8);
}

int sims_docfile_each_by_id(const simstore *s, const docfile_reader *r, uint64_t memory_bytes,
                            int (*fn)(void *ctx, const docfile_doc *d), void *ctx)
{
    by_id b = {NULL};
    size_t budget = (size_t)(memory_bytes / 2);
    int rc = sims_recsort_new(budget, NULL, &b.sorter);
    if (rc == SIMSTORE_OK)
        rc = docfile_each(r, push_id, &b);
    if (rc == SIMSTORE_OK)
        rc = sims_recsort_finish(b.sorter, budget / 2);
    sims_rec rec;
    while (rc == SIMSTORE_OK) {
        int more = sims_recsort_next(b.sorter, &rec);
        if (more <= 0) {
            rc = more;
            break;
        }
        docfile_doc d;
        rc = rec.val_len == 8 ? docfile_get(r, le_load64(rec.val), &d)
                              : sims_fail(SIMSTORE_EIO, "internal: an id record of %u bytes",
                                          (unsigned)rec.val_len);
        if (rc == SIMSTORE_OK && (d.id_len != rec.key_len || memcmp(d.id, rec.key, d.id_len)))
            rc = SIMS_CORRUPT("%s: the document file changed while read", s->path);
        if (rc == SIMSTORE_OK)
            rc = fn(ctx, &d);
    }
    sims_recsort_free(b.sorter);
    return rc;
}
