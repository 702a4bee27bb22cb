#!/usr/bin/python3
"""build_scaling.py: build time and peak memory of `simstore build` against N.

For each N it pipes N uniform fingerprints from gen_fingerprints (raw u64)
into a fingerprint-only build (k = 3, the automatic design, --memory as
given, every core) and records the build's wall time and peak resident
memory (the child's ru_maxrss), beside a baseline measured in the same run:
the generator alone into /dev/null. It prints one line per N and, with
--data FILE, writes them as TSV for bench/plots/plot.sh:
  log2n  build_s  peak_rss_mib  gen_s  table_bytes  bits_per_fp_per_table  floor_bits

Usage: build_scaling.py BUILD_DIR STORE_DIR [--sizes 20,22,24,26] [--memory 1G] [--data FILE]
"""
import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import time


def child_maxrss_kib():
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("store_dir")
    ap.add_argument("--sizes", default="20,22,24,26")
    ap.add_argument("--memory", default="1G")
    ap.add_argument("--data")
    a = ap.parse_args()
    gen = os.path.join(a.build, "bench", "gen_fingerprints")
    simstore = os.path.join(a.build, "bench", "simstore")
    if not os.access(simstore, os.X_OK):
        simstore = os.path.join(a.build, "simstore")
    for p in (gen, simstore):
        if not os.access(p, os.X_OK):
            sys.exit(f"build_scaling.py: {p} is missing: build the tree first")
    rows = []
    print(f"build_scaling: fingerprint-only builds, k = 3, --memory {a.memory}, "
          f"{os.cpu_count()} cores; baseline: the generator alone")
    for lg in (int(x) for x in a.sizes.split(",")):
        store = os.path.join(a.store_dir, f"scaling-{lg}.store")
        shutil.rmtree(store, ignore_errors=True)
        t0 = time.monotonic()
        with open(os.devnull, "wb") as null:
            subprocess.run([gen, "--count", f"2^{lg}", "--format", "u64"], stdout=null, check=True)
        gen_s = time.monotonic() - t0
        # ru_maxrss of the children is the largest of any child so far: each
        # build runs in a fresh wrapper whose own maximum is reported back.
        t0 = time.monotonic()
        out = subprocess.run(
            [sys.executable, "-c",
             "import resource, subprocess, sys\n"
             "g = subprocess.Popen([sys.argv[1], '--count', sys.argv[2], '--format', 'u64'],\n"
             "                     stdout=subprocess.PIPE)\n"
             "b = subprocess.run(sys.argv[3:], stdin=g.stdout)\n"
             "g.stdout.close(); g.wait()\n"
             "if g.returncode or b.returncode: sys.exit(1)\n"
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n",
             gen, "2^%d" % lg,
             simstore, "build", store, "--fingerprint-only", "--format", "u64",
             "--memory", a.memory, "--quiet", "-"],
            check=True, capture_output=True, text=True)
        build_s = time.monotonic() - t0
        rss_mib = int(out.stdout.split()[-1]) / 1024.0
        st = json.loads(subprocess.run([simstore, "stats", store, "--json"], check=True,
                                       capture_output=True, text=True).stdout)
        n = st["fingerprints"]
        bpf = 8.0 * st["table_bytes"] / n / st["tables"]
        floor = 64 - math.log2(n) + 1.4426950408889634
        print(f"N = 2^{lg}: build {build_s:8.2f} s, peak RSS {rss_mib:8.1f} MiB, "
              f"{bpf:.3f} bits/fp per table (floor {floor:.3f}); "
              f"generator alone {gen_s:.2f} s")
        sys.stdout.flush()
        rows.append((lg, build_s, rss_mib, gen_s, st["table_bytes"], bpf, floor))
        shutil.rmtree(store, ignore_errors=True)
    if a.data:
        with open(a.data, "w") as f:
            for r in rows:
                f.write("%d\t%.3f\t%.1f\t%.3f\t%d\t%.4f\t%.4f\n" % r)


if __name__ == "__main__":
    main()
