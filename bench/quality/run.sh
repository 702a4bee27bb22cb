#!/usr/bin/env bash
# run.sh: rebuilds the quality benchmark's corpora from Debian packages and runs it (issue 13's quality.py, or with `thresholds` issue 36's thresholds.py): bench/quality/README.md.
#
#   bench/quality/run.sh [OUTDIR] [quality|thresholds] [corpora.py options...]
#       (default /tmp/simstore-quality, quality)
#
# Needs a build of the tree in build/ (or $BUILD): the simstore command and
# build/bench/quality_features. Missing Debian packages are installed when
# run as root (after `apt-get update` once), otherwise named. Writes
# OUTDIR/corpora/ and OUTDIR/results/ (quality: report.md, readme.md,
# results.json, results.tsv, edits.tsv; thresholds: report.md, results.json,
# near.tsv) and prints the report. Further arguments go to corpora.py (as
# --max-sources 3000).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-/tmp/simstore-quality}
suite=${2:-quality}
shift $(( $# < 2 ? $# : 2 ))
build=${BUILD:-$root/build}
packages=(manpages-zh debian-reference-zh-cn python3.11-doc postgresql-doc-15 python3)
case $suite in
  quality) corpora=licenses,chinese,web,short ;;
  thresholds) corpora=templated,spaced_chinese,chinese,short; packages+=(wamerican) ;;
  *) echo "run.sh: unknown suite $suite (quality or thresholds)" >&2; exit 2 ;;
esac
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
/usr/bin/python3 "$here/corpora.py" "$out/corpora" --only "$corpora" "$@"
/usr/bin/python3 "$here/$suite.py" "$out/corpora" "$out/results" --build "$build" --only "$corpora"
