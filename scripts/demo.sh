#!/usr/bin/env bash
# The main job: builds and runs the demo. Installs what it needs; safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
need_packages "${build_packages[@]}"
cmake --preset demo >/dev/null
cmake --build --preset demo
exec build/demo/examples/allreduce_demo "$@"
