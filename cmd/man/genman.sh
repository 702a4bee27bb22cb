#!/usr/bin/env bash
# genman.sh: the man pages simstore(1) and simstore-COMMAND(1), made by
# help2man from the one source of the text, each command's --help.
#   genman.sh SIMSTORE OUTDIR
# writes OUTDIR/simstore.1 and one OUTDIR/simstore-COMMAND.1 for every
# command `SIMSTORE --help` lists. SOURCE_DATE_EPOCH, when set, dates them.
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: genman.sh SIMSTORE OUTDIR" >&2
  exit 2
fi
bin=$1
out=$2
command -v help2man >/dev/null || { echo "genman.sh: help2man is missing (Debian package help2man)" >&2; exit 1; }
mkdir -p "$out"
version=$("$bin" version | head -n 1) # "simstore X.Y.Z (library X.Y.Z)"
commands=$("$bin" --help | awk '/^Commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }')
[ -n "$commands" ] || { echo "genman.sh: '$bin --help' lists no commands" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# help2man reads one line per usage ("Usage: A", "   or: B"); the help
# texts wrap long usages onto indented lines. help2man runs this wrapper,
# which joins each usage's lines (its first paragraph) and passes the rest.
cat >"$tmp/simstore" <<WRAP
#!/usr/bin/env bash
"$bin" "\$@" | awk '
    !done && /^\$/ { if (u != "") print u; done = 1 }
    done { print; next }
    /^Usage: / { u = \$0; next }
    /^ +simstore / { print u; sub(/^ +/, ""); u = "   or: " \$0; next }
    { sub(/^ +/, ""); u = u " " \$0 }
    END { if (!done && u != "") print u }'
exit "\${PIPESTATUS[0]}"
WRAP
chmod +x "$tmp/simstore"

# simstore(1): the overview, and every command's page under SEE ALSO.
{
  printf '[SEE ALSO]\n'
  first=1
  for c in $commands; do
    [ $first -eq 1 ] || printf ',\n'
    printf '.BR simstore\\-%s (1)' "$c"
    first=0
  done
  printf '\n.PP\nThe full manual, with the formats on disk: README.md and format/*.md in\n/usr/share/doc/simstore (or the source tree).\n'
} > "$tmp/main.h2m"
help2man --no-info --version-string="$version" --include="$tmp/main.h2m" \
  --name='a compressed on-disk store of simhash fingerprints and near-duplicate detection' \
  --output="$tmp/simstore.1" "$tmp/simstore"
mv "$tmp/simstore.1" "$out/simstore.1"

# simstore-COMMAND(1): the command's --help as the page; its one-line
# description (from simstore --help) as the NAME.
for c in $commands; do
  name=$("$bin" --help | awk -v c="$c" '$1 == c { $1 = ""; sub(/^ +/, ""); print; exit }')
  printf '[SEE ALSO]\n.BR simstore (1)\n' > "$tmp/cmd.h2m"
  help2man --no-info --version-string="$version" --include="$tmp/cmd.h2m" \
    --help-option="$c --help" --name="$name" --output="$tmp/page.1" "$tmp/simstore"
  upper=$(printf '%s' "$c" | tr '[:lower:]' '[:upper:]')
  # The title and NAME are the command's, not the program's.
  sed -e "s/^\\.TH SIMSTORE /.TH SIMSTORE\\\\-$upper /" \
    -e "/^\\.SH NAME/{n;s/^simstore \\\\-/simstore\\\\-$c \\\\-/}" \
    "$tmp/page.1" > "$out/simstore-$c.1"
done
