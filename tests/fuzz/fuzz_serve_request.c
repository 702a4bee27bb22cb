/* fuzz_serve_request.c: libFuzzer target of the server's request handler
 * (server/handler.c, serve_handle) over a small real store, served live
 * (with the bearer token "tok") or read-only.
 * Input: 1 flags byte (bit 0: the read-only server), then the method, the
 * request target (path and query) and the Authorization header, each ending
 * at a newline, then the body (the rest). Every answer must be a status
 * from 200 to 599 with a body; JSON answers must parse. The body is also
 * parsed alone with jansson's allocations counted: the parse may hold no
 * more than the bound the server's scan (server/reqjson.c) gives it. */
#include "handler.h"
#include "reqjson.h"

#include <ftw.h>
#include <jansson.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char store_dir[64];
static char store_path[96];
static serve_server *live_server, *read_only_server;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void cleanup(void)
{
    serve_server_close(read_only_server);
    serve_server_close(live_server);
    if (store_dir[0])
        nftw(store_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* What jansson holds, counted as reqjson.c's costs count it: malloc's
 * usable size and its header, for each block. */
static size_t json_live, json_peak;

static void *counting_malloc(size_t n)
{
    void *p = malloc(n);
    if (p) {
        json_live += malloc_usable_size(p) + 8;
        if (json_live > json_peak)
            json_peak = json_live;
    }
    return p;
}

static void counting_free(void *p)
{
    if (p) {
        json_live -= malloc_usable_size(p) + 8;
        free(p);
    }
}

/* The scan's bound holds for the parse of body[0..n). */
static void check_parse_bound(const char *body, size_t n)
{
    size_t bound;
    if (n == 0 || reqjson_scan(body, n, NULL, SIZE_MAX, &bound) != REQJSON_FINE)
        return;
    size_t before = json_live;
    json_peak = json_live;
    json_error_t err;
    json_t *j = reqjson_load(body, n, &err);
    if (json_peak - before > bound) {
        fprintf(stderr,
                "fuzz_serve_request: the parse of %zu bytes held %zu, above the bound %zu\n", n,
                json_peak - before, bound);
        abort();
    }
    json_decref(j);
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "fuzz_serve_request: %s: %s: %s\n", what, simstore_strerror(rc),
            simstore_last_error());
    abort();
}

/* A store of a few documents, two of them near-duplicates. */
static void setup(void)
{
    static const char *const texts[] = {
        "The river flooded the lower town after three days of rain",
        "The river floded the lower town after three days of rain",
        "An unrelated note on simhash and near-duplicate detection",
        "Minutes of the harbour committee, spring meeting",
    };
    strcpy(store_dir, "/tmp/fuzz-serve-XXXXXX");
    if (!mkdtemp(store_dir)) {
        perror("mkdtemp");
        abort();
    }
    snprintf(store_path, sizeof store_path, "%s/s.store", store_dir);
    atexit(cleanup);
    json_set_alloc_funcs(counting_malloc, counting_free); /* before any jansson value */
    simstore_fingerprinter *fpr;
    simstore_builder *b;
    int rc = simstore_fingerprinter_new(NULL, &fpr);
    if (rc)
        die("fingerprinter", rc);
    if ((rc = simstore_build_begin(store_path, NULL, &b)))
        die("build", rc);
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        char id[16];
        snprintf(id, sizeof id, "%zu", i + 1);
        simstore_doc doc = {id, strlen(id), 0, "{\"n\":1}", 7, 0};
        doc.flags = SIMSTORE_DOC_INTEGER_ID;
        if ((rc = simstore_fingerprint_text(fpr, texts[i], strlen(texts[i]), &doc.fp, NULL)) ||
            (rc = simstore_builder_add(b, &doc)))
            die("add", rc);
    }
    if ((rc = simstore_builder_finish(b)))
        die("finish", rc);
    simstore_fingerprinter_free(fpr);
    serve_options o;
    serve_options_init(&o);
    o.token = "tok";
    o.max_body_bytes = 1 << 16;
    o.max_batch = 16;
    o.threads = 1;
    if ((rc = serve_server_open(store_path, &o, &live_server)))
        die("live server", rc);
    o.read_only = 1;
    if ((rc = serve_server_open(store_path, &o, &read_only_server)))
        die("read-only server", rc);
}

/* The next newline-terminated field of data[*pos..size), NUL-terminated in
 * a copy; NULL when there is no newline left. */
static char *field(const uint8_t *data, size_t size, size_t *pos)
{
    const uint8_t *nl = memchr(data + *pos, '\n', size - *pos);
    if (!nl)
        return NULL;
    size_t len = (size_t)(nl - (data + *pos));
    char *s = malloc(len + 1);
    if (!s)
        abort();
    memcpy(s, data + *pos, len);
    s[len] = '\0';
    *pos += len + 1;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!live_server)
        setup();
    if (size < 1)
        return 0;
    serve_server *srv = data[0] & 1 ? read_only_server : live_server;
    size_t pos = 1;
    char *method = field(data, size, &pos);
    char *target = method ? field(data, size, &pos) : NULL;
    char *auth = target ? field(data, size, &pos) : NULL;
    if (auth) {
        /* Strings with NUL bytes cannot come from libmicrohttpd. */
        char *q = strchr(target, '?');
        serve_request req = {
            .method = method,
            .path = target,
            .path_len = q ? (size_t)(q - target) : strlen(target),
            .query = q ? q + 1 : NULL,
            .query_len = q ? strlen(q + 1) : 0,
            .authorization = auth[0] ? auth : NULL,
            .body = (const char *)data + pos,
            .body_len = size - pos,
        };
        serve_response resp;
        serve_handle(srv, &req, &resp);
        if (resp.status < 200 || resp.status > 599 || !resp.body || !resp.content_type)
            abort();
        if (strncmp(resp.content_type, "application/json", 16) == 0) {
            json_t *j = json_loadb(resp.body, resp.body_len, 0, NULL);
            if (!j)
                abort();
            json_decref(j);
        }
        serve_record(srv, resp.route, resp.status, 0.001);
        serve_response_free(&resp);
        check_parse_bound(req.body, req.body_len);
    }
    free(method);
    free(target);
    free(auth);
    return 0;
}
