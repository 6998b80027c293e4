#!/usr/bin/env bash
# The test command: installs what is missing, configures and builds build/,
# then runs every test except the long-running `soak` label.
#   bash scripts/test.sh [extra ctest arguments, e.g. -R Fold -V]
# Exits with ctest's code; ctest's summary is the last thing printed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/bootstrap.sh

# Keep the generator of an existing build/ (cmake refuses to switch it).
generator=(-G Ninja)
if [ -f build/CMakeCache.txt ]; then
  generator=()
fi
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build --parallel "$(nproc)"

exec ctest --test-dir build --output-on-failure --no-tests=error -j2 \
  -LE soak "$@"
