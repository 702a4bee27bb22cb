/* bench_codec.c: size and speed of the table codec on uniform random keys.
 *
 * For N = 2^20, 2^24 and 2^27 uniform 64-bit keys, tables (format version
 * 3) of 512-byte (the store's default), 1 KiB, 256-byte and 4 KiB blocks,
 * it prints one line per configuration: the time a reader takes to open the
 * table (it reads no part of its index), bits per
 * fingerprint (blocks only, the index, and the whole file with header,
 * index and footer) beside the
 * information-theoretic floor 64 - log2 N + 1.443 and Elias-Fano's
 * 2 + ceil(log2(2^64 / N)); encode and decode rates (one core, in-memory
 * table); bytes of block keys kept in RAM per fingerprint; and the cost of a
 * query-like probe. A baseline measured in the same run comes first: memcpy
 * and a popcount scan of the raw sorted u64 array.
 *
 *   bench_codec [MAX_LOG2_N]     (default 27; e.g. 24 for a quicker run)
 *
 * Columns:
 *   v                   table format version
 *   blk_bpf / file_bpf  bits per fingerprint, blocks only / whole file
 *   blk+fl / file+fl    the same minus the floor (targets at 2^24: blocks
 *                       <= floor + 0.30 at 1 KiB; the file <= floor + 0.6
 *                       at 512 bytes)
 *   idx_bpf             index bits per fingerprint (Elias-Fano keys, counts
 *                       and a checksum per 4 KiB page in chunks of 256
 *                       blocks, with a top entry per chunk)
 *   EF                  Elias-Fano bits per fingerprint
 *   enc                 histogram + encode of the whole table into memory,
 *                       M fps/s (best of 2)
 *   dec                 whole-table decode, block by block, block checksums
 *                       skipped (M fps/s, best of 3; target >= 250)
 *   dec+ck              the same, verifying every block checksum
 *   scan_k3             fused sims_table_reader_search over [0, 2^64-1], k = 3
 *   keyRAM              bytes of the index the reader keeps in RAM per
 *                       fingerprint
 *   probe               sims_table_reader_search with a log2(N)-bit prefix range
 *                       (about one candidate), checksums on: ns per probe
 *                       (each first touch of a page group or an index chunk
 *                       checks it: most of the time at these N)
 *   open_us             sims_table_reader_open_memory with block checks, best of 3 */
#include "simstore.h"
#include "table/table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_sec(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t rng_state;
static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* LSD radix sort, 16-bit digits. */
static void radix_sort(uint64_t *v, uint64_t *tmp, size_t n)
{
    static size_t count[1 << 16];
    for (unsigned shift = 0; shift < 64; shift += 16) {
        memset(count, 0, sizeof count);
        for (size_t i = 0; i < n; i++)
            count[(v[i] >> shift) & 0xFFFF]++;
        size_t sum = 0;
        for (size_t d = 0; d < (1 << 16); d++) {
            size_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            tmp[count[(v[i] >> shift) & 0xFFFF]++] = v[i];
        uint64_t *t = v;
        v = tmp;
        tmp = t;
    }
    /* Four passes: the result is back in the original array. */
}

/* log2 without libm (the bench links only the library): halve into [1, 2),
 * then ln x = 2 atanh((x-1)/(x+1)) as a series. */
static double log2_of(double x)
{
    double e = 0;
    while (x >= 2) {
        x /= 2;
        e += 1;
    }
    while (x < 1) {
        x *= 2;
        e -= 1;
    }
    double y = (x - 1) / (x + 1), y2 = y * y, term = y, ln = 0;
    for (int k = 0; k < 40; k++) {
        ln += term / (2 * k + 1);
        term *= y2;
    }
    return e + 2 * ln / 0.6931471805599453;
}

static double ceil_of(double x)
{
    double t = (double)(long long)x;
    return t < x ? t + 1 : t;
}

static volatile uint64_t sink;

static int count_emit(void *ctx, uint64_t value)
{
    (*(uint64_t *)ctx) += value | 1;
    return 0;
}

/* Decode every block; returns seconds and checks the values' XOR. */
static double decode_all(const table_reader *r, uint64_t *buf, size_t cap, uint64_t want_xor)
{
    const table_info *in = sims_table_reader_info(r);
    double t0 = now_sec();
    uint64_t x = 0;
    for (uint64_t b = 0; b < in->block_count; b++) {
        size_t n;
        if (sims_table_reader_block(r, b, buf, cap, &n)) {
            fprintf(stderr, "decode failed: %s\n", simstore_last_error());
            exit(1);
        }
        for (size_t i = 0; i < n; i++)
            x ^= buf[i];
    }
    double t = now_sec() - t0;
    if (x != want_xor) {
        fprintf(stderr, "decode mismatch\n");
        exit(1);
    }
    return t;
}

int main(int argc, char **argv)
{
    int max_log2 = argc > 1 ? atoi(argv[1]) : 27;
    static const int log2s[] = {20, 24, 27};
    static const struct {
        uint32_t block_bytes;
    } configs[] = {{512}, {1024}, {256}, {4096}};
    printf("bench_codec: uniform random 64-bit keys, one core, in-memory tables\n");
    printf("floor = 64 - log2 N + 1.443 bits/fp; EF = Elias-Fano 2 + ceil(log2(2^64/N))\n");

    for (size_t li = 0; li < sizeof log2s / sizeof log2s[0]; li++) {
        int lg = log2s[li];
        if (lg > max_log2)
            break;
        size_t n0 = (size_t)1 << lg;
        uint64_t *v = malloc(n0 * sizeof *v);
        uint64_t *tmp = malloc(n0 * sizeof *tmp);
        if (!v || !tmp) {
            fprintf(stderr, "out of memory for 2^%d keys\n", lg);
            return 1;
        }
        rng_state = 0x5EED0000u + (uint64_t)lg;
        for (size_t i = 0; i < n0; i++)
            v[i] = rng_next();
        radix_sort(v, tmp, n0);
        size_t n = 0;
        uint64_t want_xor = 0;
        for (size_t i = 0; i < n0; i++)
            if (n == 0 || v[i] != v[n - 1])
                v[n++] = v[i];
        for (size_t i = 0; i < n; i++)
            want_xor ^= v[i];
        double log2n = log2_of((double)n);
        double floor_bpf = 64.0 - log2n + 1.4426950408889634;
        double ef_bpf = 2.0 + ceil_of(64.0 - log2n);

        /* Baseline: the raw sorted array. */
        double best_copy = 1e9, best_scan = 1e9;
        for (int rep = 0; rep < 3; rep++) {
            double t0 = now_sec();
            memcpy(tmp, v, n * sizeof *v);
            double t1 = now_sec();
            uint64_t q = rng_next(), hits = 0;
            for (size_t i = 0; i < n; i++)
                hits += simstore_distance(tmp[i], q) <= 3;
            double t2 = now_sec();
            sink = hits;
            if (t1 - t0 < best_copy)
                best_copy = t1 - t0;
            if (t2 - t1 < best_scan)
                best_scan = t2 - t1;
        }
        printf("\nN=2^%d (%zu distinct)  floor %.3f bits/fp  EF %.0f bits/fp  raw u64 64 bits/fp\n",
               lg, n, floor_bpf, ef_bpf);
        printf("baseline N=2^%d: memcpy of the u64 array %.0f M fps/s (%.1f GB/s); "
               "popcount scan (k=3) %.0f M fps/s\n",
               lg, n / best_copy / 1e6, n * 8.0 / best_copy / 1e9, n / best_scan / 1e6);
        printf("%-7s %1s %6s %8s %7s %7s %8s %7s %4s %6s %6s %6s %7s %8s %8s %9s\n", "N", "v", "B",
               "blk_bpf", "blk+fl", "idx_bpf", "file_bpf", "file+fl", "EF", "enc", "dec", "dec+ck",
               "scan_k3", "keyRAM", "probe_ns", "open_us");

        for (size_t bi = 0; bi < sizeof configs / sizeof configs[0]; bi++) {
            uint32_t block_bytes = configs[bi].block_bytes;
            table_params p;
            memset(&p, 0, sizeof p);
            p.block_bytes = block_bytes;
            p.prefix_bits = (uint8_t)lg;
            for (unsigned i = 0; i < 64; i++)
                p.perm[i] = (uint8_t)i;
            /* Best of two encodes: the first also pays for faulting in
             * fresh memory. */
            uint8_t *file = NULL;
            size_t size;
            double t0, t_enc = 1e9;
            for (int rep = 0; rep < 2; rep++) {
                free(file);
                t0 = now_sec();
                if (sims_table_encode_memory(&p, v, n, &file, &size)) {
                    fprintf(stderr, "encode failed: %s\n", simstore_last_error());
                    return 1;
                }
                double t = now_sec() - t0;
                t_enc = t < t_enc ? t : t_enc;
            }

            table_reader *r, *rck;
            double t_open = 1e9;
            for (int rep = 0; rep < 3; rep++) {
                t0 = now_sec();
                if (sims_table_reader_open_memory(file, size, 0, &r)) {
                    fprintf(stderr, "open failed: %s\n", simstore_last_error());
                    return 1;
                }
                double t = now_sec() - t0;
                t_open = t < t_open ? t : t_open;
                sims_table_reader_close(r);
            }
            if (sims_table_reader_open_memory(file, size, TABLE_SKIP_BLOCK_CHECKSUMS, &r) ||
                sims_table_reader_open_memory(file, size, 0, &rck)) {
                fprintf(stderr, "open failed: %s\n", simstore_last_error());
                return 1;
            }
            const table_info *in = sims_table_reader_info(r);
            size_t cap = (size_t)block_bytes * 8 + 1;
            uint64_t *buf = malloc(cap * sizeof *buf);
            double t_dec = 1e9, t_ck = 1e9, t_scan = 1e9;
            for (int rep = 0; rep < 3; rep++) {
                double t = decode_all(r, buf, cap, want_xor);
                t_dec = t < t_dec ? t : t_dec;
                t = decode_all(rck, buf, cap, want_xor);
                t_ck = t < t_ck ? t : t_ck;
                uint64_t acc = 0;
                t0 = now_sec();
                sims_table_reader_search(r, 0, UINT64_MAX, rng_next(), 3, count_emit, &acc);
                t = now_sec() - t0;
                sink = acc;
                t_scan = t < t_scan ? t : t_scan;
            }

            /* Probes: a prefix range of log2 N bits around a random query
             * (about one stored value in range), as one table of a store. */
            int probes = 200000;
            unsigned pbits = (unsigned)lg;
            uint64_t acc = 0;
            t0 = now_sec();
            for (int i = 0; i < probes; i++) {
                uint64_t q = rng_next();
                uint64_t lo = q & ~(UINT64_MAX >> pbits), hi = lo | (UINT64_MAX >> pbits);
                sims_table_reader_search(rck, lo, hi, q, 3, count_emit, &acc);
            }
            double t_probe = now_sec() - t0;
            sink = acc;

            double blk_bpf = (double)in->blocks_bytes * 8.0 / (double)n;
            double file_bpf = (double)size * 8.0 / (double)n;
            double idx_bpf = (double)in->index_bytes * 8.0 / (double)n;
            printf("2^%-5d %1u %6u %8.3f %+7.3f %7.3f %8.3f %+7.3f %4.0f %6.0f %6.0f %6.0f %7.0f "
                   "%8.4f %8.0f %9.1f\n",
                   lg, in->format_version, block_bytes, blk_bpf, blk_bpf - floor_bpf, idx_bpf,
                   file_bpf, file_bpf - floor_bpf, ef_bpf, n / t_enc / 1e6, n / t_dec / 1e6,
                   n / t_ck / 1e6, n / t_scan / 1e6, (double)in->key_ram_bytes / (double)n,
                   t_probe / probes * 1e9, t_open * 1e6);
            fflush(stdout);
            free(buf);
            sims_table_reader_close(r);
            sims_table_reader_close(rck);
            free(file);
        }
        free(v);
        free(tmp);
    }
    return 0;
}
