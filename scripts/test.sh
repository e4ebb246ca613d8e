#!/usr/bin/env bash
# Builds and runs the whole test suite, tier by tier: optimized (with the installed-package
# consumer and the CUDA targets' build where nvcc exists); under AddressSanitizer and
# UndefinedBehaviorSanitizer; the threaded parts under ThreadSanitizer; the raw-MPI tests with
# MPICH; bounded libFuzzer runs; the API reference. After each tier, no new file in /dev/shm.
# Installs what it needs; safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
need_packages "${test_packages[@]}"
# Nothing a tier runs may leave a file in /dev/shm (shared memory is gradsync's own, with no
# name; MPI's segments must go too).
shm_before=$(ls -A /dev/shm 2>/dev/null | sort || true)
for preset in release asan tsan mpich fuzz; do
  echo "== $preset"
  start=$SECONDS
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset"
  ctest --preset "$preset"
  left=$(comm -13 <(echo "$shm_before") <(ls -A /dev/shm 2>/dev/null | sort || true))
  if [ -n "$left" ]; then
    echo "== $preset left files in /dev/shm:"
    echo "$left"
    exit 1
  fi
  echo "== $preset passed in $((SECONDS - start)) s"
done
echo "== docs"
cmake --build --preset release --target docs
echo "== all tiers passed"
