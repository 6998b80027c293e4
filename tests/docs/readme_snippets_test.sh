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
#   - blocks that install (`apt-get`, `cmake --install`): the install test
#     (tests/install) installs the tree and builds and runs the README's
#     Embedding program against it.
# The block that starts the receiver runs with two changes a test needs: free
# ports instead of 8080/8081 (another process may hold those), and
# `feed --follow`, which runs until Ctrl-C, stopped after 5 s.
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

# A loopback port nothing listens on now (a connect is refused), below the
# kernel's ephemeral range, so that no client socket of a test running
# beside this one can hold it when the receiver binds.
ephemeral_low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
free_port() {
  local p
  while true; do
    p=$((10000 + RANDOM % (ephemeral_low - 10000)))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return
    fi
  done
}

echo "readme: making the demo store (what scripts/demo.sh ends with)"
build/tools/eventfold demo --data ./eventfold-data > demo.out

ran=0
for f in $(ls snippet-*.sh | sort -t- -k2 -n); do
  if grep -Eq 'scripts/|apt-get|cmake --install' "$f"; then
    echo "readme: skipped $f (installs or builds):"
    sed 's/^/    /' "$f"
    continue
  fi
  if grep -q 'eventfold serve' "$f"; then
    port=$(free_port) admin=$(free_port)
    while [ "$admin" = "$port" ]; do admin=$(free_port); done
    sed -i -e "s/127\.0\.0\.1:8080/127.0.0.1:${port}/g" -e "s/127\.0\.0\.1:8081/127.0.0.1:${admin}/g" \
      -e 's/^\(build\/tools\/eventfold feed .*--follow\)\(.*\)$/timeout 5 \1 || test $? -eq 124 \2/' "$f"
    # The receiver is stopped by the block's own `kill %1`; the bound on the
    # whole block keeps a hung one from holding the test.
    echo "wait" >> "$f"
  fi
  echo "readme: running $f:"
  sed 's/^/    /' "$f"
  # Pipes into head end early by design: only each line's exit code counts.
  if ! timeout 120 bash -e "$f" > "$f.out" 2>&1; then
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
