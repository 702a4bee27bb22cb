/* segment.c: friso, loaded once per process, and the per-task loop that cuts a
 * Han run into words.
 *
 * Thread safety. friso's own entry point next_mmseg_token() writes into the
 * shared dictionary (it stores each token's offset in the dictionary entry it
 * returns, and sets a control bit on entries when synonyms are on), so two
 * threads calling it on separate tasks race on shared memory. We never call
 * it. We call next_complex_cjk() (the MMSEG core: dictionary lookups, chunk
 * building and the four filter rules on freshly allocated chunks) and
 * utf8_next_word(), which only read the dictionary and the configuration and
 * write into the task. So one dictionary and one configuration, written once
 * under pthread_once and read-only after, serve any number of tasks, one task
 * per thread. friso allocates inside next_complex_cjk() on every call, and
 * ends the process (exit(1) after a message on stdout) if malloc fails. */
#include "text/segment.h"

#include "common/error.h"

#include <errno.h>
#include <friso/friso.h>
#include <friso/friso_ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SIMS_FRISO_INI_DEFAULT
#define SIMS_FRISO_INI_DEFAULT "/etc/friso/friso.ini"
#endif

/* Words longer than max_len characters are never matched; friso reads the
 * dictionary with a byte limit of max_len * 3 (UTF-8). Both are part of the
 * fingerprint format, so they are fixed here rather than read from the ini. */
#define SIMS_FRISO_MAX_LEN 5

static pthread_once_t friso_once = PTHREAD_ONCE_INIT;
static friso_t friso_shared;
static friso_config_t friso_config_shared;
static simstore_cjk_mode friso_mode = SIMSTORE_CJK_BIGRAM;
static char friso_description[2048];
static char friso_failure[1536]; /* why the dictionary did not load */

struct sims_friso_task {
    friso_task_t task;
};

/* why = "what: detail", truncated to fit (plain copies, so that the compiler's
 * format-truncation analysis has nothing to object to). */
static void reason(char *why, size_t cap, const char *what, const char *detail)
{
    const char *parts[3] = {what, ": ", detail};
    size_t n = 0;
    for (int i = 0; i < 3; i++)
        for (const char *c = parts[i]; *c && n + 1 < cap; c++)
            why[n++] = *c;
    why[n] = '\0';
}

/* Read a line of any length; strips the newline and a CR before it. */
static char *read_line(FILE *f, char **buf, size_t *cap)
{
    ssize_t n = getline(buf, cap, f);
    if (n < 0)
        return NULL;
    while (n > 0 && ((*buf)[n - 1] == '\n' || (*buf)[n - 1] == '\r'))
        (*buf)[--n] = '\0';
    return *buf;
}

/* friso.ini "key = value" lines, parsed as friso parses them: lines that start
 * with '#', a space or a tab are comments; the value is its first word. */
static int ini_value(const char *line, const char *key, char *out, size_t cap)
{
    size_t klen = strlen(key);
    if (strncmp(line, key, klen) != 0)
        return 0;
    const char *p = line + klen;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p != '=')
        return 0;
    p++;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strcspn(p, " \t");
    if (n >= cap)
        n = cap - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    return 1;
}

/* The lexicon files friso.lex.ini lists for __LEX_CJK_WORDS__, checked readable
 * (friso prints to stdout rather than failing when one is missing) and then
 * loaded. Returns 0 or -1 with `why` filled in. */
static int load_cjk_words(friso_t friso, friso_config_t config, const char *lex_dir, char *why,
                          size_t why_cap)
{
    char path[4096];
    snprintf(path, sizeof path, "%sfriso.lex.ini", lex_dir);
    FILE *f = fopen(path, "rb");
    if (!f) {
        reason(why, why_cap, path, strerror(errno));
        return -1;
    }
    char *buf = NULL, *line;
    size_t cap = 0;
    int in_section = 0, found_section = 0, files = 0, rc = 0;
    while ((line = read_line(f, &buf, &cap)) != NULL) {
        const char *p = line + strspn(line, " \t");
        size_t n = strlen(p);
        if (*p == '#' || n == 0)
            continue;
        if (!in_section) {
            if (p[n - 1] == '[' && strncmp(p, "__LEX_CJK_WORDS__", 17) == 0 &&
                (p[17] == ' ' || p[17] == '\t' || p[17] == ':')) {
                in_section = 1;
                found_section = 1;
            }
            continue;
        }
        if (p[n - 1] == ']') {
            in_section = 0;
            continue;
        }
        size_t name_len = strcspn(p, " \t;");
        snprintf(path, sizeof path, "%s%.*s", lex_dir, (int)name_len, p);
        FILE *lex = fopen(path, "rb");
        if (!lex) {
            reason(why, why_cap, path, strerror(errno));
            rc = -1;
            break;
        }
        fclose(lex);
        friso_dic_load(friso, config, __LEX_CJK_WORDS__, path, SIMS_FRISO_MAX_LEN * 3);
        files++;
    }
    free(buf);
    fclose(f);
    if (rc == 0 && (!found_section || files == 0)) {
        snprintf(why, why_cap, "%sfriso.lex.ini lists no __LEX_CJK_WORDS__ lexicon", lex_dir);
        rc = -1;
    }
    return rc;
}

/* The lexicon directory friso.ini names (dir, ending in '/'); -1 with why
 * when the ini cannot be read or is not one simstore can use. Always
 * inlined: the optimiser's -Wformat-truncation analysis of the paths and
 * messages built from dir then sees its bound (a 2047-byte lex_dir). */
static inline __attribute__((always_inline)) int
ini_lex_dir(const char *ini, char *dir, size_t dir_cap, char *why, size_t why_cap)
{
    FILE *f = fopen(ini, "rb");
    if (!f) {
        reason(why, why_cap, ini, strerror(errno));
        return -1;
    }
    char lex_dir[2048] = "", charset[32] = "0";
    char *buf = NULL, *line;
    size_t cap = 0;
    while ((line = read_line(f, &buf, &cap)) != NULL) {
        if (line[0] == '#' || line[0] == ' ' || line[0] == '\t' || line[0] == '\0')
            continue;
        if (!lex_dir[0])
            ini_value(line, "friso.lex_dir", lex_dir, sizeof lex_dir - 1);
        ini_value(line, "friso.charset", charset, sizeof charset);
    }
    free(buf);
    fclose(f);
    if (!lex_dir[0]) {
        snprintf(why, why_cap, "%s: no friso.lex_dir", ini);
        return -1;
    }
    if (strcmp(charset, "0") != 0) {
        snprintf(why, why_cap, "%s: friso.charset is %s, not UTF-8 (0)", ini, charset);
        return -1;
    }
    /* Relative directories are relative to the ini, as in friso. */
    if (lex_dir[0] == '/') {
        snprintf(dir, dir_cap, "%s", lex_dir);
    } else {
        const char *slash = strrchr(ini, '/');
        int base = slash ? (int)(slash - ini + 1) : 0;
        snprintf(dir, dir_cap, "%.*s%s", base, ini, lex_dir);
    }
    size_t dlen = strlen(dir);
    if (dlen + 1 < dir_cap && dir[dlen - 1] != '/') {
        dir[dlen] = '/';
        dir[dlen + 1] = '\0';
    }
    return 0;
}

/* Try one friso.ini; on success the shared objects are set. */
static int try_ini(const char *ini, char *why, size_t why_cap)
{
    char dir[4096];
    if (ini_lex_dir(ini, dir, sizeof dir, why, why_cap) != 0)
        return -1;
    friso_t friso = friso_new();
    friso_config_t config = friso_new_config();
    friso->charset = FRISO_UTF8;
    config->max_len = SIMS_FRISO_MAX_LEN;
    config->add_syn = 0; /* synonyms would add tokens that are not in the text */
    config->clr_stw = 0; /* stopwords stay: they are text */
    config->spx_out = 0;
    friso_set_mode(config, __FRISO_COMPLEX_MODE__);
    friso->dic = friso_dic_new();
    if (load_cjk_words(friso, config, dir, why, why_cap) != 0) {
        friso_free(friso);
        friso_free_config(config);
        return -1;
    }
    unsigned words = friso_spec_dic_size(friso->dic, __LEX_CJK_WORDS__);
    if (words == 0) {
        snprintf(why, why_cap, "%s: the dictionary in %s has no words", ini, dir);
        friso_free(friso);
        friso_free_config(config);
        return -1;
    }
    friso_shared = friso;
    friso_config_shared = config;
    /* Long paths make a description cut short, still a description (using
     * the result tells GCC the truncation is expected: Debug builds warn). */
    int described = snprintf(friso_description, sizeof friso_description,
                             "friso %s (complex mode), dictionary %s (%u words; from %s)",
                             FRISO_VERSION, dir, words, ini);
    (void)described;
    return 0;
}

/* The friso.ini files to try, in order: $SIMSTORE_FRISO_INI alone, else the
 * built-in paths. */
static int ini_candidates(const char *candidates[2])
{
    const char *env = getenv(SIMS_FRISO_INI_ENV);
    int count = 0;
    if (env && *env) {
        candidates[count++] = env;
    } else {
        candidates[count++] = SIMS_FRISO_INI_DEFAULT;
        if (strcmp(SIMS_FRISO_INI_DEFAULT, "/etc/friso/friso.ini") != 0)
            candidates[count++] = "/etc/friso/friso.ini";
    }
    return count;
}

static void friso_load_once(void)
{
    char *reasons = friso_failure;
    const char *candidates[2];
    int count = ini_candidates(candidates);
    for (int i = 0; i < count; i++) {
        char why[512];
        if (try_ini(candidates[i], why, sizeof why) == 0) {
            friso_mode = SIMSTORE_CJK_FRISO;
            return;
        }
        size_t used = strlen(reasons);
        snprintf(reasons + used, sizeof friso_failure - used, "%s%s", used ? "; " : "", why);
    }
    friso_mode = SIMSTORE_CJK_BIGRAM;
    snprintf(friso_description, sizeof friso_description,
             "character bigrams (friso dictionary not loadable: %s)", reasons);
}

simstore_cjk_mode sims_cjk_auto(const char **description)
{
    pthread_once(&friso_once, friso_load_once);
    if (description)
        *description = friso_description;
    return friso_mode;
}

/* Whether the first friso.ini the loader will try names a lexicon index it
 * can open: then the dictionary is loaded on first use, not now. A few
 * hundred bytes read instead of the dictionary's 180,000 words. */
static int friso_looks_loadable(void)
{
    const char *candidates[2];
    ini_candidates(candidates);
    char dir[4096], why[512], path[4200];
    if (ini_lex_dir(candidates[0], dir, sizeof dir, why, sizeof why) != 0)
        return 0;
    snprintf(path, sizeof path, "%sfriso.lex.ini", dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    fclose(f);
    return 1;
}

int sims_friso_task_new(sims_friso_task **out)
{
    *out = NULL;
    /* Load now unless the dictionary looks loadable: a missing dictionary
     * is then reported here, with the loader's own words. */
    if (!friso_looks_loadable() && sims_cjk_auto(NULL) != SIMSTORE_CJK_FRISO)
        return sims_fail(SIMSTORE_ENOTFOUND, "friso dictionary not loadable: %s", friso_failure);
    sims_friso_task *t = malloc(sizeof *t);
    if (!t)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a friso task");
    t->task = NULL; /* made with the dictionary, at the first Han run */
    *out = t;
    return 0;
}

void sims_friso_task_free(sims_friso_task *task)
{
    if (!task)
        return;
    if (task->task)
        friso_free_task(task->task);
    free(task);
}

int sims_friso_begin(sims_friso_task *task, char *run, size_t len)
{
    if (!task->task) {
        if (sims_cjk_auto(NULL) != SIMSTORE_CJK_FRISO)
            return sims_fail(SIMSTORE_ENOTFOUND, "friso dictionary not loadable: %s",
                             friso_failure);
        task->task = friso_new_task();
        if (!task->task)
            return sims_fail(SIMSTORE_ENOMEM, "out of memory for a friso task");
    }
    friso_set_text(task->task, run);
    task->task->length = (uint_t)len;
    return 0;
}

int sims_friso_next(sims_friso_task *task, size_t *offset, size_t *len)
{
    friso_task_t t = task->task;
    if (t->idx >= t->length)
        return 0;
    uint_t start = t->idx;
    t->bytes = (uint_t)utf8_next_word(t, &t->idx, t->buffer);
    uint_t stop = t->idx;
    /* A character the dictionary lacks is a word by itself, as in friso. */
    if (friso_dic_match(friso_shared->dic, __LEX_CJK_WORDS__, t->buffer)) {
        lex_entry_t e = next_complex_cjk(friso_shared, friso_config_shared, t);
        if (e && e->length > 0 && start + e->length <= t->length)
            stop = start + e->length;
    }
    t->idx = stop;
    *offset = start;
    *len = stop - start;
    return 1;
}
