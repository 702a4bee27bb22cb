/* cmd_pairs.c: `simstore pairs`: every pair of fingerprint lines within
 * distance K, by brute force over all pairs (exact; quadratic, for sets that
 * fit in memory, until a store query serves big ones). */
#include "cli.h"
#include "commands.h"
#include "input.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const CMD = "pairs";

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: simstore pairs [--k K] [FILE...]\n"
            "\n"
            "Read fingerprint lines HEX16<TAB>ID (as `simstore fingerprint` prints them)\n"
            "from the FILEs or standard input, and print every pair of them within\n"
            "Hamming distance K as ID_A<TAB>ID_B<TAB>DISTANCE, ID_A before ID_B in byte\n"
            "order, lines sorted by distance, then ID_A, then ID_B. Compares all pairs.\n"
            "\n"
            "      --k K        largest distance reported, 0..64 (default 3)\n"
            "  -h, --help       show this help\n"
            "\n"
            "A malformed line is reported as FILE:LINE: message and skipped.\n"
            "Exit status: 0 success, 1 some input failed, 2 usage error.\n");
}

typedef struct entry {
    uint64_t fp;
    size_t id_offset; /* into the id arena */
    size_t id_len;
} entry;

typedef struct pair {
    uint32_t a, b; /* entries, a's id <= b's id */
    unsigned distance;
} pair;

typedef struct store {
    entry *entries;
    size_t count, cap;
    char *ids;
    size_t ids_len, ids_cap;
} store;

static const char *sort_ids; /* qsort has no context argument */
static const entry *sort_entries;

static int id_cmp(const entry *x, const entry *y)
{
    size_t n = x->id_len < y->id_len ? x->id_len : y->id_len;
    int c = memcmp(sort_ids + x->id_offset, sort_ids + y->id_offset, n);
    if (c)
        return c;
    return (x->id_len > y->id_len) - (x->id_len < y->id_len);
}

static int pair_cmp(const void *pa, const void *pb)
{
    const pair *p = pa, *q = pb;
    if (p->distance != q->distance)
        return p->distance < q->distance ? -1 : 1;
    int c = id_cmp(&sort_entries[p->a], &sort_entries[q->a]);
    if (c)
        return c;
    c = id_cmp(&sort_entries[p->b], &sort_entries[q->b]);
    if (c)
        return c;
    /* Equal ids (the same id given twice): input order. */
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    return (p->b > q->b) - (p->b < q->b);
}

static int add_entry(store *s, const input_record *rec)
{
    if (s->count == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        entry *grown = realloc(s->entries, cap * sizeof *grown);
        if (!grown)
            return -1;
        s->entries = grown;
        s->cap = cap;
    }
    if (rec->id_len > s->ids_cap - s->ids_len) {
        size_t cap = s->ids_cap ? s->ids_cap : 65536;
        while (cap - s->ids_len < rec->id_len)
            cap *= 2;
        char *grown = realloc(s->ids, cap);
        if (!grown)
            return -1;
        s->ids = grown;
        s->ids_cap = cap;
    }
    memcpy(s->ids + s->ids_len, rec->id, rec->id_len);
    s->entries[s->count].fp = rec->fingerprint;
    s->entries[s->count].id_offset = s->ids_len;
    s->entries[s->count].id_len = rec->id_len;
    s->ids_len += rec->id_len;
    s->count++;
    return 0;
}

static int read_input(store *s, const char *path, int *failed)
{
    input_reader *r;
    if (input_open(&r, INPUT_FP_ID, path) != 0) {
        cli_error(CMD, "%s: %s", path, strerror(errno));
        *failed = 1;
        return 0;
    }
    input_record rec;
    int got, rc = 0;
    while ((got = input_next(r, &rec)) != 0) {
        if (got == 1) {
            if (s->count >= UINT32_MAX || add_entry(s, &rec) != 0) {
                cli_error(CMD, "%s:%llu: out of memory", rec.file, rec.line);
                rc = -1;
                break;
            }
            continue;
        }
        cli_error(CMD, "%s", input_error(r));
        *failed = 1;
        if (got == -2)
            break;
    }
    input_close(r);
    return rc;
}

int cmd_pairs(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"k", required_argument, NULL, 'k'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    unsigned long long k = 3;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'k':
            if (cli_parse_uint(optarg, 0, 64, &k) != 0)
                return cli_usage_error(CMD, "--k: '%s' is not a distance in 0..64", optarg);
            break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        default: return cli_bad_option(CMD, c, argv, optind);
        }
    }

    store s;
    memset(&s, 0, sizeof s);
    int failed = 0, fatal = 0;
    if (optind >= argc)
        fatal = read_input(&s, "-", &failed);
    for (int i = optind; i < argc && !fatal; i++)
        fatal = read_input(&s, argv[i], &failed);

    pair *pairs = NULL;
    size_t npairs = 0, cap = 0;
    for (size_t i = 0; i < s.count && !fatal; i++) {
        for (size_t j = i + 1; j < s.count; j++) {
            unsigned d = simstore_distance(s.entries[i].fp, s.entries[j].fp);
            if (d > k)
                continue;
            if (npairs == cap) {
                cap = cap ? cap * 2 : 1024;
                pair *grown = realloc(pairs, cap * sizeof *grown);
                if (!grown) {
                    cli_error(CMD, "out of memory after %zu pairs", npairs);
                    fatal = 1;
                    break;
                }
                pairs = grown;
            }
            pair *p = &pairs[npairs++];
            p->a = (uint32_t)i;
            p->b = (uint32_t)j;
            p->distance = d;
        }
    }
    sort_ids = s.ids;
    sort_entries = s.entries;
    for (size_t i = 0; i < npairs; i++) {
        pair *p = &pairs[i];
        if (id_cmp(&s.entries[p->b], &s.entries[p->a]) < 0) {
            uint32_t t = p->a;
            p->a = p->b;
            p->b = t;
        }
    }
    if (!fatal) {
        qsort(pairs, npairs, sizeof *pairs, pair_cmp);
        for (size_t i = 0; i < npairs; i++) {
            const entry *a = &s.entries[pairs[i].a], *b = &s.entries[pairs[i].b];
            fwrite(s.ids + a->id_offset, 1, a->id_len, stdout);
            putchar('\t');
            fwrite(s.ids + b->id_offset, 1, b->id_len, stdout);
            printf("\t%u\n", pairs[i].distance);
        }
    }
    free(pairs);
    free(s.entries);
    free(s.ids);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error(CMD, "writing standard output: %s", strerror(errno ? errno : EIO));
        return CLI_EXIT_FAIL;
    }
    return (failed || fatal) ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
