/* cmd_distance.c: `simstore distance HEX HEX`: the Hamming distance between
 * two fingerprints. */
#include "cli.h"
#include "commands.h"

#include <getopt.h>
#include <stdio.h>

static const char *const CMD = "distance";

static void usage(FILE *out)
{
    fprintf(out, "Usage: simstore distance HEX HEX\n"
                 "\n"
                 "Print the Hamming distance (0..64) between two fingerprints, each given\n"
                 "as 16 hexadecimal digits (either case, no 0x) as `simstore fingerprint`\n"
                 "prints them.\n"
                 "\n"
                 "  -h, --help   show this help\n"
                 "\n"
                 "Exit status: 0 success, 2 usage error (including a malformed fingerprint).\n");
}

int cmd_distance(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        return cli_bad_option(CMD, c, argv, optind);
    }
    if (argc - optind != 2)
        return cli_usage_error(CMD, "expected two fingerprints, got %d argument%s", argc - optind,
                               argc - optind == 1 ? "" : "s");
    uint64_t fp[2];
    for (int i = 0; i < 2; i++)
        if (cli_parse_hex64(argv[optind + i], &fp[i]) != 0)
            return cli_usage_error(CMD, "'%s' is not a fingerprint (16 hex digits expected)",
                                   argv[optind + i]);
    printf("%u\n", simstore_distance(fp[0], fp[1]));
    return CLI_EXIT_OK;
}
