#!/usr/bin/env bash
# Builds and runs the whole test suite, tier by tier: optimized (with the installed-package
# consumer and the CUDA targets' build where nvcc exists); under AddressSanitizer and
# UndefinedBehaviorSanitizer; the threaded parts under ThreadSanitizer; the raw-MPI tests with
# MPICH; bounded libFuzzer runs; the API reference. After each tier, no new file in /dev/shm.
# Installs what it needs; safe to rerun.
#
# While a tier's tests run, the next tier builds at idle priority (SCHED_IDLE): the tests
# wait on links, deadlines and processes for much of their time, and the build takes only
# the cycles they leave, so their timings are theirs. Its output follows the tests'.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
need_packages "${test_packages[@]}"
tiers=(release asan tsan mpich fuzz)
logs=$(mktemp -d /tmp/gradsync_test_logs.XXXXXX)
building=""  # the background build's process group
stop_building() {
  if [ -n "$building" ]; then
    kill -- "-$building" 2>/dev/null || true
    wait "$building" 2>/dev/null || true
    building=""
  fi
}
trap 'stop_building; rm -rf "$logs"' EXIT
build() { cmake --preset "$1" >/dev/null && cmake --build --preset "$1"; }

# Nothing a tier runs may leave a file in /dev/shm (shared memory is gradsync's own, with no
# name; MPI's segments must go too).
shm_before=$(ls -A /dev/shm 2>/dev/null | sort || true)
for i in "${!tiers[@]}"; do
  preset=${tiers[$i]}
  echo "== $preset"
  start=$SECONDS
  if [ -n "$building" ]; then
    status=0
    wait "$building" || status=$?
    building=""
    cat "$logs/$preset"
    [ "$status" -eq 0 ] || { echo "== $preset: the build failed"; exit 1; }
  else
    build "$preset"
  fi
  next=${tiers[$((i + 1))]:-}
  if [ -n "$next" ]; then
    setsid chrt --idle 0 bash -c "$(declare -f build); build $next" >"$logs/$next" 2>&1 &
    building=$!
  fi
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
