/* statsjson.c: the JSON object of a store's stats (statsjson.h). */
#include "statsjson.h"

#include "boilerplate.h"
#include "parts.h"
#include "textopts.h"

void stats_json(FILE *out, simstore *s, const simstore_stats *st)
{
    simstore_text_options text;
    simstore_get_text_options(s, &text);
    fprintf(out,
            "{\"k\":%u,\"tables\":%u,\"design\":\"%s\",\"block_bytes\":%u,"
            "\"fingerprint_only\":%s,\"documents\":%llu,\"fingerprints\":%llu,"
            "\"segments\":%llu,\"generation\":%llu,\"table_fingerprints\":%llu,"
            "\"table_bytes\":%llu,\"lmdb_bytes\":%llu,\"lmdb_records_bytes\":%llu,"
            "\"lmdb_mapping_bytes\":%llu,\"lmdb_other_bytes\":%llu,\"lmdb_free_bytes\":%llu,"
            "\"block_key_bytes\":%llu,\"document_file_bytes\":%llu,",
            st->k, st->tables, st->design, st->block_bytes, st->fingerprint_only ? "true" : "false",
            (unsigned long long)st->documents, (unsigned long long)st->fingerprints,
            (unsigned long long)st->segments, (unsigned long long)st->generation,
            (unsigned long long)st->table_fps, (unsigned long long)st->table_bytes,
            (unsigned long long)st->lmdb_bytes, (unsigned long long)st->lmdb_records_bytes,
            (unsigned long long)st->lmdb_mapping_bytes, (unsigned long long)st->lmdb_other_bytes,
            (unsigned long long)(st->lmdb_free_bytes + st->lmdb_tail_bytes),
            (unsigned long long)st->block_key_bytes, (unsigned long long)st->document_file_bytes);
    parts_json(out, st);
    fprintf(out, ",\"fingerprint_version\":%u,\"text_options\":{", text.version);
    textopt_json(out, &text);
    fprintf(out, "},");
    textopt_json_sketch(out, text.sketch);
    fputc(',', out);
    textopt_json_paragraphs(out, st);
    fprintf(out,
            ",\"wal\":{\"bytes\":%llu,\"pending_changes\":%llu,\"torn_bytes\":%llu,"
            "\"damaged\":%s}",
            (unsigned long long)st->wal_bytes, (unsigned long long)st->wal_pending_records,
            (unsigned long long)st->wal_torn_bytes, st->wal_damaged ? "true" : "false");
    fprintf(out, ",\"boilerplate\":");
    boiler_json(out, simstore_get_boilerplate(s));
    fprintf(out, "}");
}
