#!/usr/bin/env bash
# The test command: installs what is missing, checks that every C++ file is
# formatted with the repository's .clang-format (scripts/check_format.sh),
# then
#   1. builds with ASan+UBSan (build-asan-ubsan/) and runs the unit suite;
#   2. builds with TSan (build-tsan/) and runs the concurrency tests;
#   3. builds the libraries and the command with clang's -Wthread-safety as
#      errors (build-thread-safety/): the lock annotations of
#      core/thread_annotations.h are checked, nothing runs;
#   4. builds the libFuzzer targets with clang (build-fuzz/) and runs each
#      for a few seconds;
#   5. configures and builds build/ and runs every test except the
#      long-running `soak` label.
# EVENTFOLD_QUICK=1 skips stages 1-4 (not the format check). Extra arguments go to the last ctest:
#   bash scripts/test.sh [extra ctest arguments, e.g. -R Fold -V]
# The main ctest's summary is the last thing printed. Exits with its code, or
# 1 when it passed but an earlier stage failed (that stage's failure is
# printed where it happened and listed before stage 5).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/bootstrap.sh

failed=()

echo "== test.sh: format check =="
if ! bash scripts/check_format.sh; then
  echo "== test.sh: format check FAILED ==" >&2
  failed+=(format)
fi

# Each stage's build and test seconds, printed before stage 5: CI's budget
# is 90 minutes, and these say where it goes.
timings=()
# A stage: configure and build a preset of CMakePresets.json, run its test
# preset; a failure is recorded and the next stage runs.
run_preset() {
  local preset="$1"
  shift
  echo "== test.sh: stage ${preset} =="
  local start=${SECONDS} built
  if cmake --preset "${preset}" >/dev/null &&
    cmake --build --preset "${preset}" --parallel "$(nproc)"; then
    built=$((SECONDS - start))
    if ctest --preset "${preset}" --no-tests=error "$@"; then
      timings+=("${preset}: build ${built} s, tests $((SECONDS - start - built)) s")
      return 0
    fi
  fi
  timings+=("${preset}: FAILED after $((SECONDS - start)) s")
  echo "== test.sh: stage ${preset} FAILED ==" >&2
  failed+=("${preset}")
}

# A build-only stage: configure and build a preset (no test preset).
build_preset() {
  local preset="$1"
  echo "== test.sh: stage ${preset} =="
  local start=${SECONDS}
  if cmake --preset "${preset}" >/dev/null &&
    cmake --build --preset "${preset}" --parallel "$(nproc)"; then
    timings+=("${preset}: build $((SECONDS - start)) s")
    return 0
  fi
  timings+=("${preset}: FAILED after $((SECONDS - start)) s")
  echo "== test.sh: stage ${preset} FAILED ==" >&2
  failed+=("${preset}")
}

if [ "${EVENTFOLD_QUICK:-0}" != 1 ]; then
  # What each sanitizer stage leaves out, and why: DEVELOPERS.md.
  run_preset asan-ubsan
  run_preset tsan
  build_preset thread-safety
  run_preset fuzz
  if [ "${#failed[@]}" -ne 0 ]; then
    echo "== test.sh: FAILED stages: ${failed[*]} ==" >&2
  fi
  for t in "${timings[@]}"; do echo "== test.sh: ${t} =="; done
  echo "== test.sh: stage release (${SECONDS} s so far) =="
fi

# Keep the generator of an existing build/ (cmake refuses to switch it).
generator=(-G Ninja)
if [ -f build/CMakeCache.txt ]; then
  generator=()
fi
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build --parallel "$(nproc)"

status=0
ctest --test-dir build --output-on-failure --no-tests=error -j2 \
  -LE soak "$@" || status=$?
if [ "${status}" -eq 0 ] && [ "${#failed[@]}" -ne 0 ]; then
  status=1
fi
exit "${status}"
