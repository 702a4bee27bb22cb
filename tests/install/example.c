/* example.c: build a store of three documents, then print the ones within
 * distance 3 of the first one's text: id, fingerprint, distance. */
#include <simstore.h>
#include <stdio.h>
#include <string.h>

#define FLOOD(flooded)                                                                             \
    "The river " flooded " the lower town after three days of rain, and the "                      \
    "mayor asked every family near the old bridge to leave before night. Volunteers filled "       \
    "sandbags at the school while the fire brigade moved the elderly to the sports hall."

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "example.store";
    const char *ids[] = {"flood", "flood-typo", "other"};
    const char *texts[] = {FLOOD("flooded"), FLOOD("floded"), "An unrelated note on simhash."};
    simstore_fingerprinter *fpr = NULL;
    simstore_builder *b = NULL;
    simstore *s = NULL;
    simstore_query *q = NULL;
    const simstore_match *m = NULL;
    size_t n = 0;

    int err = simstore_fingerprinter_new(NULL, &fpr);
    if (!err)
        err = simstore_build_begin(path, NULL, &b);
    for (int i = 0; i < 3 && !err; i++) {
        simstore_doc doc = {.id = ids[i], .id_len = strlen(ids[i])};
        err = simstore_fingerprint_text(fpr, texts[i], strlen(texts[i]), &doc.fp, NULL);
        if (!err)
            err = simstore_builder_add(b, &doc);
    }
    if (err)
        simstore_builder_abort(b);
    else
        err = simstore_builder_finish(b); /* frees b; the store appears at path */
    if (!err)
        err = simstore_open(path, SIMSTORE_OPEN_READONLY, &s);
    if (!err)
        err = simstore_query_new(s, 0, &q);
    if (!err)
        err = simstore_query_text(q, fpr, texts[0], strlen(texts[0]), 3, NULL, &m, &n);
    for (size_t i = 0; !err && i < n; i++)
        printf("%s\t%016llx\t%u\n", m[i].id, (unsigned long long)m[i].fp, m[i].distance);
    if (err)
        fprintf(stderr, "example: %s: %s\n", simstore_strerror(err), simstore_last_error());
    simstore_query_free(q);
    simstore_close(s);
    simstore_fingerprinter_free(fpr);
    return err ? 1 : 0;
}
