#!/usr/bin/env bash
# Runs the README's fenced `sh` blocks, as written, in a fresh directory
# whose build/ is this build tree, so every command a newcomer copies is
# known to work.
#
# Skipped, and why:
#   - blocks that run scripts/ (demo.sh and test.sh install Debian packages
#     and build the tree; test.sh runs the whole suite): this test runs what
#     demo.sh ends with, `build/tools/eventfold demo --data ./eventfold-data`,
#     to make the store the later blocks look at;
#   - blocks that install (`apt-get`, `cmake --install`);
#   - blocks that start the long-running receiver (`eventfold serve`).
#
# Usage: readme_snippets_test.sh README.md BUILD_DIR
set -euo pipefail

readme=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
build=$(cd "$2" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/eventfold-readme-XXXXXX")
trap 'rm -rf "$work"' EXIT
ln -s "$build" "$work/build"
cd "$work"

# One file per block: snippet-1.sh, snippet-2.sh, ...
awk -v dir="$work" '
  /^```sh[[:space:]]*$/ { n++; inside = 1; next }
  /^```/ && inside { inside = 0; next }
  inside { print > (dir "/snippet-" n ".sh") }
' "$readme"

echo "readme: making the demo store (what scripts/demo.sh ends with)"
build/tools/eventfold demo --data ./eventfold-data > demo.out

ran=0
for f in $(ls snippet-*.sh | sort -t- -k2 -n); do
  if grep -Eq 'scripts/|apt-get|cmake --install|eventfold serve' "$f"; then
    echo "readme: skipped $f (installs, builds or serves):"
    sed 's/^/    /' "$f"
    continue
  fi
  echo "readme: running $f:"
  sed 's/^/    /' "$f"
  # Pipes into head end early by design: only each line's exit code counts.
  if ! bash -e "$f" > "$f.out" 2>&1; then
    echo "readme: $f failed:" >&2
    cat "$f.out" >&2
    exit 1
  fi
  ran=$((ran + 1))
done
if [ "$ran" -eq 0 ]; then
  echo "readme: no sh block ran: has the README changed its fences?" >&2
  exit 1
fi
echo "readme: $ran blocks ran"
