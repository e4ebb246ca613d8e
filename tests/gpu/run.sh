#!/usr/bin/env bash
# Builds and runs every GPU test (CTest label gpu) and the GPU benchmark on a machine with a
# CUDA GPU, then prints the benchmark's summary tables last. Exits non-zero on any failure;
# here a skipped GPU test is a failure too, since this is where they must run. About 3 to 5
# minutes on an H200 from a clean tree (the bound is 8).
#
#   tests/gpu/run.sh [build-dir]        default: build/gpu
#
# Needs CUDA (nvcc, NCCL for the NCCL test), CMake, g++, Catch2 v2 and Google Benchmark
# (scripts/deps.sh lists the Debian packages).
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

step "GPU benchmark"
GRADSYNC_BENCH_REPS=${GRADSYNC_BENCH_REPS:-3} timeout 240 "$build/bench/bench_device" | tee "$build/bench-device.log"

step "done: tests passed; benchmark summary"
sed -n '/^== summary$/,$p' "$build/bench-device.log"
