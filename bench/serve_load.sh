#!/usr/bin/env bash
# serve_load.sh: a load test of `simstore serve` with wrk on loopback (issue
# 15, item 5): k = 3 GET queries, POST text queries, and a 90/10 mix of GET
# queries and POST /v1/documents insert-if-new, and batches of documents
# (POST /v1/documents with "documents", insert-if-new), each at a few
# connection counts; requests/s and latency p50/p99/p999 beside the in-process rate of
# simstore_query_fp on the same store and the same queries, measured in the
# same run (bench_serve_baseline); the server's resident memory beside that
# plain reader's plus the memtable limit; and, for the mix, that every
# answered insert survives a kill -9 (the next open replays the log).
#
# The store has 2^LOG2N documents (ids d0, d1, ..., uniform random
# fingerprints from gen_fingerprints, built from TSV: no sketches, so both
# text queries and fingerprint inserts are accepted). It is built once under
# DIR and reused; each run serves a fresh copy of it (the mix writes).
# wrk is a bench-only dependency (Debian: apt-get install wrk); its Lua
# scripts are in bench/wrk/.
#
# Usage: bench/serve_load.sh [--build DIR] [--dir DIR] [--log2n N]
#            [--duration SECONDS] [--connections "16 64"] [--server-threads T]
#            [--memtable SIZE] [--pin] [--scenarios "get text mix batch"]
#            [--batch-docs N]
#   --build    the build directory (default: build beside bench/)
#   --dir      stores, inputs, logs (default /tmp/simstore-serve-load)
#   --log2n    log2 of the document count (default 23)
#   --memtable the server's --memtable (default 2M: small enough that the
#              mix's inserts flush it at least once, so the peak memory
#              measured includes a flush)
#   --pin      server on CPU 0, wrk on CPU 1 (taskset); default: unpinned
#   --scenarios  which runs (default "get text mix"; "batch": POSTs of
#              --batch-docs documents each, default 1000, with a request
#              timeout of 120 s)
# Before the measured runs, 2 s of GET queries at the largest connection
# count warm the server (page cache, mappings, per-thread contexts); that
# run is printed but not counted.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$here/../build
dir=/tmp/simstore-serve-load
log2n=23
duration=10
connections="16 64"
server_threads=2
memtable=2M
pin=0
scenarios="get text mix"
batch_docs=1000
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --log2n) log2n=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --connections) connections=$2; shift 2 ;;
    --server-threads) server_threads=$2; shift 2 ;;
    --memtable) memtable=$2; shift 2 ;;
    --pin) pin=1; shift ;;
    --scenarios) scenarios=$2; shift 2 ;;
    --batch-docs) batch_docs=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--dir DIR] [--log2n N] [--duration S] [--connections \"16 64\"] [--server-threads T] [--memtable SIZE] [--pin] [--scenarios \"get text mix batch\"] [--batch-docs N]" >&2; exit 2 ;;
    esac
done
command -v wrk > /dev/null || { echo "$0: wrk is not installed (apt-get install wrk)" >&2; exit 1; }
simstore=$build/simstore
[ -x "$build/bench/simstore" ] && simstore=$build/bench/simstore
for tool in "$simstore" "$build/bench/gen_fingerprints" "$build/bench/bench_serve_baseline"; do
    [ -x "$tool" ] || { echo "$0: no $tool: configure with -DSIMSTORE_BENCH=ON and build first, or give --build DIR" >&2; exit 1; }
done
n=$((1 << log2n))
mkdir -p "$dir"
store=$dir/store-2^$log2n
inputs=$dir/inputs-2^$log2n
serve_copy=$dir/serving.store
server_cpu="" wrk_cpu=""
if [ "$pin" = 1 ]; then
    server_cpu="taskset -c 0" wrk_cpu="taskset -c 1"
fi

# ---- The store and the inputs ------------------------------------------------
if ! "$simstore" stats "$store" --json 2> /dev/null | grep -q "\"documents\":$n,"; then
    echo "building $store: 2^$log2n documents from gen_fingerprints (TSV) ..."
    start=$(date +%s.%N)
    "$build/bench/gen_fingerprints" --count "2^$log2n" --format tsv |
        "$simstore" build "$store" --replace --format tsv --quiet - > /dev/null
    echo "  built in $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
fi
if [ ! -s "$inputs/queries.hex" ]; then
    # 2^16 stored fingerprints sampled evenly make the hits.
    stride=$((n > 65536 ? n / 65536 : 1))
    "$build/bench/gen_fingerprints" --count "2^$log2n" --format hex |
        awk -v s="$stride" '(NR - 1) % s == 0' | python3 "$here/wrk/make_inputs.py" "$inputs"
fi

# ---- Helpers -------------------------------------------------------------------
status_kib() { # PID FIELD
    awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"
}
# The largest RssAnon seen while the sampler runs (every 0.1 s) goes to FILE.
sample_rss() { # PID FILE
    local max=0 v
    while kill -0 "$1" 2> /dev/null; do
        v=$(status_kib "$1" RssAnon 2> /dev/null || echo 0)
        [ -n "$v" ] && [ "$v" -gt "$max" ] && max=$v && echo "$max" > "$2"
        sleep 0.1
    done
}
server_pid=""
start_server() { # STORE
    : > "$dir/serve.out"
    $server_cpu "$simstore" serve "$1" --listen 127.0.0.1:0 --threads "$server_threads" \
        --memtable "$memtable" --log "$dir/access.log" > "$dir/serve.out" 2> "$dir/serve.err" &
    server_pid=$!
    for _ in $(seq 1 600); do
        port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$dir/serve.out")
        [ -n "$port" ] && break
        kill -0 "$server_pid" 2> /dev/null || { cat "$dir/serve.err" >&2; exit 1; }
        sleep 0.1
    done
    url=http://127.0.0.1:$port
}
stats_field() { # JSON FIELD (the first number after "FIELD":)
    sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p" <<< "$1" | head -1
}
field() { # LINE KEY: the value of KEY=VALUE in a WRK or BASELINE line
    sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<< " $1"
}
ms() { awk -v u="$1" 'BEGIN { printf "%.2f ms", u / 1000 }'; }

# ---- The in-process baseline (before the server, so alone on the machine) ---------
echo "serve load: 2^$log2n documents ($n), k=3, loopback; simstore serve --threads $server_threads" \
    "--memtable $memtable --log FILE; wrk 4.1 1 thread, $duration s a run, connections: $connections;" \
    "$(nproc) cores$([ "$pin" = 1 ] && echo ', server pinned to CPU 0 and wrk to CPU 1'); load average" \
    "$(cut -d' ' -f1-3 /proc/loadavg) at the start"
baseline=$("$build/bench/bench_serve_baseline" "$store" "$inputs/queries.hex" "$inputs/texts.txt" --seconds 3)
b1=$(grep '^BASELINE fp threads=1' <<< "$baseline")
b2=$(grep '^BASELINE fp threads=2' <<< "$baseline")
bt=$(grep '^BASELINE text' <<< "$baseline")
brss=$(grep '^BASELINE rss' <<< "$baseline")
base_qps=$(field "$b1" qps)
echo "baseline, in process (simstore_query_fp, the same store and queries: half hits with 0..3 bits" \
    "flipped, half random): $base_qps queries/s on 1 thread (p50 $(field "$b1" p50_us) us, p99" \
    "$(field "$b1" p99_us) us, p999 $(field "$b1" p999_us) us), $(field "$b2" qps) on 2 threads;" \
    "texts (simstore_query_text, 40..80 words): $(field "$bt" qps) queries/s on 1 thread" \
    "(p50 $(field "$bt" p50_us) us); reader RSS $(field "$brss" after_kib) KiB" \
    "(RssAnon $(field "$brss" after_anon_kib) KiB)"

# ---- The server ------------------------------------------------------------------
rm -rf "$serve_copy"
cp -a "$store" "$serve_copy"
: > "$dir/access.log"
start_server "$serve_copy"
peak_file=$dir/peak_anon_kib
echo 0 > "$peak_file"
sample_rss "$server_pid" "$peak_file" &
sampler=$!
rss_start=$(status_kib "$server_pid" VmRSS) anon_start=$(status_kib "$server_pid" RssAnon)
cd "$here/wrk"
max_c=$(tr ' ' '\n' <<< "$connections" | sort -n | tail -1)
w=$($wrk_cpu wrk -t1 -c"$max_c" -d2s --timeout 5s -s query_get.lua "$url" -- "$inputs/queries.hex" 3 |
    grep '^WRK')
echo "warm-up (not counted): GET /v1/query k=3, $max_c connections, 2 s: $(printf '%.0f' "$(field "$w" rps)")" \
    "requests/s, p99 $(ms "$(field "$w" p99_us)"), max $(ms "$(field "$w" max_us)")"
anon_before_writes=""
for scenario in $scenarios; do
    for c in $connections; do
        if { [ "$scenario" = mix ] || [ "$scenario" = batch ]; } && [ -z "$anon_before_writes" ]; then
            anon_before_writes=$(status_kib "$server_pid" RssAnon)
            flushes_before_writes=0
        fi
        case $scenario in
        get) what="GET /v1/query k=3"
            args=(-s query_get.lua "$url" -- "$inputs/queries.hex" 3) ;;
        text) what="POST /v1/query text"
            args=(-s query_text.lua "$url" -- "$inputs/texts.jsonl") ;;
        mix) what="90/10 GET query / POST insert-if-new"
            args=(-s mix.lua "$url" -- "$inputs/queries.hex" "$(date +%s)-$c" 3) ;;
        batch) what="POST /v1/documents, batches of $batch_docs insert-if-new"
            args=(-s batch.lua "$url" -- "$(date +%s)-$c" "$batch_docs" 3) ;;
        *) echo "unknown scenario $scenario" >&2; exit 2 ;;
        esac
        timeout=5s
        [ "$scenario" = batch ] && timeout=120s
        before=$(curl -s "$url/v1/stats")
        out=$($wrk_cpu wrk -t1 -c"$c" -d"${duration}s" --timeout "$timeout" "${args[@]}")
        after=$(curl -s "$url/v1/stats")
        w=$(grep '^WRK' <<< "$out") || { echo "$out" >&2; exit 1; }
        rps=$(field "$w" rps)
        errors=$(($(field "$w" non2xx) + $(field "$w" connect_errors) + $(field "$w" read_errors) +
            $(field "$w" write_errors) + $(field "$w" timeouts)))
        extra=""
        if [ "$scenario" = mix ] || [ "$scenario" = batch ]; then
            inserts=$(($(stats_field "$after" inserts) - $(stats_field "$before" inserts)))
            syncs=$(($(stats_field "$after" wal_syncs) - $(stats_field "$before" wal_syncs)))
            flushes=$(($(stats_field "$after" flushes) - $(stats_field "$before" flushes)))
            extra="; $inserts inserts ($(awk -v a="$inserts" -v s="$w" 'BEGIN { split(s, x, "seconds="); split(x[2], y, " "); printf "%.0f", a / y[1] }')/s) in $syncs log fsyncs, $flushes flushes"
        fi
        ratio="($(awk -v r="$rps" -v b="$base_qps" 'BEGIN { printf "%.3f", r / b }')x the in-process rate on 1 thread)"
        [ "$scenario" = batch ] && ratio="(of $batch_docs documents each)"
        echo "$what, $c connections: $(printf '%.0f' "$rps") requests/s $ratio, p50 $(ms "$(field "$w" p50_us)"), p99 $(ms "$(field "$w" p99_us)")," \
            "p999 $(ms "$(field "$w" p999_us)"); $(field "$w" requests) requests, $errors errors" \
            "(non-2xx $(field "$w" non2xx), socket $(($(field "$w" connect_errors) + $(field "$w" read_errors) + $(field "$w" write_errors))), timeouts $(field "$w" timeouts))$extra"
    done
done
cd - > /dev/null
rss_end=$(status_kib "$server_pid" VmRSS) anon_end=$(status_kib "$server_pid" RssAnon)
hwm=$(status_kib "$server_pid" VmHWM)
final=$(curl -s "$url/v1/stats")
acked=$(stats_field "$final" inserts)
memtable_bytes=$(stats_field "$final" memtable_bytes)
memtable_docs=$(stats_field "$final" memtable_documents)
# kill -9: every insert answered must come back from the log.
{ kill -9 "$server_pid"; wait "$server_pid" || true; } 2> /dev/null
wait "$sampler" 2> /dev/null || true
peak_anon=$(cat "$peak_file")
memtable_kib=$(numfmt --from=iec "$memtable" | awk '{ printf "%d", $1 / 1024 }')
reader_anon=$(field "$brss" after_anon_kib)
flushes=$(stats_field "$final" flushes)
[ -n "$anon_before_writes" ] || anon_before_writes=$anon_end
echo "server memory (anonymous, RssAnon, sampled every 0.1 s): the plain reader's $reader_anon KiB;" \
    "the server's $anon_start KiB after start, $anon_before_writes KiB after the queries = the" \
    "reader's + $((anon_before_writes - reader_anon)) KiB (threads, the CJK dictionary, query" \
    "contexts); peak $peak_anon KiB = that + the memtable limit $memtable_kib KiB +" \
    "$((peak_anon - anon_before_writes - memtable_kib)) KiB after $acked inserts in $flushes" \
    "$([ "$flushes" = 1 ] && echo flush || echo flushes)$([ "$flushes" -gt 0 ] &&
        awk -v g="$((peak_anon - anon_before_writes))" -v a="$((acked - memtable_docs))" -v f="$flushes" 'BEGIN {
            printf " (%.0f documents each: %.1f KiB more per document of a flush)", a / f, g / (a / f) }');" \
    "memtable $((memtable_bytes / 1024)) KiB at the end. Mapped store pages (RssFile, in the page" \
    "cache): server $((rss_end - anon_end)) KiB, reader $(($(field "$brss" after_kib) - reader_anon)) KiB;" \
    "server VmRSS $rss_start KiB after start, $rss_end KiB at the end, peak $hwm KiB"
start_server "$serve_copy"
replay=$(curl -s "$url/v1/stats")
kill -TERM "$server_pid"
rc=0
wait "$server_pid" || rc=$?
docs=$(($(stats_field "$replay" documents) + $(stats_field "$replay" memtable_documents)))
echo "after kill -9 and a restart: $(stats_field "$replay" replayed) log records replayed, $docs" \
    "documents = $n + $((docs - n)) (inserts answered: $acked): $(if [ $((docs - n)) = "$acked" ]; then
        echo every answered insert is there
    elif [ $((docs - n)) -gt "$acked" ]; then
        # A request still in flight when wrk stopped: decided, durable, not yet answered.
        echo "every answered insert is there, and $((docs - n - acked)) decided but not answered before the kill"
    else echo MISMATCH; fi); SIGTERM exit status $rc"
