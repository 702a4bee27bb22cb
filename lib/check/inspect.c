/* inspect.c: the inspection half of simstore.h's "Inspection and
 * verification": table handles over a lone table file or one table of an open
 * store (facts, blocks, permutation both ways, the leading-bit histogram),
 * the segments of a store's committed state, and its design in words. */
#include "check/inspect.h"
#include "store/store_internal.h"

#include "common/error.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct simstore_table {
    table_reader *reader; /* owned unless seg holds it */
    sims_segment *seg;    /* a reference, for a table of a store */
    char *path;
    uint8_t perm[64];
    sims_permuter permuter;
    int compiled; /* permuter usable (at most SIMS_PERMUTER_MAX_MOVES moves) */
    uint64_t max_block_count;
};

/* ---- permutations in words ---------------------------------------------------- */

/* Append the source bits of output bits [from, to] (from >= to, descending)
 * as runs "63..48 40 39..30". */
static size_t describe_bits(const uint8_t perm[64], int from, int to, char *buf, size_t size,
                            size_t len)
{
    int i = from;
    while (i >= to) {
        int j = i;
        while (j - 1 >= to && perm[j - 1] + 1 == perm[j])
            j--;
        int n;
        if (j == i)
            n = snprintf(buf + len, len < size ? size - len : 0, "%s%u", len ? " " : "", perm[i]);
        else
            n = snprintf(buf + len, len < size ? size - len : 0, "%s%u..%u", len ? " " : "",
                         perm[i], perm[j]);
        if (n > 0)
            len += (size_t)n;
        i = j - 1;
    }
    return len;
}

void sims_describe_permutation(const uint8_t perm[64], unsigned prefix_bits, char *buf, size_t size)
{
    if (size == 0)
        return;
    buf[0] = '\0';
    int identity = 1;
    for (unsigned i = 0; i < 64; i++)
        identity &= perm[i] == i;
    size_t len = 0;
    int n = snprintf(buf, size, "prefix bits ");
    len = n > 0 ? (size_t)n : 0;
    if (prefix_bits == 0) {
        n = snprintf(buf + len, len < size ? size - len : 0, "(none)");
        len += n > 0 ? (size_t)n : 0;
    } else {
        char tmp[192];
        describe_bits(perm, 63, 64 - (int)prefix_bits, tmp, sizeof tmp, 0);
        n = snprintf(buf + len, len < size ? size - len : 0, "%s (%u)", tmp, prefix_bits);
        len += n > 0 ? (size_t)n : 0;
    }
    if (prefix_bits < 64) {
        char tmp[192];
        describe_bits(perm, 63 - (int)prefix_bits, 0, tmp, sizeof tmp, 0);
        n = snprintf(buf + len, len < size ? size - len : 0, ", then %s", tmp);
        len += n > 0 ? (size_t)n : 0;
    }
    if (identity)
        snprintf(buf + len, len < size ? size - len : 0, " (identity)");
}

uint64_t sims_permute_naive(const uint8_t perm[64], uint64_t x)
{
    uint64_t out = 0;
    for (unsigned i = 0; i < 64; i++)
        out |= ((x >> perm[i]) & 1) << i;
    return out;
}

uint64_t sims_unpermute_naive(const uint8_t perm[64], uint64_t y)
{
    uint64_t out = 0;
    for (unsigned i = 0; i < 64; i++)
        out |= ((y >> i) & 1) << perm[i];
    return out;
}

/* ---- table handles ------------------------------------------------------------ */

static int table_finish(simstore_table *t, table_reader *r, const char *path)
{
    t->path = strdup(path);
    if (!t->path)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    const table_info *in = sims_table_reader_info(r);
    memcpy(t->perm, in->params.perm, 64);
    /* A lone file may carry any permutation of 0..63; designs' compile into
     * a few moves, others fall back to a bit loop. */
    t->compiled = sims_permuter_init(&t->permuter, t->perm) == SIMSTORE_OK;
    sims_error_clear();
    for (uint64_t b = 0; b < in->block_count; b++) {
        uint64_t c = sims_table_reader_block_count(r, b);
        if (c > t->max_block_count)
            t->max_block_count = c;
    }
    return SIMSTORE_OK;
}

int simstore_table_open(const char *path, simstore_table **out)
{
    if (!out)
        return sims_fail(SIMSTORE_EINVAL, "simstore_table_open: out is NULL");
    *out = NULL;
    if (!path)
        return sims_fail(SIMSTORE_EINVAL, "simstore_table_open: path is NULL");
    simstore_table *t = calloc(1, sizeof *t);
    if (!t)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    int rc = sims_table_reader_open(path, 0, &t->reader);
    /* An inspected table's index is checked whole at open, whatever its
     * version (version 3 would check it piece by piece on use). */
    if (rc == SIMSTORE_OK)
        rc = sims_table_reader_check_index(t->reader);
    if (rc == SIMSTORE_OK)
        rc = table_finish(t, t->reader, path);
    if (rc) {
        simstore_table_close(t);
        return rc;
    }
    *out = t;
    return SIMSTORE_OK;
}

/* The segment at a position: the document segments, then the paragraph
 * segments; NULL (SIMSTORE_ENOTFOUND in *rc, message set) past them. */
static sims_segment *segment_at(const simstore *s, const sims_snapshot *snap, uint64_t segment,
                                int *para, int *rc)
{
    *para = segment >= snap->segment_count;
    if (segment < snap->segment_count)
        return snap->segments[segment];
    if (segment - snap->segment_count < snap->para_segment_count)
        return snap->para_segments[segment - snap->segment_count];
    *rc = sims_fail(SIMSTORE_ENOTFOUND, "%s: no segment %" PRIu64 " (the store has %u)", s->path,
                    segment, snap->segment_count + snap->para_segment_count);
    return NULL;
}

int simstore_get_segment(simstore *s, uint64_t segment, simstore_segment_info *out)
{
    if (!s || !out)
        return sims_fail(SIMSTORE_EINVAL, "simstore_get_segment: NULL argument");
    memset(out, 0, sizeof *out);
    sims_snapshot *snap;
    int rc = sims_read_snapshot(s, &snap);
    if (rc)
        return rc;
    const sims_segment *seg = segment_at(s, snap, segment, &out->paragraphs, &rc);
    if (seg) {
        out->id = seg->id;
        out->fingerprints = seg->fp_count;
        out->created_unix = seg->created_unix;
        out->tables = seg->table_count;
        if (seg->docs) {
            docfile_sizes z;
            sims_docfile_sizes_of(seg->docs, &z);
            out->docfile_documents = sims_docfile_count(seg->docs);
            out->docfile_bytes = z.total;
            out->docfile_block_bytes = z.blocks;
            out->docfile_index_bytes = z.block_table + z.fp_dir + z.id_entries + z.id_dir;
        }
    }
    sims_snapshot_release(snap);
    return rc;
}

int simstore_open_segment_table(simstore *s, uint64_t segment, unsigned table, simstore_table **out)
{
    if (!out)
        return sims_fail(SIMSTORE_EINVAL, "simstore_open_segment_table: out is NULL");
    *out = NULL;
    if (!s)
        return sims_fail(SIMSTORE_EINVAL, "simstore_open_segment_table: store is NULL");
    if (table >= s->design->n_tables)
        return sims_fail(SIMSTORE_EINVAL, "table %u: the design has %u tables", table,
                         s->design->n_tables);
    sims_snapshot *snap;
    int rc = sims_read_snapshot(s, &snap);
    if (rc)
        return rc;
    simstore_table *t = NULL;
    int para;
    sims_segment *seg = segment_at(s, snap, segment, &para, &rc);
    if (seg && !(t = calloc(1, sizeof *t))) {
        rc = sims_fail(SIMSTORE_ENOMEM, "out of memory");
    } else if (seg) {
        atomic_fetch_add(&seg->refs, 1);
        t->seg = seg;
        char path[PATH_MAX];
        rc = sims_table_path(path, sizeof path, s->path, seg->id, table);
        if (rc == SIMSTORE_OK)
            rc = table_finish(t, seg->tables[table], path);
        t->reader = seg->tables[table];
    }
    sims_snapshot_release(snap);
    if (rc) {
        simstore_table_close(t);
        return rc;
    }
    *out = t;
    return SIMSTORE_OK;
}

void simstore_table_close(simstore_table *t)
{
    if (!t)
        return;
    if (t->seg)
        sims_segment_release(t->seg);
    else
        sims_table_reader_close(t->reader);
    free(t->path);
    free(t);
}

void simstore_table_get_info(const simstore_table *t, simstore_table_info *out)
{
    const table_info *in = sims_table_reader_info(t->reader);
    memset(out, 0, sizeof *out);
    out->path = t->path;
    out->format_version = in->format_version;
    out->block_bytes = in->params.block_bytes;
    out->prefix_bits = in->params.prefix_bits;
    out->store_tag = in->params.store_tag;
    out->table_index = in->params.table_index;
    out->fingerprints = in->fp_count;
    out->blocks = in->block_count;
    out->max_block_fingerprints = t->max_block_count;
    out->file_bytes = in->file_bytes;
    out->blocks_offset = in->blocks_offset;
    out->index_offset = in->index_offset;
    out->footer_offset = in->file_bytes - in->footer_bytes;
    out->key_ram_bytes = in->key_ram_bytes;
    if (in->fp_count) {
        out->bits_per_fp = 8.0 * (double)in->file_bytes / (double)in->fp_count;
        out->floor_bits_per_fp = 64.0 - log2((double)in->fp_count) + 1.4426950408889634;
    }
    memcpy(out->perm, in->params.perm, 64);
    memcpy(out->code_lengths, in->code_lengths, 64);
    sims_describe_permutation(in->params.perm, in->params.prefix_bits, out->permutation,
                              sizeof out->permutation);
}

int simstore_table_read_block(const simstore_table *t, uint64_t block, simstore_block_info *info,
                              uint64_t *values, size_t cap, size_t *n)
{
    if (n)
        *n = 0;
    const table_reader *r = t->reader;
    const table_info *in = sims_table_reader_info(r);
    if (block >= in->block_count)
        return sims_fail(SIMSTORE_EINVAL, "%s: block %" PRIu64 " out of range (%" PRIu64 " blocks)",
                         t->path, block, in->block_count);
    uint32_t count = sims_table_reader_block_count(r, block);
    if (values && cap < count)
        return sims_fail(SIMSTORE_EINVAL,
                         "%s: block %" PRIu64 " holds %" PRIu32 " values, room for %zu", t->path,
                         block, count, cap);
    /* Checked whatever the reader's flags: inspection never trusts blocks. */
    uint64_t used_bits = 0;
    int rc = sims_table_reader_block_bits(r, block, &used_bits);
    if (rc)
        return rc;
    uint64_t first = 0;
    if (values || info) {
        uint64_t *buf = values;
        uint64_t one[1];
        size_t got = 0;
        if (!buf) {
            /* Only the first value is wanted: a cursor stops early. */
            table_cursor c;
            uint64_t lo = block ? sims_table_reader_key(r, block - 1) + 1 : 0;
            sims_table_cursor_init(&c, r, lo, sims_table_reader_key(r, block));
            rc = sims_table_cursor_next(&c, one, 1, &got);
            if (rc)
                return rc;
            first = got ? one[0] : 0;
        } else {
            rc = sims_table_reader_block(r, block, buf, cap, &got);
            if (rc)
                return rc;
            first = got ? buf[0] : 0;
            if (n)
                *n = got;
        }
    }
    if (info) {
        info->block = block;
        info->offset = in->blocks_offset + block * in->params.block_bytes;
        info->fingerprints = count;
        info->checksum = sims_table_reader_block_checksum(r, block);
        info->first = first;
        info->key = sims_table_reader_key(r, block);
        info->used_bits = used_bits;
    }
    return SIMSTORE_OK;
}

uint64_t simstore_table_find_block(const simstore_table *t, uint64_t permuted)
{
    return sims_table_reader_find_block(t->reader, permuted);
}

uint64_t simstore_table_permute(const simstore_table *t, uint64_t fp)
{
    return t->compiled ? sims_permute(&t->permuter, fp) : sims_permute_naive(t->perm, fp);
}

uint64_t simstore_table_unpermute(const simstore_table *t, uint64_t permuted)
{
    return t->compiled ? sims_unpermute(&t->permuter, permuted)
                       : sims_unpermute_naive(t->perm, permuted);
}

int simstore_table_histogram(const simstore_table *t, uint64_t max_blocks, simstore_histogram *out)
{
    memset(out, 0, sizeof *out);
    const table_reader *r = t->reader;
    uint64_t nb = sims_table_reader_info(r)->block_count;
    uint64_t want = max_blocks == 0 || max_blocks >= nb ? nb : max_blocks;
    out->exact = want == nb;
    uint64_t *buf = malloc((t->max_block_count ? t->max_block_count : 1) * sizeof *buf);
    if (!buf)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a block");
    int rc = SIMSTORE_OK;
    for (uint64_t i = 0; i < want && rc == SIMSTORE_OK; i++) {
        /* Evenly spread: block floor(i * nb / want) (128-bit safe: nb and
         * want are far below 2^32 blocks in practice, but do not rely on it). */
        uint64_t b = out->exact ? i : (uint64_t)((double)i * (double)nb / (double)want);
        if (b >= nb)
            b = nb - 1;
        uint64_t used = 0;
        size_t n = 0;
        rc = sims_table_reader_block_bits(r, b, &used);
        if (rc == SIMSTORE_OK)
            rc = sims_table_reader_block(r, b, buf, t->max_block_count, &n);
        if (rc)
            break;
        uint64_t prev = b ? sims_table_reader_key(r, b - 1) : (n ? buf[0] : 0);
        for (size_t j = b ? 0 : 1; j < n; j++) {
            uint64_t d = buf[j] - prev;
            prev = buf[j];
            out->count[63 - __builtin_clzll(d)]++;
            out->differences++;
        }
        out->blocks_decoded++;
        out->payload_bits += used;
    }
    free(buf);
    return rc;
}

int simstore_describe_table(const simstore *s, unsigned table, char *buf, size_t size)
{
    if (!s || table >= s->design->n_tables)
        return sims_fail(SIMSTORE_EINVAL, "table %u: the design has %u tables", table,
                         s ? s->design->n_tables : 0);
    return sims_design_describe_table(s->design, table, buf, size);
}
