#!/usr/bin/env bash
# Builds and runs the whole test suite: once optimized, once under AddressSanitizer and
# UndefinedBehaviorSanitizer. Installs what it needs; safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
need_packages "${test_packages[@]}"
for preset in release asan; do
  echo "== $preset"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset"
  ctest --preset "$preset"
done
