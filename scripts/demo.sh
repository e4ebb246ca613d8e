#!/usr/bin/env bash
# The main job: builds the demo trainer and runs it in its default configuration (about a
# minute and a half on 2 cores): Adasum against Sum at 1, 8, 16 and 32 ranks, then the
# scheduling study over an emulated slow network, ending with both tables. The profile CSV
# and the timeline SVG go to build/demo/out. Arguments are passed on to train_demo (see
# docs/trainer.md), e.g. `scripts/demo.sh --study schedule`. Installs what it needs; safe
# to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
need_packages "${build_packages[@]}"
cmake --preset demo >/dev/null
cmake --build --preset demo --target train_demo
out=build/demo/out
echo "train_demo writes its profile CSV and timeline SVG to $out"
exec build/demo/examples/train_demo --out "$out" "$@"
