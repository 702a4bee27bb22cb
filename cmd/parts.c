/* parts.c: a store's bytes on disk by part, per document (parts.h). */
#include "parts.h"

typedef struct parts {
    const char *unit; /* "document" or "fingerprint" */
    double total, tables, records, mapping, other, free, docfile;
} parts;

static parts parts_of(const simstore_stats *st)
{
    parts p;
    uint64_t n = st->fingerprint_only ? st->fingerprints : st->documents;
    double d = n ? (double)n : 1.0;
    p.unit = st->fingerprint_only ? "fingerprint" : "document";
    p.tables = (double)st->table_bytes / d;
    p.records = (double)st->lmdb_records_bytes / d;
    p.mapping = (double)st->lmdb_mapping_bytes / d;
    p.other = (double)st->lmdb_other_bytes / d;
    p.free = (double)(st->lmdb_free_bytes + st->lmdb_tail_bytes) / d;
    p.docfile = (double)st->document_file_bytes / d;
    p.total = (double)(st->table_bytes + st->lmdb_bytes + st->document_file_bytes) / d;
    return p;
}

void parts_text(FILE *out, const simstore_stats *st)
{
    parts p = parts_of(st);
    fprintf(out, "bytes per %s: %.2f (tables %.2f, ", p.unit, p.total, p.tables);
    if (st->document_file_bytes)
        fprintf(out, "document file %.2f, ", p.docfile);
    fprintf(out, "LMDB records %.2f, mapping %.2f, other %.2f, free %.2f)\n", p.records, p.mapping,
            p.other, p.free);
}

void parts_json(FILE *out, const simstore_stats *st)
{
    parts p = parts_of(st);
    fprintf(out, "\"bytes_per_%s\":{\"total\":%.4f,\"tables\":%.4f,", p.unit, p.total, p.tables);
    if (st->document_file_bytes)
        fprintf(out, "\"document_file\":%.4f,", p.docfile);
    fprintf(out,
            "\"lmdb_records\":%.4f,\"lmdb_mapping\":%.4f,\"lmdb_other\":%.4f,"
            "\"lmdb_free\":%.4f}",
            p.records, p.mapping, p.other, p.free);
}
