/* records.c: the records of `simstore-mpi build` on their way: each line of
 * this rank's share parsed, fingerprinted (with its paragraphs) and
 * buffered for its shard's rank, sent in all-to-all rounds
 * (exchange_round), spooled by the receiving rank in an unlinked scratch
 * file, and added to its shard's builder in input order once every part's
 * record count is known, each at its position in the whole input. */
#include "mpi_internal.h"

#include "cli.h"

#include <mpi.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One parsed record, serialized for its shard's rank: flags (bit 0 integer
 * id, bit 1 sketch, bit 2 paragraphs), fp, source, local index (u64: the
 * record's place among the records of the sending rank's share), id length
 * (u32), meta length (u32), id, meta, sketch, then the paragraphs' count
 * (u32) and fingerprints (u64 each) of st->paras. */
static int send_record(build_state *st, const input_record *rec, uint64_t fp, const uint8_t *sketch,
                       uint64_t source, size_t nparas)
{
    unsigned dest = st->fp_only ? simstore_shard_of_fp(fp, (unsigned)nranks)
                                : simstore_shard_of(rec->id, rec->id_len, (unsigned)nranks);
    buf *b = &st->out[dest];
    size_t id_len = st->fp_only ? 0 : rec->id_len;
    size_t meta_len = rec->meta && !st->fp_only ? strlen(rec->meta) : 0;
    uint8_t flags = (uint8_t)((rec->id_is_integer ? 1 : 0) | (sketch ? 2 : 0) | (nparas ? 4 : 0));
    size_t before = b->len;
    if (buf_put(b, &flags, 1) || buf_u64(b, fp) || buf_u64(b, source) || buf_u64(b, st->sent) ||
        buf_u32(b, (uint32_t)id_len) || buf_u32(b, (uint32_t)meta_len) ||
        buf_put(b, rec->id, id_len) || buf_put(b, rec->meta, meta_len) ||
        (sketch && buf_put(b, sketch, st->sketch_bytes)) ||
        (nparas && buf_u32(b, (uint32_t)nparas)))
        return -1;
    for (size_t i = 0; i < nparas; i++)
        if (buf_u64(b, st->paras[i]))
            return -1;
    st->buffered += b->len - before;
    st->sent++;
    return 0;
}

/* Room for n paragraph fingerprints in st->paras. Returns 0, or -1 (no
 * memory). */
static int paras_reserve(build_state *st, size_t n)
{
    if (n <= st->paras_cap)
        return 0;
    uint64_t *g = realloc(st->paras, n * sizeof *g);
    if (!g)
        return -1;
    st->paras = g;
    st->paras_cap = n;
    return 0;
}

/* Add the record at *pp (advanced past it) to this rank's builder, at its
 * position in the whole input: it is the sender's record number `local`
 * (its place among the records the sender read), of a part whose records
 * the sender numbered from local_first and the whole input from
 * global_first. Returns 0, or -1 (said why). */
static int add_record(build_state *st, const char **pp, uint64_t local_first, uint64_t global_first)
{
    const char *p = *pp;
    uint8_t flags = (uint8_t)*p++;
    simstore_doc d = {0};
    d.flags = (flags & 1) ? SIMSTORE_DOC_INTEGER_ID : 0;
    d.fp = get_u64(&p);
    d.source = get_u64(&p);
    uint64_t position = global_first + (get_u64(&p) - local_first);
    d.id_len = get_u32(&p);
    d.meta_len = get_u32(&p);
    d.id = p;
    p += d.id_len;
    d.meta = d.meta_len ? p : NULL;
    p += d.meta_len;
    if (flags & 2) {
        d.sketch = (const uint8_t *)p;
        p += st->sketch_bytes;
    }
    size_t nparas = (flags & 4) ? get_u32(&p) : 0;
    if (paras_reserve(st, nparas)) {
        say("out of memory");
        return -1;
    }
    for (size_t i = 0; i < nparas; i++)
        st->paras[i] = get_u64(&p);
    d.paragraphs = st->paras;
    d.n_paragraphs = nparas;
    *pp = p;
    int rc;
    if (st->fp_only)
        rc = simstore_builder_add_fp(st->b, d.fp);
    else if ((rc = simstore_builder_set_position(st->b, position)) == 0)
        rc = simstore_builder_add(st->b, &d);
    if (rc) {
        say("adding a document: %s: %s", simstore_strerror(rc), simstore_last_error());
        return -1;
    }
    st->records++;
    return 0;
}

/* Write (writing) or read back n bytes at `offset` of the spool. Returns 0,
 * or -1 (said why). */
static int spool_io(const build_state *st, char *p, size_t n, uint64_t offset, int writing)
{
    for (size_t done = 0; done < n;) {
        ssize_t got = writing ? pwrite(st->spool_fd, p + done, n - done, (off_t)(offset + done))
                              : pread(st->spool_fd, p + done, n - done, (off_t)(offset + done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            say("%s the records received: %s", writing ? "spooling" : "reading back",
                got < 0 ? strerror(errno) : "short transfer");
            return -1;
        }
        done += (size_t)got;
    }
    return 0;
}

/* Keep one round's received bytes (recv[0..total), rank i's at offset
 * at[i], len[i] bytes) in the spool. Returns 0, or -1 (said why). */
static int spool_received(build_state *st, char *recv, size_t total, const size_t *at,
                          const size_t *len)
{
    if (spool_io(st, recv, total, st->spool_len, 1))
        return -1;
    for (int i = 0; i < nranks; i++) {
        spool_list *l = &st->from[i];
        if (len[i] == 0)
            continue;
        if (l->n == l->cap) {
            size_t cap = l->cap ? 2 * l->cap : 16;
            spooled *g = realloc(l->v, cap * sizeof *g);
            if (!g) {
                say("out of memory");
                return -1;
            }
            l->v = g;
            l->cap = cap;
        }
        l->v[l->n++] = (spooled){st->spool_len + (uint64_t)at[i], (uint64_t)len[i]};
    }
    st->spool_len += total;
    return 0;
}

/* The spool of received records: an unlinked file in OUT, which holds the
 * shards being built. Returns 0, or -1 (said why). */
int spool_open(build_state *st, const char *out)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/.rank-%d.spool-XXXXXX", out, rank);
    st->spool_fd = mkstemp(path);
    if (st->spool_fd < 0) {
        say("%s: %s", path, strerror(errno));
        return -1;
    }
    unlink(path);
    st->from = calloc((size_t)nranks, sizeof *st->from);
    if (!st->from) {
        say("out of memory");
        return -1;
    }
    return 0;
}

void spool_close(build_state *st)
{
    if (st->spool_fd >= 0)
        close(st->spool_fd);
    st->spool_fd = -1;
    for (int i = 0; st->from && i < nranks; i++)
        free(st->from[i].v);
    free(st->from);
    st->from = NULL;
}

/* One all-to-all round: every rank's buffered records to their ranks.
 * Returns 0, or -1 (this rank failed; the round still completed). */
int exchange_records(build_state *st)
{
    const char **data = must(calloc((size_t)nranks, sizeof *data));
    size_t *len = must(calloc((size_t)nranks * 3, sizeof *len));
    size_t *at = len + nranks, *got = len + 2 * nranks, total;
    for (int i = 0; i < nranks; i++) {
        data[i] = st->out[i].data;
        len[i] = st->out[i].len;
    }
    char *recv = exchange_round(data, len, at, got, &total);
    for (int i = 0; i < nranks; i++)
        st->out[i].len = 0;
    st->buffered = 0;
    int failed = st->b ? spool_received(st, recv, total, at, got) : 0;
    free(recv);
    free(len);
    free(data);
    return failed;
}

/* The first pass of --boilerplate auto: a JSON Lines document's line keys
 * counted (one giving "fp" has no text: a document of no lines, as
 * `simstore build` counts it). Returns 0, or -1 (said why). */
static int count_line_keys(build_state *st, const input_record *rec)
{
    const uint64_t *keys = NULL;
    size_t n = 0;
    int rc = rec->has_fp
                 ? 0
                 : simstore_fingerprinter_line_keys(st->fpr, rec->text, rec->text_len, &keys, &n);
    if (rc == 0)
        rc = simstore_boilerplate_counter_add_keys(st->counter, keys, n);
    if (rc) {
        say("counting boilerplate: %s", simstore_last_error());
        return -1;
    }
    return 0;
}

/* The text's paragraph fingerprints (as `simstore build --paragraphs`
 * indexes them) into st->paras, *n of them. Returns 0 or an error code. */
static int text_paragraphs(build_state *st, const input_record *rec, size_t *n)
{
    int rc = simstore_paragraph_fingerprints(st->fpr, rec->text, rec->text_len, st->para_min_words,
                                             st->paras, st->paras_cap, n);
    if (rc == 0 && *n > st->paras_cap) {
        if (paras_reserve(st, *n))
            return SIMSTORE_ENOMEM;
        rc = simstore_paragraph_fingerprints(st->fpr, rec->text, rec->text_len, st->para_min_words,
                                             st->paras, st->paras_cap, n);
    }
    return rc;
}

/* One line: parsed, fingerprinted, sent to its shard. Returns 0, or -1
 * when this rank cannot go on. Bad records are reported and counted. */
static int take_line(build_state *st, reader *rd, const input_part *ip, const char *text,
                     size_t len)
{
    uint8_t sketch[SIMSTORE_SKETCH_MAX_BYTES];
    input_record rec;
    if (ip->format == INPUT_U64_VALUES) {
        /* As `simstore build --fingerprint-only` reads .u64 values. */
        memset(&rec, 0, sizeof rec);
        for (int i = 7; i >= 0; i--)
            rec.fingerprint = rec.fingerprint << 8 | (uint8_t)text[i];
        (void)len;
        return send_record(st, &rec, rec.fingerprint, NULL, 0, 0) ? (say("out of memory"), -1) : 0;
    }
    if (len && text[len - 1] == '\r')
        len--;
    if (input_trim_line(&text, &len, rd->line == 1))
        return 0;
    if (ip->format == INPUT_HEX_LINES) {
        /* As `simstore build --fingerprint-only` reads .hex lines. */
        char hex[17], shown[41];
        memset(&rec, 0, sizeof rec);
        if (len == 16) {
            memcpy(hex, text, 16);
            hex[16] = '\0';
            if (cli_parse_hex64(hex, &rec.fingerprint) == 0)
                return send_record(st, &rec, rec.fingerprint, NULL, 0, 0)
                           ? (say("out of memory"), -1)
                           : 0;
        }
        size_t n = len < 40 ? len : 40;
        for (size_t i = 0; i < n; i++)
            shown[i] = (unsigned char)text[i] < 0x20 || text[i] == 0x7F ? '?' : text[i];
        shown[n] = '\0';
        say("%s:%llu: expected 16 hex digits, got '%s'", ip->name, rd->line, shown);
        st->bad++;
        return 0;
    }
    int got = input_parse_line(rd->p, text, len, ip->name, rd->line, &rec);
    if (got == -2) {
        say("out of memory");
        return -1;
    }
    if (st->counter) /* the first pass: bad records are the second's to say */
        return got == -1 ? 0 : count_line_keys(st, &rec);
    if (got == -1) {
        say("%s:%llu: %s", ip->name, rd->line, input_parser_error(rd->p));
        st->bad++;
        return 0;
    }
    uint64_t fp = rec.fingerprint;
    size_t nparas = 0;
    const uint8_t *sk = NULL;
    int rc = 0;
    if (ip->format == INPUT_JSONL && !rec.has_fp) {
        unsigned fl = 0;
        if (st->sketch != SIMSTORE_SKETCH_NONE) {
            rc = simstore_fingerprint_sketch(st->fpr, rec.text, rec.text_len, &fp, sketch, &fl);
            sk = sketch;
        } else {
            rc = simstore_fingerprint_text(st->fpr, rec.text, rec.text_len, &fp, &fl);
        }
        if (rc == 0 && st->para_min_words)
            rc = text_paragraphs(st, &rec, &nparas);
        if (rc == 0 && (fl & SIMSTORE_FP_ONLY_BOILERPLATE)) {
            char esc[CLI_ESCAPED_ID_BYTES];
            st->only_boilerplate++;
            say("warning: %s:%llu: document id '%s' is only boilerplate: fingerprinted whole",
                ip->name, rd->line, cli_escape(rec.id, rec.id_len, esc, sizeof esc));
        }
    } else if (st->sketch != SIMSTORE_SKETCH_NONE) {
        if (!rec.has_fp || !rec.sketch || rec.sketch_len != st->sketch_bytes) {
            say("%s:%llu: the store keeps sketches, and this record has none (give --sketch "
                "none)",
                ip->name, rd->line);
            st->bad++;
            return 0;
        }
        sk = rec.sketch;
    }
    if (rc) {
        say("%s:%llu: %s", ip->name, rd->line, simstore_last_error());
        st->bad++;
        return 0;
    }
    if (send_record(st, &rec, fp, sk, ((uint64_t)ip->index << 40) | rd->line, nparas)) {
        say("out of memory");
        return -1;
    }
    return 0;
}

/* Read records until chunk_bytes are buffered or this rank's share ends
 * (rd->done), counting each part's records sent. Returns 0, or -1 when this
 * rank cannot go on. */
int fill(build_state *st, reader *rd, uint64_t chunk_bytes)
{
    while (!rd->done && st->buffered < chunk_bytes) {
        if (rd->cur >= rd->nparts) {
            rd->done = 1;
            break;
        }
        if (!rd->open && reader_open_part(rd))
            return -1;
        input_part *ip = &rd->parts[rd->cur];
        const char *text;
        size_t len;
        int got = reader_next(rd, ip, &text, &len);
        if (got < 0)
            return -1;
        if (got == 0) {
            reader_close_part(rd);
            rd->cur++;
            continue;
        }
        uint64_t before = st->sent;
        if (take_line(st, rd, ip, text, len))
            return -1;
        ip->records += st->sent - before;
        rd->line++;
    }
    return 0;
}

/* One part of some rank's share, as every rank learns it: its place in the
 * input (index, lo), the rank that read it and its records, numbered from
 * local_first among that rank's and from global_first in the whole input. */
typedef struct part_count {
    uint64_t index, lo, records, rank, local_first, global_first;
} part_count;

static int cmp_part(const void *x, const void *y)
{
    const part_count *a = x, *b = y;
    if (a->index != b->index)
        return (a->index > b->index) - (a->index < b->index);
    return (a->lo > b->lo) - (a->lo < b->lo);
}

/* Where this rank stands in the chunks one rank sent it. */
typedef struct cursor {
    size_t chunk;
    char *data;
    size_t len, at;
} cursor;

/* The next record from rank `from` (cur->data + cur->at), its number among
 * that rank's in *local. Returns 1, 0 when it sent no more, -1 (said why). */
static int cursor_peek(build_state *st, int from, cursor *cur, uint64_t *local)
{
    while (cur->at >= cur->len) {
        free(cur->data);
        cur->data = NULL;
        cur->len = cur->at = 0;
        if (cur->chunk >= st->from[from].n)
            return 0;
        const spooled *sp = &st->from[from].v[cur->chunk++];
        if (!(cur->data = malloc(sp->len ? (size_t)sp->len : 1))) {
            say("out of memory");
            return -1;
        }
        cur->len = (size_t)sp->len;
        if (spool_io(st, cur->data, cur->len, sp->offset, 0))
            return -1;
    }
    const char *p = cur->data + cur->at + 17; /* flags, fp, source */
    *local = get_u64(&p);
    return 1;
}

/* Every rank has read its share: every part's records counted in input
 * order (the parts of split files in rank order, a whole file where it
 * is), so each record's position in the whole input is known; then the
 * spooled records are added in input order, part by part (each rank read
 * its parts in input order, so a part's records are the next ones from
 * its rank). Collective. Returns 0, or -1 (said why). */
int add_spooled(build_state *st, const input_part *parts, int nparts)
{
    int failed = 0;
    int *counts = malloc((size_t)nranks * 2 * sizeof *counts);
    if (!counts)
        MPI_Abort(MPI_COMM_WORLD, 1);
    int *displs = counts + nranks, mine = 3 * nparts;
    MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD);
    size_t all = 0;
    for (int r = 0; r < nranks; r++) {
        displs[r] = (int)all;
        all += (size_t)counts[r];
    }
    uint64_t *mine_v = malloc((size_t)(mine ? mine : 1) * sizeof *mine_v);
    uint64_t *all_v = malloc((all ? all : 1) * sizeof *all_v);
    part_count *pc = malloc((all / 3 ? all / 3 : 1) * sizeof *pc);
    cursor *cur = calloc((size_t)nranks, sizeof *cur);
    if (!mine_v || !all_v || !pc || !cur)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < nparts; i++) {
        mine_v[3 * i] = (uint64_t)parts[i].index;
        mine_v[3 * i + 1] = parts[i].lo;
        mine_v[3 * i + 2] = parts[i].records;
    }
    MPI_Allgatherv(mine_v, mine, MPI_UINT64_T, all_v, counts, displs, MPI_UINT64_T, MPI_COMM_WORLD);
    size_t n = 0;
    for (int r = 0; r < nranks; r++) {
        uint64_t local = 0;
        for (int i = displs[r]; i < displs[r] + counts[r]; i += 3, n++) {
            pc[n] = (part_count){all_v[i], all_v[i + 1], all_v[i + 2], (uint64_t)r, local, 0};
            local += all_v[i + 2];
        }
    }
    sort_items(pc, n, sizeof *pc, cmp_part);
    uint64_t global = 0;
    for (size_t i = 0; i < n; i++) {
        pc[i].global_first = global;
        global += pc[i].records;
    }
    for (size_t i = 0; i < n && !failed; i++) {
        int from = (int)pc[i].rank;
        uint64_t local;
        int got;
        while ((got = cursor_peek(st, from, &cur[from], &local)) == 1 &&
               local < pc[i].local_first + pc[i].records) {
            const char *p = cur[from].data + cur[from].at;
            if (add_record(st, &p, pc[i].local_first, pc[i].global_first)) {
                failed = 1;
                break;
            }
            cur[from].at = (size_t)(p - cur[from].data);
        }
        if (got < 0)
            failed = 1;
    }
    for (int r = 0; r < nranks; r++)
        free(cur[r].data);
    free(cur);
    free(pc);
    free(all_v);
    free(mine_v);
    free(counts);
    return failed ? -1 : 0;
}
