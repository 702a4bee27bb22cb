/* simstore.c: the simstore command: global options and the command table. */
#include "cli.h"
#include "commands.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct command {
    const char *name;
    cli_command_fn run;
    const char *summary;
} command;

static const command commands[] = {
    {"fingerprint", cmd_fingerprint, "simhash fingerprints of documents (text or JSON Lines)"},
    {"distance", cmd_distance, "Hamming distance between two fingerprints"},
    {"pairs", cmd_pairs, "every pair of documents within distance k (a self-join)"},
    {"clusters", cmd_clusters, "near-duplicate clusters, each with the document it keeps"},
    {"build", cmd_build, "create a store from documents or fingerprints"},
    {"query", cmd_query, "documents within distance k of a fingerprint or text"},
    {"stats", cmd_stats, "a store's design, counts and sizes"},
    {"add", cmd_add, "add documents to a store as a new segment"},
    {"delete", cmd_delete, "remove documents from a store"},
    {"compact", cmd_compact, "merge a store's segments, dropping dead fingerprints"},
    {"inspect", cmd_inspect, "a store's or table file's design, coding and histogram"},
    {"verify", cmd_verify, "check a store or table file: checksums, structure, agreement"},
    {"dump", cmd_dump, "the fingerprints of a table file, block by block"},
    {"dedup", cmd_dedup, "JSON Lines without near-duplicates of earlier records or a store"},
    {"get", cmd_get, "stored documents by id: fingerprint, segment, metadata"},
    {"export", cmd_export, "every live document, as build reads it back"},
    {"serve", cmd_serve, "an HTTP/JSON server: queries, durable online inserts, metrics"},
};

#define COMMAND_COUNT (sizeof commands / sizeof commands[0])

static void print_help(FILE *out)
{
    fprintf(out, "Usage: simstore [--version] [--help] COMMAND [ARGS...]\n"
                 "\n"
                 "A compressed on-disk store of 64-bit simhash fingerprints answering\n"
                 "exact Hamming-distance queries.\n"
                 "\n"
                 "Commands:\n");
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n"
                 "Run 'simstore COMMAND --help' for a command's options.\n"
                 "Exit status: 0 success, 1 failure, 2 usage error.\n");
}

/* Every command's output reaches stdout through stdio: a full disk, a
 * closed descriptor or /dev/full shows up here, at the latest, and must not
 * be a silent success. fclose also reports what only close() sees (NFS). */
static int finish_stdout(const char *cmd, int status)
{
    errno = 0;
    int failed = fflush(stdout) != 0 || ferror(stdout);
    int err = errno;
    if (fclose(stdout) != 0 && !failed) {
        failed = 1;
        err = errno;
    }
    if (!failed)
        return status;
    /* An error the command reported itself (status 1 or 2) has been said. */
    if (status == CLI_EXIT_OK)
        cli_error(cmd, "cannot write standard output: %s", err ? strerror(err) : "write error");
    return status == CLI_EXIT_OK ? CLI_EXIT_FAIL : status;
}

int main(int argc, char **argv)
{
    /* Output that is not a terminal goes out in 64 KiB writes: a command's
     * usual output then fails, if it fails, at finish_stdout's flush, where
     * errno still says why (with stdio's default 4 KiB buffer a write
     * failing mid-run left only "write error"). Streaming commands flush
     * per answer themselves. */
    static char stdout_buf[1 << 16];
    if (!isatty(STDOUT_FILENO))
        setvbuf(stdout, stdout_buf, _IOFBF, sizeof stdout_buf);
    if (argc < 2) {
        print_help(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        print_help(stdout);
        return finish_stdout(NULL, CLI_EXIT_OK);
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0 || strcmp(name, "version") == 0)
        return finish_stdout(NULL, simstore_cli_version());
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        if (strcmp(name, commands[i].name) == 0)
            return finish_stdout(name, commands[i].run(argc - 1, argv + 1));
    if (name[0] == '-')
        return cli_usage_error(NULL, "unknown option '%s'", name);
    return cli_usage_error(NULL, "unknown command '%s'", name);
}
