/* boilerplate.h: boilerplate in the commands (README, "Boilerplate"): the
 * options of `build` and `dedup` (--boilerplate auto|none,
 * --boilerplate-fraction, --boilerplate-min-docs), the first pass that finds
 * a corpus's boilerplate lines (inputs that cannot be read twice are spooled
 * to $TMPDIR first), and how commands show a set. */
#ifndef SIMS_CMD_BOILERPLATE_H
#define SIMS_CMD_BOILERPLATE_H

#include "ingest.h"
#include "simstore.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

/* getopt_long values of the options. */
enum { BOILEROPT_MODE = 0x1200, BOILEROPT_FRACTION, BOILEROPT_MIN_DOCS };

#define BOILER_LONG_OPTIONS                                                                        \
    {"boilerplate", required_argument, NULL, BOILEROPT_MODE},                                      \
        {"boilerplate-fraction", required_argument, NULL, BOILEROPT_FRACTION},                     \
    {                                                                                              \
        "boilerplate-min-docs", required_argument, NULL, BOILEROPT_MIN_DOCS                        \
    }

#define BOILER_HELP                                                                                \
    "      --boilerplate auto|none\n"                                                              \
    "                       auto: a first pass over the inputs finds the lines\n"                  \
    "                       (compared by their words, as the text options make\n"                  \
    "                       them) held by more than a fraction of the documents,\n"                \
    "                       and every text is fingerprinted without them; inputs\n"                \
    "                       that cannot be read twice (standard input, pipes)\n"                   \
    "                       are copied to $TMPDIR first (default none)\n"                          \
    "      --boilerplate-fraction F\n"                                                             \
    "                       with auto: lines held by more than this share of the\n"                \
    "                       documents, 0 < F < 1 (default 0.1)\n"                                  \
    "      --boilerplate-min-docs N\n"                                                             \
    "                       with auto: fewer documents than N have no\n"                           \
    "                       boilerplate (default 100)\n"

typedef struct boiler_opts {
    int automatic;   /* --boilerplate auto */
    int given;       /* any of the options was given */
    double fraction; /* SIMSTORE_BOILERPLATE_FRACTION_DEFAULT */
    int fraction_given;
    unsigned long long min_docs; /* SIMSTORE_BOILERPLATE_MIN_DOCUMENTS_DEFAULT */
    int min_docs_given;
} boiler_opts;

void boiler_opts_init(boiler_opts *b);

/* Apply option `opt` with argument `arg`: 1 when it is a boilerplate option
 * and was applied, 0 when it is not one, 2 after printing a usage error. */
int boiler_apply(const char *cmd, int opt, const char *arg, boiler_opts *b);

/* After parsing: 0, or 2 after printing a usage error (a fraction or a
 * minimum without --boilerplate auto). */
int boiler_finish(const char *cmd, const boiler_opts *b);

/* Copies of the inputs that cannot be read twice, as paths for
 * ingest_options.read_paths (unlinked files in $TMPDIR, kept open). */
typedef struct boiler_spool {
    char **read_paths; /* per input: NULL, or "/proc/self/fd/N" */
    int *fds;
    int n;
} boiler_spool;

void boiler_spool_free(boiler_spool *s);

/* The first pass over paths[0..npaths) ('-' is standard input), as io reads
 * them (format, fields, text options, threads, progress): every JSON Lines
 * document's line keys counted with b's fraction and minimum in
 * memory_bytes. Malformed records are skipped silently: the second pass
 * reports them, as it would without boilerplate. Inputs other than regular
 * files are spooled first; the second pass must read them through
 * io->read_paths, which is set to spool's. On success *out receives the set
 * (free it with simstore_boilerplate_free) and returns 0; otherwise prints
 * why and returns CLI_EXIT_FAIL. */
int boiler_first_pass(const char *cmd, char **paths, int npaths, ingest_options *io,
                      const boiler_opts *b, uint64_t memory_bytes, boiler_spool *spool,
                      simstore_boilerplate **out);

/* "none", or e.g. "16 lines (held by more than 10% of 300 documents)". */
void boiler_describe(const simstore_boilerplate *bp, char *buf, size_t size);

/* null, or {"lines":16,"fraction":0.1,"documents":300,"min_documents":100}. */
void boiler_json(FILE *out, const simstore_boilerplate *bp);

#endif
