/* boilerplate.c: the boilerplate options, spooling of inputs that cannot be
 * read twice, the first pass (the ingest pipeline keying lines on every core,
 * this thread counting them in input order) and how a set is shown. */
#include "boilerplate.h"

#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void boiler_opts_init(boiler_opts *b)
{
    memset(b, 0, sizeof *b);
    b->fraction = SIMSTORE_BOILERPLATE_FRACTION_DEFAULT;
    b->min_docs = SIMSTORE_BOILERPLATE_MIN_DOCUMENTS_DEFAULT;
}

int boiler_apply(const char *cmd, int opt, const char *arg, boiler_opts *b)
{
    char *end;
    double d;
    switch (opt) {
    case BOILEROPT_MODE:
        if (strcmp(arg, "auto") == 0)
            b->automatic = 1;
        else if (strcmp(arg, "none") == 0)
            b->automatic = 0;
        else {
            cli_usage_error(cmd, "--boilerplate takes auto or none, not '%s'", arg);
            return 2;
        }
        b->given = 1;
        return 1;
    case BOILEROPT_FRACTION:
        errno = 0;
        d = strtod(arg, &end);
        /* The fraction is used in millionths: 1..999999 of them. */
        if (errno || end == arg || *end || !isfinite(d) || !(d * 1e6 >= 0.5) ||
            !(d * 1e6 < 999999.5)) {
            cli_usage_error(cmd,
                            "--boilerplate-fraction takes a number above 0 and below 1 (in "
                            "millionths: 0.000001 to 0.999999), not '%s'",
                            arg);
            return 2;
        }
        b->fraction = d;
        b->fraction_given = b->given = 1;
        return 1;
    case BOILEROPT_MIN_DOCS:
        if (cli_parse_size(arg, &b->min_docs)) {
            cli_usage_error(cmd, "--boilerplate-min-docs takes a count (100, 1e6, 1M), not '%s'",
                            arg);
            return 2;
        }
        b->min_docs_given = b->given = 1;
        return 1;
    default: return 0;
    }
}

int boiler_finish(const char *cmd, const boiler_opts *b)
{
    if (!b->automatic && (b->fraction_given || b->min_docs_given)) {
        cli_usage_error(cmd, "--boilerplate-%s applies only with --boilerplate auto",
                        b->fraction_given ? "fraction" : "min-docs");
        return 2;
    }
    return 0;
}

/* ---- spooling ------------------------------------------------------------- */

void boiler_spool_free(boiler_spool *s)
{
    for (int i = 0; i < s->n; i++) {
        if (s->fds && s->fds[i] >= 0)
            close(s->fds[i]);
        if (s->read_paths)
            free(s->read_paths[i]);
    }
    free(s->read_paths);
    free(s->fds);
    memset(s, 0, sizeof *s);
}

/* Copy input `path` ('-': standard input) as it is (compressed or not) into
 * an unlinked file of $TMPDIR, kept open as *fd_out. Returns 0, or -1 after
 * printing why. */
static int spool_one(const char *cmd, const char *path, int *fd_out)
{
    const char *name = strcmp(path, "-") == 0 ? "<stdin>" : path;
    int in = strcmp(path, "-") == 0 ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        cli_error(cmd, "%s: %s", name, strerror(errno));
        return -1;
    }
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/simstore-spool-XXXXXX", cli_scratch_dir());
    int fd = mkostemp(tmpl, O_CLOEXEC);
    if (fd < 0) {
        cli_error(cmd, "%s: cannot copy it to %s to read it twice: %s", name, cli_scratch_dir(),
                  strerror(errno));
        if (in != STDIN_FILENO)
            close(in);
        return -1;
    }
    unlink(tmpl); /* nothing outlives the process, even a crash */
    static char buf[1 << 16];
    int rc = 0;
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            cli_error(cmd, "%s: %s", name, strerror(errno));
            rc = -1;
            break;
        }
        if (n == 0)
            break;
        for (ssize_t done = 0; done < n;) {
            ssize_t w = write(fd, buf + done, (size_t)(n - done));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                cli_error(cmd, "%s: cannot copy it to %s to read it twice: %s", name,
                          cli_scratch_dir(), strerror(errno));
                rc = -1;
                break;
            }
            done += w;
        }
        if (rc)
            break;
    }
    if (in != STDIN_FILENO)
        close(in);
    if (rc) {
        close(fd);
        return -1;
    }
    *fd_out = fd;
    return 0;
}

/* Spool every input that is not a regular file. Returns 0 or -1 (printed). */
static int spool_inputs(const char *cmd, char **paths, int npaths, boiler_spool *s)
{
    s->n = npaths;
    s->read_paths = calloc((size_t)(npaths > 0 ? npaths : 1), sizeof *s->read_paths);
    s->fds = malloc((size_t)(npaths > 0 ? npaths : 1) * sizeof *s->fds);
    if (!s->read_paths || !s->fds) {
        cli_error(cmd, "out of memory");
        return -1;
    }
    for (int i = 0; i < npaths; i++)
        s->fds[i] = -1;
    for (int i = 0; i < npaths; i++) {
        struct stat st;
        int is_stdin = strcmp(paths[i], "-") == 0;
        /* A path that is missing or a directory is the ingest's to report. */
        if (!is_stdin && (stat(paths[i], &st) != 0 || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)))
            continue;
        if (spool_one(cmd, paths[i], &s->fds[i]))
            return -1;
        char p[64];
        snprintf(p, sizeof p, "/proc/self/fd/%d", s->fds[i]);
        if (!(s->read_paths[i] = strdup(p))) {
            cli_error(cmd, "out of memory");
            return -1;
        }
    }
    return 0;
}

/* ---- the first pass ------------------------------------------------------- */

static int count_record(void *ctx, const ingest_record *r)
{
    return simstore_boilerplate_counter_add_keys((simstore_boilerplate_counter *)ctx, r->line_keys,
                                                 r->line_key_count);
}

/* Every input must hold texts: JSON Lines. Returns 0 or -1 (printed). */
static int check_formats(const char *cmd, char **paths, int npaths, const ingest_options *io)
{
    for (int i = 0; i < npaths; i++) {
        int is_stdin = strcmp(paths[i], "-") == 0;
        int fmt = io->format != INGEST_BY_EXTENSION ? (int)io->format
                  : is_stdin                        ? -1
                                                    : ingest_format_of_name(paths[i]);
        if (fmt >= 0 && fmt != INGEST_JSONL) {
            cli_error(cmd,
                      "%s: --boilerplate auto reads the texts of JSON Lines documents; this "
                      "input holds fingerprints",
                      is_stdin ? "<stdin>" : paths[i]);
            return -1;
        }
    }
    return 0;
}

int boiler_first_pass(const char *cmd, char **paths, int npaths, ingest_options *io,
                      const boiler_opts *b, uint64_t memory_bytes, boiler_spool *spool,
                      simstore_boilerplate **out)
{
    *out = NULL;
    if (check_formats(cmd, paths, npaths, io) || spool_inputs(cmd, paths, npaths, spool))
        return CLI_EXIT_FAIL;
    io->read_paths = spool->read_paths;
    simstore_boilerplate_options bo;
    simstore_boilerplate_options_init(&bo);
    bo.fraction = b->fraction;
    bo.min_documents = b->min_docs;
    bo.memory_bytes = memory_bytes;
    simstore_boilerplate_counter *counter;
    int rc = simstore_boilerplate_counter_new(io->text, &bo, &counter);
    if (rc)
        return cli_api_error(cmd, rc, "boilerplate");
    ingest_options first = *io;
    first.line_keys = 1;
    first.silent_bad = 1; /* the second pass reports them, as without boilerplate */
    first.boilerplate = NULL;
    first.note = NULL;
    first.phase = "boilerplate: reading";
    ingest_sink sink = {NULL, NULL, counter, count_record};
    ingest_result res;
    int got = ingest_run(&sink, paths, npaths, &first, &res);
    if (got != 0) {
        simstore_boilerplate_counter_free(counter);
        return cli_error(cmd, "finding boilerplate: the input could not be read");
    }
    rc = simstore_boilerplate_counter_finish(counter, out);
    simstore_boilerplate_counter_free(counter);
    if (rc)
        return cli_api_error(cmd, rc, "finding boilerplate");
    simstore_boilerplate_info info;
    simstore_boilerplate_get_info(*out, &info);
    if (info.documents < info.min_documents)
        cli_warn(cmd,
                 "boilerplate: %llu %s, fewer than the %llu --boilerplate auto needs "
                 "(--boilerplate-min-docs): no line is boilerplate",
                 (unsigned long long)info.documents, CLI_NOUN(info.documents, "document"),
                 (unsigned long long)info.min_documents);
    return 0;
}

/* ---- showing a set -------------------------------------------------------- */

void boiler_describe(const simstore_boilerplate *bp, char *buf, size_t size)
{
    if (!bp) {
        snprintf(buf, size, "none");
        return;
    }
    simstore_boilerplate_info info;
    simstore_boilerplate_get_info(bp, &info);
    if (info.documents < info.min_documents)
        snprintf(buf, size, "%llu lines (%llu %s: fewer than the %llu needed)",
                 (unsigned long long)info.lines, (unsigned long long)info.documents,
                 CLI_NOUN(info.documents, "document"), (unsigned long long)info.min_documents);
    else
        snprintf(buf, size, "%llu %s (held by more than %g%% of %llu documents)",
                 (unsigned long long)info.lines, CLI_NOUN(info.lines, "line"),
                 info.fraction_millionths / 1e4, (unsigned long long)info.documents);
}

void boiler_json(FILE *out, const simstore_boilerplate *bp)
{
    if (!bp) {
        fputs("null", out);
        return;
    }
    simstore_boilerplate_info info;
    simstore_boilerplate_get_info(bp, &info);
    fprintf(out, "{\"lines\":%llu,\"fraction\":%g,\"documents\":%llu,\"min_documents\":%llu}",
            (unsigned long long)info.lines, info.fraction, (unsigned long long)info.documents,
            (unsigned long long)info.min_documents);
}
