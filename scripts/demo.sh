#!/usr/bin/env bash
# The main job: builds the `eventfold` command and runs its demo against a
# store in ./eventfold-data (at the repository root).
#   bash scripts/demo.sh [extra arguments for `eventfold demo`]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/bootstrap.sh

generator=(-G Ninja)
if [ -f build/CMakeCache.txt ]; then
  generator=()
fi
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  --log-level=WARNING >/dev/null
cmake --build build --parallel "$(nproc)" --target eventfold-cli

exec build/tools/eventfold demo --data ./eventfold-data "$@"
