/* cmd_dump.c: `simstore dump`: the decoded fingerprints of one table file,
 * permuted (as stored) and original, with block boundaries and keys. */
#include "cli.h"
#include "commands.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const CMD = "dump";

static void usage(FILE *out)
{
    fprintf(out, "Usage: simstore dump FILE [--block N] [--range LO HI]\n"
                 "\n"
                 "Print the fingerprints of one table file (STORE/sSSSSSSSSSS-tTTT.tbl) in\n"
                 "stored order, one per line:\n"
                 "  PERMUTED<TAB>ORIGINAL\n"
                 "both as 16 hex digits: the value as the table stores it, and the\n"
                 "fingerprint it stands for (the permutation comes from the file's header).\n"
                 "Each block starts with a comment line:\n"
                 "  # block B at byte offset O: C fingerprints, first F, key K,\n"
                 "  #   checksum X, U of S bits used\n"
                 "Every block printed is verified (checksum, codes, order, key, padding).\n"
                 "\n"
                 "      --block N        only block N (0-based)\n"
                 "      --range LO HI    only permuted values in [LO, HI] (16 hex digits each);\n"
                 "                       only the blocks that can hold them are read\n"
                 "  -h, --help           show this help\n"
                 "\n"
                 "Exit status: 0 success, 1 failure (a damaged block is reported with its\n"
                 "number and byte offset; blocks before it are printed), 2 usage error.\n");
}

int cmd_dump(int argc, char **argv)
{
    enum { OPT_BLOCK = 1 };
    static const struct option longopts[] = {
        {"block", required_argument, NULL, OPT_BLOCK},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int have_block = 0, have_range = 0, c;
    unsigned long long block = 0;
    uint64_t lo = 0, hi = UINT64_MAX;
    /* --range takes two arguments, which getopt cannot express: take it (and
     * them) out of argv first. */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--range") != 0)
            continue;
        if (i + 2 >= argc)
            return cli_usage_error(CMD, "--range needs two values, LO and HI");
        if (cli_parse_hex64(argv[i + 1], &lo) || cli_parse_hex64(argv[i + 2], &hi))
            return cli_usage_error(CMD, "--range takes two 16-digit hex values, not '%s %s'",
                                   argv[i + 1], argv[i + 2]);
        if (lo > hi)
            return cli_usage_error(CMD, "--range LO HI with LO above HI");
        have_range = 1;
        for (int j = i; j + 3 <= argc; j++)
            argv[j] = argv[j + 3];
        argc -= 3;
        i--;
    }
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_BLOCK:
            if (cli_parse_uint(optarg, 0, UINT64_MAX, &block))
                return cli_usage_error(CMD, "--block takes a block number, not '%s'", optarg);
            have_block = 1;
            break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        default: return cli_bad_option(CMD, c, argv, optind);
        }
    }
    if (optind >= argc)
        return cli_usage_error(CMD, "missing FILE");
    const char *path = argv[optind++];
    if (optind < argc)
        return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    struct stat st;
    char probe[4096];
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        /* A store has data.mdb; any other directory is just that. */
        snprintf(probe, sizeof probe, "%s/data.mdb", path);
        if (access(probe, F_OK) == 0)
            return cli_error(CMD,
                             "%s is a store directory; dump takes one of its table files "
                             "(%s/sSSSSSSSSSS-tTTT.tbl)",
                             path, path);
        return cli_error(CMD,
                         "%s is a directory, not a table file; dump takes one table file "
                         "of a store (STORE/sSSSSSSSSSS-tTTT.tbl)",
                         path);
    }

    simstore_table *t;
    int rc = simstore_table_open(path, &t);
    if (rc)
        return cli_api_error(CMD, rc, "%s", path);
    simstore_table_info in;
    simstore_table_get_info(t, &in);
    uint64_t first = 0, last = in.blocks; /* [first, last) */
    if (have_range) {
        first = simstore_table_find_block(t, lo);
        uint64_t end = simstore_table_find_block(t, hi);
        last = end < in.blocks ? end + 1 : in.blocks;
    }
    if (have_block) {
        if (block >= in.blocks) {
            simstore_table_close(t);
            return cli_error(CMD, "%s: no block %llu (the table has %" PRIu64 " %s)", path, block,
                             in.blocks, CLI_NOUN(in.blocks, "block"));
        }
        if (block > first)
            first = block;
        if (block + 1 < last)
            last = block + 1;
    }
    printf("# table %s: %" PRIu64 " %s in %" PRIu64 " %s of %u bytes; table %u of store %016" PRIx64
           "\n",
           path, in.fingerprints, CLI_NOUN(in.fingerprints, "fingerprint"), in.blocks,
           CLI_NOUN(in.blocks, "block"), in.block_bytes, in.table_index, in.store_tag);
    printf("# permutation: %s\n", in.permutation);
    uint64_t *values =
        malloc((in.max_block_fingerprints ? in.max_block_fingerprints : 1) * sizeof *values);
    if (!values) {
        simstore_table_close(t);
        return cli_error(CMD, "out of memory");
    }
    int status = CLI_EXIT_OK;
    char p[17], o[17];
    for (uint64_t b = first; b < last && !ferror(stdout); b++) {
        simstore_block_info bi;
        size_t n;
        rc = simstore_table_read_block(t, b, &bi, values, (size_t)in.max_block_fingerprints, &n);
        if (rc) {
            status = cli_api_error(CMD, rc, "%s", path);
            break;
        }
        cli_format_hex64(bi.first, p);
        cli_format_hex64(bi.key, o);
        printf("# block %" PRIu64 " at byte offset %" PRIu64 ": %" PRIu32 " %s, first %s, key %s, "
               "checksum %08" PRIx32 ", %" PRIu64 " of %u bits used\n",
               b, bi.offset, bi.fingerprints, CLI_NOUN(bi.fingerprints, "fingerprint"), p, o,
               bi.checksum, bi.used_bits, in.block_bytes * 8);
        for (size_t i = 0; i < n; i++) {
            if (values[i] < lo || values[i] > hi)
                continue;
            cli_format_hex64(values[i], p);
            cli_format_hex64(simstore_table_unpermute(t, values[i]), o);
            printf("%s\t%s\n", p, o);
        }
    }
    free(values);
    simstore_table_close(t);
    if (fflush(stdout) != 0 && status == CLI_EXIT_OK)
        status = cli_error(CMD, "cannot write standard output: %s", strerror(errno));
    return status;
}
