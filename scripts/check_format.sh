#!/usr/bin/env bash
# Fails when a tracked C++ file differs from what clang-format makes of it
# with the repository's .clang-format; lists each such file. Fix with
#   clang-format -i <file>
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v clang-format >/dev/null 2>&1; then
  echo "check_format: clang-format not found (scripts/bootstrap.sh installs it)" >&2
  exit 1
fi

bad=()
while IFS= read -r -d '' f; do
  if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
    bad+=("$f")
  fi
done < <(git ls-files -z -- '*.cc' '*.h')

if [ "${#bad[@]}" -ne 0 ]; then
  echo "check_format: ${#bad[@]} file(s) not formatted with .clang-format:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "check_format: run clang-format -i on them" >&2
  exit 1
fi
echo "check_format: all $(git ls-files -- '*.cc' '*.h' | wc -l) C++ files formatted"
