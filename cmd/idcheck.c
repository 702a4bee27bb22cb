/* idcheck.c: repeated ids among records not kept in memory (idcheck.h): hash
 * partitions on disk, each read back and sorted on its own at the end. */
#include "idcheck.h"

#include "cli.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* 256 partitions: a partition holds about 1/256 of the noted ids (at 10^9
 * dropped records of 30-byte ids, about 180 MiB while it is sorted). */
#define PARTITIONS 256
#define ID_MAX 65535u

typedef struct entry {
    const char *id;
    uint32_t len;
    uint32_t file;
    unsigned long long line;
} entry;

typedef struct report_slot {
    uint32_t file, first_file;
    unsigned long long line, first_line;
    int of_kept;
    size_t len;
    char *id;
} report_slot;

struct idcheck {
    FILE *part[PARTITIONS];
    char **files;
    size_t nfiles, files_cap;
    unsigned long long noted;
};

int idcheck_new(idcheck **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? 0 : -1;
}

static FILE *open_partition(void)
{
    const char *dir = cli_scratch_dir();
    char path[4096];
    if (snprintf(path, sizeof path, "%s/simstore-ids-XXXXXX", dir) >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    int fd = mkstemp(path);
    if (fd < 0)
        return NULL;
    unlink(path); /* gone with the process, whatever happens */
    FILE *f = fdopen(fd, "w+b");
    if (!f)
        close(fd);
    return f;
}

static uint64_t id_hash(const char *id, size_t len)
{
    uint64_t h = UINT64_C(0x84222325cbf29ce4);
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)id[i]) * UINT64_C(0x100000001b3);
    return h ^ (h >> 31);
}

/* Files by name (copied: a reader's name buffer may not outlive it). */
static int file_number(idcheck *c, const char *file, uint32_t *out)
{
    for (size_t i = c->nfiles; i-- > 0;)
        if (strcmp(c->files[i], file) == 0) {
            *out = (uint32_t)i;
            return 0;
        }
    if (cli_grow((void **)&c->files, &c->files_cap, c->nfiles + 1, sizeof *c->files, 16))
        return -1;
    if (!(c->files[c->nfiles] = strdup(file)))
        return -1;
    *out = (uint32_t)c->nfiles++;
    return 0;
}

int idcheck_add(idcheck *c, const char *id, size_t len, const char *file, unsigned long long line)
{
    if (len > ID_MAX) {
        errno = EINVAL;
        return -1;
    }
    uint32_t fno;
    if (file_number(c, file, &fno))
        return -1;
    size_t p = (size_t)(id_hash(id, len) % PARTITIONS);
    if (!c->part[p] && !(c->part[p] = open_partition()))
        return -1;
    uint8_t head[14];
    memcpy(head, &fno, 4);
    memcpy(head + 4, &line, 8);
    uint16_t l16 = (uint16_t)len;
    memcpy(head + 12, &l16, 2);
    if (fwrite(head, 1, sizeof head, c->part[p]) != sizeof head ||
        fwrite(id, 1, len, c->part[p]) != len)
        return -1;
    c->noted++;
    return 0;
}

static int by_id_then_place(const void *x, const void *y)
{
    const entry *a = x, *b = y;
    size_t n = a->len < b->len ? a->len : b->len;
    int d = memcmp(a->id, b->id, n);
    if (d)
        return d;
    if (a->len != b->len)
        return a->len < b->len ? -1 : 1;
    if (a->file != b->file)
        return a->file < b->file ? -1 : 1;
    return (a->line > b->line) - (a->line < b->line);
}

static int before(uint32_t fa, unsigned long long la, uint32_t fb, unsigned long long lb)
{
    return fa != fb ? fa < fb : la < lb;
}

/* Keep the first max reports in input order (a small sorted array). */
static int offer(report_slot *slots, size_t *n, size_t max, const entry *e, const entry *first)
{
    if (max == 0)
        return 0;
    if (*n == max && !before(e->file, e->line, slots[max - 1].file, slots[max - 1].line))
        return 0;
    size_t at = *n < max ? (*n)++ : max - 1;
    free(slots[at].id);
    while (at > 0 && before(e->file, e->line, slots[at - 1].file, slots[at - 1].line)) {
        slots[at] = slots[at - 1];
        at--;
    }
    report_slot *s = &slots[at];
    s->id = malloc(e->len ? e->len : 1);
    if (!s->id)
        return -1;
    memcpy(s->id, e->id, e->len);
    s->len = e->len;
    s->file = e->file;
    s->line = e->line;
    s->of_kept = first == NULL;
    s->first_file = first ? first->file : 0;
    s->first_line = first ? first->line : 0;
    return 0;
}

static int check_partition(FILE *f, idcheck_kept_fn kept, void *kept_ctx, report_slot *slots,
                           size_t *nslots, size_t max, unsigned long long *repeats)
{
    if (fflush(f) != 0 || fseek(f, 0, SEEK_END) != 0)
        return -1;
    long size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0)
        return -1;
    char *buf = malloc(size ? (size_t)size : 1);
    if (!buf)
        return -1;
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        free(buf);
        errno = EIO;
        return -1;
    }
    size_t count = 0;
    for (size_t at = 0; at + 14 <= (size_t)size; count++) {
        uint16_t l16;
        memcpy(&l16, buf + at + 12, 2);
        at += 14 + l16;
    }
    entry *e = malloc((count ? count : 1) * sizeof *e);
    if (!e) {
        free(buf);
        return -1;
    }
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        uint16_t l16;
        memcpy(&e[i].file, buf + at, 4);
        memcpy(&e[i].line, buf + at + 4, 8);
        memcpy(&l16, buf + at + 12, 2);
        e[i].len = l16;
        e[i].id = buf + at + 14;
        at += 14 + l16;
    }
    qsort(e, count, sizeof *e, by_id_then_place);
    int rc = 0;
    for (size_t lo = 0, hi; lo < count && rc == 0; lo = hi) {
        for (hi = lo + 1;
             hi < count && e[hi].len == e[lo].len && memcmp(e[hi].id, e[lo].id, e[lo].len) == 0;
             hi++)
            ;
        int of_kept = kept(kept_ctx, e[lo].id, e[lo].len);
        for (size_t i = of_kept ? lo : lo + 1; i < hi && rc == 0; i++) {
            (*repeats)++;
            rc = offer(slots, nslots, max, &e[i], of_kept ? NULL : &e[lo]);
        }
    }
    free(e);
    free(buf);
    return rc;
}

int idcheck_finish(idcheck *c, idcheck_kept_fn kept, void *kept_ctx, idcheck_report_fn report,
                   void *report_ctx, size_t max_reports, unsigned long long *repeats)
{
    *repeats = 0;
    report_slot *slots = calloc(max_reports ? max_reports : 1, sizeof *slots);
    if (!slots)
        return -1;
    size_t n = 0;
    int rc = 0;
    for (size_t p = 0; p < PARTITIONS && rc == 0; p++)
        if (c->part[p])
            rc = check_partition(c->part[p], kept, kept_ctx, slots, &n, max_reports, repeats);
    for (size_t i = 0; i < n; i++) {
        if (rc == 0)
            report(report_ctx, c->files[slots[i].file], slots[i].line, slots[i].id, slots[i].len,
                   slots[i].of_kept ? NULL : c->files[slots[i].first_file], slots[i].first_line);
        free(slots[i].id);
    }
    free(slots);
    return rc;
}

void idcheck_free(idcheck *c)
{
    if (!c)
        return;
    for (size_t p = 0; p < PARTITIONS; p++)
        if (c->part[p])
            fclose(c->part[p]);
    for (size_t i = 0; i < c->nfiles; i++)
        free(c->files[i]);
    free(c->files);
    free(c);
}
