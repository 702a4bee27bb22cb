#!/usr/bin/env bash
# run.sh: rebuilds the quality benchmark's corpora from Debian packages and runs it: bench/quality/README.md.
#
#   bench/quality/run.sh [OUTDIR]      (default /tmp/simstore-quality)
#
# Needs a build of the tree in build/ (or $BUILD): the simstore command and
# build/bench/quality_features. Missing Debian packages are installed when
# run as root (after `apt-get update` once), otherwise named. Writes
# OUTDIR/corpora/ and OUTDIR/results/ (report.md, readme.md, results.json,
# results.tsv, edits.tsv) and prints the report.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-/tmp/simstore-quality}
build=${BUILD:-$root/build}
packages=(manpages-zh debian-reference-zh-cn python3.11-doc postgresql-doc-15 python3)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "run.sh: installing ${missing[*]}" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
  else
    echo "run.sh: missing Debian packages; as root: apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
fi
cmake --build "$build" --target simstore_cli quality_features -j 2 >/dev/null
/usr/bin/python3 "$here/corpora.py" "$out/corpora"
/usr/bin/python3 "$here/quality.py" "$out/corpora" "$out/results" --build "$build"
