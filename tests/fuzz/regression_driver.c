/* regression_driver.c: a main() for fuzz targets in ordinary (non-libFuzzer)
 * builds: feeds every file named on the command line, or found in a named
 * directory, to LLVMFuzzerTestOneInput once, in name order. CTest runs each
 * target over its committed corpus this way (tests/fuzz/tests.cmake), so
 * every build replays the seeds and past finds; under ASan/UBSan the replay
 * is as strict as the fuzzer. Exits nonzero when no input was found. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "regression_driver: cannot open %s\n", path);
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fclose(f);
            return -1;
        }
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        cap *= 2;
        uint8_t *g = realloc(buf, cap);
        if (!g)
            free(buf);
        buf = g;
    }
    fclose(f);
    /* An exact-size copy, so ASan sees reads past the input's end. */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    size_t inputs = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "regression_driver: no such file or directory: %s\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (run_file(argv[i]))
                return 1;
            inputs++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d)
            return 1;
        char **names = NULL;
        size_t count = 0, cap = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            if (count == cap) {
                cap = cap ? 2 * cap : 64;
                char **g = realloc(names, cap * sizeof *names);
                if (!g)
                    return 1;
                names = g;
            }
            names[count++] = strdup(e->d_name);
        }
        closedir(d);
        qsort(names, count, sizeof *names, cmp_names);
        for (size_t k = 0; k < count; k++) {
            size_t len = strlen(argv[i]) + strlen(names[k]) + 2;
            char *path = malloc(len);
            snprintf(path, len, "%s/%s", argv[i], names[k]);
            if (run_file(path))
                return 1;
            inputs++;
            free(path);
            free(names[k]);
        }
        free(names);
    }
    printf("regression_driver: %zu inputs replayed without a failure\n", inputs);
    return inputs ? 0 : 1;
}
