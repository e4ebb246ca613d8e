#!/usr/bin/env bash
# Builds and runs every GPU test (CTest label gpu) and the GPU benchmark on a machine with a
# CUDA GPU, then prints the benchmark's summary tables last. Exits non-zero on any failure;
# here a skipped GPU test is a failure too, since this is where they must run. About 4 to 6
# minutes on an H200 from a clean tree (build and tests 2 to 4, the benchmark 1 to 2); the
# bound is 8, which the benchmark's time limit keeps.
#
#   tests/gpu/run.sh [build-dir]        default: build/gpu
#
# Needs CUDA (nvcc, NCCL for the NCCL test and the benchmark's NCCL table), CMake, g++,
# Catch2 v2 and Google Benchmark (scripts/deps.sh lists the Debian packages).
# GRADSYNC_BENCH_REPS (default 3) sets the benchmark's repetitions.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/gpu}
mkdir -p "$build"
start=$SECONDS
step() { printf '\n== %s (%ds)\n' "$1" $((SECONDS - start)); }

if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
fi

step "configure $build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DGRADSYNC_CUDA=ON -DGRADSYNC_BUILD_EXAMPLES=OFF \
  >"$build/configure.log" || { cat "$build/configure.log"; exit 1; }

step "build the GPU tests and benchmark"
cmake --build "$build" -j "$(nproc)" --target gradsync_gpu

step "GPU tests"
ctest --test-dir "$build" -L gpu --output-on-failure --timeout 240 | tee "$build/gpu-tests.log"
if grep -q "Skipped" "$build/gpu-tests.log"; then
  echo "GPU tests were skipped: no usable CUDA device" >&2
  exit 1
fi

# The benchmark takes 1 to 2 minutes; it may run until 7m50s into the script, at most 5
# minutes and at least 1. A part of it that fails is reported in its output and summary.
limit=$((470 - (SECONDS - start)))
if ((limit > 300)); then limit=300; fi
if ((limit < 60)); then limit=60; fi
step "GPU benchmark (limit ${limit}s)"
status=0
GRADSYNC_BENCH_REPS=${GRADSYNC_BENCH_REPS:-3} timeout -k 10 "$limit" "$build/bench/bench_device" \
  | tee "$build/bench-device.log" || status=$?

if ((status == 0)); then
  step "done: tests passed; benchmark summary"
else
  step "tests passed; the benchmark FAILED (status $status; 124: it ran past ${limit}s)"
fi
sed -n '/^== summary$/,$p' "$build/bench-device.log"
exit "$status"
