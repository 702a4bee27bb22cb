#!/usr/bin/env bash
# plot.sh: the benchmark charts, drawn with gnuplot (Debian gnuplot-nox)
# from the data files the benchmarks write (bench/plots/run.sh makes them):
#   DATA/query.tsv    bench_faiss --data: query latency against N, simstore
#                     beside FAISS and brute force -> query_latency.png
#   DATA/codec.txt    bench_codec's output: bits per fingerprint of a table
#                     file against the floor -> bits_per_fp.png
#   DATA/build.tsv    build_scaling.py --data: build time and peak memory
#                     against N -> build.png
#   DATA/quality.tsv  bench/quality's results.tsv: recall per Jaccard band,
#                     per corpus -> quality.png
# Each chart is drawn when its data file is there.
# Usage: bench/plots/plot.sh DATA_DIR OUT_DIR
set -euo pipefail
data=${1:?usage: plot.sh DATA_DIR OUT_DIR}
out=${2:?usage: plot.sh DATA_DIR OUT_DIR}
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot is missing (Debian package gnuplot-nox)" >&2; exit 1; }
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
drawn=0
term="set terminal pngcairo size 1000,600 noenhanced font 'sans,10'"
# build.tsv's and quality.tsv's columns are tab-separated; names have spaces.

if [ -f "$data/query.tsv" ]; then
    # One block per system, N ascending.
    awk -F'\t' '{ print > ("'"$tmp"'/q_" $2) }' "$data/query.tsv"
    plots=""
    color=1
    for f in "$tmp"/q_*; do
        sort -n -o "$f" "$f"
        name=${f#"$tmp"/q_}
        plots="$plots${plots:+, }'$f' using 1:4 with linespoints lw 2 lc $color title '$name', '$f' using 1:5 with lines dt 2 lc $color notitle"
        color=$((color + 1))
    done
    gnuplot <<GP
$term
set output '$out/query_latency.png'
set datafile separator '\t'
set title 'k = 3 query latency, one thread (p50 solid, p99 dashed): simstore beside FAISS binary hash indexes'
set xlabel 'N (log2 of the number of fingerprints)'
set ylabel 'microseconds per query'
set logscale y
set grid
set key outside bottom center horizontal
plot $plots
GP
    drawn=$((drawn + 1))
fi

if [ -f "$data/codec.txt" ]; then
    # Lines "2^LG V B blk_bpf blk+fl idx_bpf file_bpf file+fl EF ...".
    awk '$1 ~ /^2\^/ { lg = substr($1, 3); print lg, $2, $3, $7, 64 - lg + 1.4426950408889634, $9 }' \
        "$data/codec.txt" >"$tmp/codec"
    plots="'$tmp/codec' using 1:(\$6 - \$5) with lines dt 3 lw 2 lc rgb 'gray' title 'Elias-Fano 2 + ceil(log2(2^64/N))'"
    plots="$plots, 0.6 with lines dt 2 lc rgb 'red' title 'target: floor + 0.6 (format 2, 512-byte blocks)'"
    for cfg in "2 512" "2 1024" "1 512" "1 1024"; do
        set -- $cfg
        awk -v v="$1" -v b="$2" '$2 == v && $3 == b' "$tmp/codec" >"$tmp/codec_$1_$2"
        [ -s "$tmp/codec_$1_$2" ] || continue
        plots="$plots, '$tmp/codec_$1_$2' using 1:(\$4 - \$5) with linespoints lw 2 title 'table format $1, $2-byte blocks'"
    done
    gnuplot <<GP
$term
set output '$out/bits_per_fp.png'
set title 'one table file (blocks, index, header): bits per fingerprint above the floor 64 - log2 N + 1.443'
set xlabel 'N (log2 of the number of uniform random fingerprints)'
set ylabel 'bits per fingerprint above the floor'
set yrange [0:*]
set grid
set key outside bottom center horizontal
plot $plots
GP
    drawn=$((drawn + 1))
fi

if [ -f "$data/build.tsv" ]; then
    gnuplot <<GP
$term
set output '$out/build.png'
set multiplot layout 1,2 title 'simstore build (fingerprint-only, k = 3): time and peak memory against N'
set xlabel 'N (log2 of the number of fingerprints)'
set grid
set key top left
set logscale y
set ylabel 'seconds'
plot '$data/build.tsv' using 1:2 with linespoints lw 2 title 'build', '$data/build.tsv' using 1:4 with linespoints title 'generator alone (baseline)'
set ylabel 'MiB'
plot '$data/build.tsv' using 1:3 with linespoints lw 2 title 'peak resident memory'
unset multiplot
GP
    drawn=$((drawn + 1))
fi

if [ -f "$data/quality.tsv" ]; then
    # Recall per band for a few methods, one panel per corpus.
    methods=("simstore v2 k=3" "simstore v2 k=7 minhash256 cjk-bigram sim>=0.9" "MinHash LSH t=0.9 (b=5, r=25)")
    corpora=$(awk -F'\t' 'NR > 1 { print $1 }' "$data/quality.tsv" | awk '!seen[$0]++')
    script="$term
set output '$out/quality.png'
set multiplot layout 2,2 title 'recall per Jaccard band of the exact shingle Jaccard similarity J (bench/quality)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set yrange [0:1.05]
set grid ytics
set key outside bottom center horizontal font ',8'
set ylabel 'recall'
set datafile separator '\t'"
    for c in $corpora; do
        i=0
        plots=""
        for m in "${methods[@]}"; do
            awk -F'\t' -v c="$c" -v m="$m" '$1 == c && $2 == m && $3 !~ /^precision/ { print $3 "\t" $6 }' "$data/quality.tsv" >"$tmp/quality_${c}_$i"
            if [ -s "$tmp/quality_${c}_$i" ]; then
                plots="$plots${plots:+, }'$tmp/quality_${c}_$i' using 2:xtic(1) title '$m'"
            fi
            i=$((i + 1))
        done
        [ -n "$plots" ] || continue
        script="$script
set title '$c'
plot $plots"
    done
    script="$script
unset multiplot"
    gnuplot <<<"$script"
    drawn=$((drawn + 1))
fi

echo "plot.sh: $drawn chart(s) in $out"
