/* bench_faiss.cpp: simstore beside FAISS's binary hash indexes, on the same
 * fingerprints and queries, in the same run, one thread each.
 *
 * For each N (default 2^20 and 2^23) it draws N uniform 64-bit fingerprints
 * (the generator of bench_query) and Q queries (half a stored fingerprint
 * with 0..k bits flipped, half random), then measures, each system in a
 * child process of its own so that one's memory does not count against
 * another:
 *   - simstore: a fingerprint-only store built with one thread (its design
 *     chosen by the cost model), opened read-only, queried one at a time
 *     with simstore_query_fp;
 *   - FAISS IndexBinaryMultiHash, 4 maps of 16 bits (nflip 0) and 2 maps of
 *     32 bits (nflip 1), and IndexBinaryHash on the first 16 bits (nflip 3):
 *     the settings for which a range search is exact at k = 3 (4 x 16:
 *     a match within 3 bits agrees with the query on one whole map; 2 x 32:
 *     differs in at most 1 bit on one map; 16 first bits: at most 3), each
 *     queried one at a time with range_search(radius k + 1): FAISS keeps
 *     distances strictly below the radius.
 * Each system answers every query once untimed (a warm page cache and warm
 * caches for both), then again timed. It prints build time, query
 * p50/p99/mean, the resident memory the index adds (after building, or after
 * opening and querying, minus before), split into anonymous memory (heap:
 * FAISS's whole index) and mapped file pages (simstore's tables, from the
 * page cache, shared and reclaimable),
 * bytes per fingerprint (simstore: its table files; FAISS: the index as
 * faiss::write_index_binary writes it), and whether every answer (the set
 * of stored fingerprints within k) equals simstore's, and both equal a
 * brute-force scan on the first queries.
 *
 * --data FILE appends one line per system and N for bench/plots/plot.sh:
 *   log2n<TAB>system<TAB>build_s<TAB>p50_us<TAB>p99_us<TAB>mean_us<TAB>anon_mib<TAB>bytes_per_fp
 *   <TAB>file_mib
 *
 * Usage: bench_faiss [--sizes 20,23] [--queries 20000] [--k 3] [--dir DIR]
 *                    [--brute 1000] [--skip-hash] [--data FILE] */
#include "simstore.h"

#include <faiss/IndexBinaryHash.h>
#include <faiss/impl/AuxIndexStructures.h>
#include <faiss/index_io.h>
#include <omp.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <vector>

namespace
{

double now()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* The fingerprints and queries of bench_query (the same seeds). */
std::vector<uint64_t> make_fps(unsigned log2n)
{
    std::vector<uint64_t> v((size_t)1 << log2n);
    uint64_t s = 0xB0BA0000 + log2n;
    for (auto &x : v)
        x = splitmix(&s);
    return v;
}

std::vector<uint64_t> make_queries(const std::vector<uint64_t> &fps, size_t nq, unsigned k)
{
    std::vector<uint64_t> q(nq);
    uint64_t s = 0xC0FFEE;
    for (size_t i = 0; i < nq; i++) {
        if (i & 1) {
            q[i] = splitmix(&s);
        } else {
            uint64_t x = fps[splitmix(&s) % fps.size()];
            unsigned flips = (unsigned)(splitmix(&s) % (k + 1));
            for (unsigned f = 0; f < flips; f++)
                x ^= 1ULL << (splitmix(&s) % 64);
            q[i] = x;
        }
    }
    return q;
}

/* Resident memory from /proc/self/status: RssAnon (the heap: what an
 * in-memory index costs) or RssFile (mapped files: a store's tables, pages
 * of the page cache that other processes share and the kernel may drop). */
long rss_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    size_t len = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, len) == 0 && line[len] == ':' &&
            sscanf(line + len + 1, "%ld", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

/* One answer as a number: the distinct stored fingerprints within k, sorted,
 * hashed with their count (equal answers, equal numbers). */
uint64_t answer_hash(std::vector<uint64_t> &fps)
{
    std::sort(fps.begin(), fps.end());
    fps.erase(std::unique(fps.begin(), fps.end()), fps.end());
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ fps.size();
    for (uint64_t x : fps) {
        uint64_t s = h ^ x;
        h = splitmix(&s);
    }
    return h;
}

/* What a child reports to the parent through a pipe. */
struct report {
    int ok;
    double build_s;
    long rss_kib;      /* anonymous memory added */
    long rss_file_kib; /* mapped file pages added */
    double bytes_per_fp;
    double p50_us, p99_us, mean_us;
    uint64_t matches;
};

int write_all(int fd, const void *p, size_t n)
{
    const char *c = (const char *)p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

int read_all(int fd, void *p, size_t n)
{
    char *c = (char *)p;
    while (n > 0) {
        ssize_t r = read(fd, c, n);
        if (r <= 0)
            return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Run fn(report&, hashes&) in a child; its report and per-query answer
 * hashes come back through a pipe. */
template <typename Fn> bool in_child(size_t nq, report &rep, std::vector<uint64_t> &hashes, Fn fn)
{
    int fds[2];
    if (pipe(fds) != 0)
        return false;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        report r{};
        std::vector<uint64_t> h(nq);
        fn(r, h);
        int bad = write_all(fds[1], &r, sizeof r) || write_all(fds[1], h.data(), nq * 8);
        _exit(bad ? 1 : 0);
    }
    close(fds[1]);
    hashes.assign(nq, 0);
    bool ok = pid > 0 && read_all(fds[0], &rep, sizeof rep) == 0 &&
              read_all(fds[0], hashes.data(), nq * 8) == 0;
    close(fds[0]);
    int status = 0;
    if (pid > 0)
        waitpid(pid, &status, 0);
    return ok && rep.ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

void latency_summary(std::vector<double> &lat, report &r)
{
    double sum = 0;
    for (double x : lat)
        sum += x;
    std::sort(lat.begin(), lat.end());
    r.p50_us = lat[lat.size() / 2] * 1e6;
    r.p99_us = lat[(size_t)((double)lat.size() * 0.99)] * 1e6;
    r.mean_us = sum / (double)lat.size() * 1e6;
}

off_t file_bytes(const std::string &path)
{
    struct stat st;
    return stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

/* FAISS: build, write to measure its size, query one at a time. */
void run_faiss(const std::vector<uint64_t> &fps, const std::vector<uint64_t> &qs, unsigned k,
               int nhash, int bits, int nflip, const std::string &dir, report &r,
               std::vector<uint64_t> &hashes)
{
    omp_set_num_threads(1);
    long rss0 = rss_kib("RssAnon"), file0 = rss_kib("RssFile");
    double t0 = now();
    std::unique_ptr<faiss::IndexBinary> index;
    if (nhash > 0) {
        auto *mh = new faiss::IndexBinaryMultiHash(64, nhash, bits);
        mh->nflip = nflip;
        index.reset(mh);
    } else {
        auto *h = new faiss::IndexBinaryHash(64, bits);
        h->nflip = nflip;
        index.reset(h);
    }
    index->add((faiss::IndexBinary::idx_t)fps.size(), (const uint8_t *)fps.data());
    r.build_s = now() - t0;
    r.rss_kib = rss_kib("RssAnon") - rss0;
    r.rss_file_kib = rss_kib("RssFile") - file0;
    std::string path = dir + "/faiss.index";
    try {
        faiss::write_index_binary(index.get(), path.c_str());
        r.bytes_per_fp = (double)file_bytes(path) / (double)fps.size();
    } catch (const std::exception &) {
        r.bytes_per_fp = -1; /* this index has no writer */
    }
    unlink(path.c_str());
    std::vector<double> lat(qs.size());
    std::vector<uint64_t> found;
    for (size_t i = 0; i < qs.size(); i++) { /* warm-up: the same queries, untimed */
        faiss::RangeSearchResult res(1);
        index->range_search(1, (const uint8_t *)&qs[i], (int)k + 1, &res);
    }
    for (size_t i = 0; i < qs.size(); i++) {
        faiss::RangeSearchResult res(1);
        double t = now();
        index->range_search(1, (const uint8_t *)&qs[i], (int)k + 1, &res);
        lat[i] = now() - t;
        found.clear();
        for (size_t j = res.lims[0]; j < res.lims[1]; j++)
            found.push_back(fps[(size_t)res.labels[j]]);
        r.matches += found.size();
        hashes[i] = answer_hash(found);
    }
    latency_summary(lat, r);
    r.ok = 1;
}

/* simstore: the store built by the parent, opened here read-only. */
void run_simstore(const std::string &path, size_t n, const std::vector<uint64_t> &qs, unsigned k,
                  report &r, std::vector<uint64_t> &hashes)
{
    long rss0 = rss_kib("RssAnon"), file0 = rss_kib("RssFile");
    simstore *s;
    simstore_query *q;
    if (simstore_open(path.c_str(), SIMSTORE_OPEN_READONLY, &s) != 0 ||
        simstore_query_new(s, 0, &q) != 0) {
        fprintf(stderr, "bench_faiss: %s\n", simstore_last_error());
        return;
    }
    simstore_stats st;
    if (simstore_get_stats(s, &st) == 0)
        r.bytes_per_fp = (double)st.table_bytes / (double)n;
    std::vector<double> lat(qs.size());
    std::vector<uint64_t> found;
    for (size_t i = 0; i < qs.size(); i++) { /* warm-up: the same queries, untimed */
        const simstore_match *m;
        size_t count;
        if (simstore_query_fp(q, qs[i], k, &m, &count) != 0) {
            fprintf(stderr, "bench_faiss: query: %s\n", simstore_last_error());
            return;
        }
    }
    for (size_t i = 0; i < qs.size(); i++) {
        const simstore_match *m;
        size_t count;
        double t = now();
        int rc = simstore_query_fp(q, qs[i], k, &m, &count);
        lat[i] = now() - t;
        if (rc != 0) {
            fprintf(stderr, "bench_faiss: query: %s\n", simstore_last_error());
            return;
        }
        found.clear();
        for (size_t j = 0; j < count; j++)
            found.push_back(m[j].fp);
        r.matches += found.size();
        hashes[i] = answer_hash(found);
    }
    r.rss_kib = rss_kib("RssAnon") - rss0;
    r.rss_file_kib = rss_kib("RssFile") - file0;
    latency_summary(lat, r);
    simstore_query_free(q);
    simstore_close(s);
    r.ok = 1;
}

int build_store(const std::string &path, const std::vector<uint64_t> &fps, unsigned k,
                double *seconds)
{
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.k = k;
    o.fingerprint_only = 1;
    o.threads = 1;
    o.memory_bytes = (uint64_t)4 << 30;
    simstore_builder *b;
    double t0 = now();
    if (simstore_build_begin(path.c_str(), &o, &b))
        return -1;
    for (uint64_t x : fps)
        if (simstore_builder_add_fp(b, x)) {
            simstore_builder_abort(b);
            return -1;
        }
    int rc = simstore_builder_finish(b);
    *seconds = now() - t0;
    return rc;
}

FILE *data_file;

void print_row(const char *name, const report &r, const report &base, bool same, unsigned log2n)
{
    if (data_file)
        fprintf(data_file, "%u\t%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.1f\t%.3f\t%.1f\n", log2n, name,
                r.build_s, r.p50_us, r.p99_us, r.mean_us, (double)r.rss_kib / 1024.0,
                r.bytes_per_fp, (double)r.rss_file_kib / 1024.0);
    printf("  %-28s build %7.2f s  p50 %8.2f us  p99 %8.2f us  mean %8.2f us  anon +%7.1f MiB  "
           "file +%7.1f MiB  %6.2f B/fp  %s",
           name, r.build_s, r.p50_us, r.p99_us, r.mean_us, (double)r.rss_kib / 1024.0,
           (double)r.rss_file_kib / 1024.0, r.bytes_per_fp,
           same ? "answers identical" : "ANSWERS DIFFER");
    if (&r != &base)
        printf("  (p50 %.1fx simstore's)", r.p50_us / base.p50_us);
    printf("\n");
}

} // namespace

int main(int argc, char **argv)
{
    std::vector<unsigned> sizes = {20, 23};
    size_t nq = 20000, nbrute = 1000;
    unsigned k = 3;
    std::string dir = "/tmp";
    bool skip_hash = false;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--sizes" && i + 1 < argc) {
            sizes.clear();
            for (char *p = argv[++i]; *p;) {
                sizes.push_back((unsigned)strtoul(p, &p, 10));
                if (*p == ',')
                    p++;
                else if (*p)
                    break;
            }
        } else if (a == "--queries" && i + 1 < argc) {
            nq = strtoull(argv[++i], nullptr, 10);
        } else if (a == "--k" && i + 1 < argc) {
            k = (unsigned)strtoul(argv[++i], nullptr, 10);
        } else if (a == "--dir" && i + 1 < argc) {
            dir = argv[++i];
        } else if (a == "--brute" && i + 1 < argc) {
            nbrute = strtoull(argv[++i], nullptr, 10);
        } else if (a == "--skip-hash") {
            skip_hash = true;
        } else if (a == "--data" && i + 1 < argc) {
            data_file = fopen(argv[++i], "a");
            if (!data_file) {
                perror(argv[i]);
                return 1;
            }
        } else {
            fprintf(stderr,
                    "usage: bench_faiss [--sizes 20,23] [--queries 20000] [--k 3] [--dir DIR] "
                    "[--brute 1000] [--skip-hash] [--data FILE]\n");
            return 2;
        }
    }
    if (k != 3) {
        fprintf(stderr, "bench_faiss: the FAISS settings here are exact for k = 3 only\n");
        return 2;
    }
    if (nq < 2 || nbrute > nq)
        nbrute = nq < 2 ? 0 : nq;
    int failures = 0;
    printf("bench_faiss: k = %u, %zu queries (half near a stored fingerprint), one at a time, "
           "one thread each; FAISS range_search radius %u\n",
           k, nq, k + 1);
    for (unsigned log2n : sizes) {
        std::vector<uint64_t> fps = make_fps(log2n);
        std::vector<uint64_t> qs = make_queries(fps, nq, k);
        size_t n = fps.size();
        printf("N = 2^%u (%zu fingerprints)\n", log2n, n);
        fflush(stdout);

        /* The reference: a brute-force scan of the first queries. */
        std::vector<uint64_t> brute(nbrute);
        double tb = now();
        std::vector<uint64_t> found;
        for (size_t i = 0; i < nbrute; i++) {
            found.clear();
            for (uint64_t x : fps)
                if ((unsigned)__builtin_popcountll(x ^ qs[i]) <= k)
                    found.push_back(x);
            brute[i] = answer_hash(found);
        }
        double brute_us = nbrute ? (now() - tb) / (double)nbrute * 1e6 : 0;

        std::string store = dir + "/bench_faiss_" + std::to_string(log2n) + ".store";
        std::string rm = "rm -rf '" + store + "'";
        if (system(rm.c_str()) != 0)
            return 1;
        report simrep{}, rep{};
        std::vector<uint64_t> simh, h;
        double build_s = 0;
        if (build_store(store, fps, k, &build_s) != 0 ||
            !in_child(nq, simrep, simh, [&](report &r, std::vector<uint64_t> &hs) {
                run_simstore(store, n, qs, k, r, hs);
            })) {
            fprintf(stderr, "bench_faiss: simstore at 2^%u failed: %s\n", log2n,
                    simstore_last_error());
            return 1;
        }
        simrep.build_s = build_s;
        bool sim_ok = std::equal(brute.begin(), brute.end(), simh.begin());
        failures += !sim_ok;
        print_row("simstore", simrep, simrep, sim_ok, log2n);
        fflush(stdout);

        struct {
            const char *name;
            int nhash, bits, nflip;
        } peers[] = {
            {"FAISS MultiHash 4x16 nflip 0", 4, 16, 0},
            {"FAISS MultiHash 2x32 nflip 1", 2, 32, 1},
            {"FAISS Hash b=16 nflip 3", 0, 16, 3},
        };
        for (auto &p : peers) {
            if (skip_hash && p.nhash == 0)
                continue;
            rep = report{};
            if (!in_child(nq, rep, h, [&](report &r, std::vector<uint64_t> &hs) {
                    run_faiss(fps, qs, k, p.nhash, p.bits, p.nflip, dir, r, hs);
                })) {
                printf("  %-28s failed\n", p.name);
                failures++;
                continue;
            }
            bool same = h == simh;
            failures += !same;
            print_row(p.name, rep, simrep, same, log2n);
            fflush(stdout);
        }
        printf("  %-28s %9.2f us a query (the first %zu queries; every answer above equals it: "
               "%s)\n",
               "brute-force scan", brute_us, nbrute, sim_ok ? "yes" : "NO");
        if (system(rm.c_str()) != 0)
            return 1;
    }
    if (data_file && fclose(data_file) != 0) {
        perror("bench_faiss: --data");
        return 1;
    }
    return failures ? 1 : 0;
}
