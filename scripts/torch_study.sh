#!/usr/bin/env bash
# The libtorch study (docs/torch.md, "The study"): builds examples/torch/train_fashion_mnist
# and runs, on Fashion-MNIST from Debian's dataset-fashion-mnist,
#   1. the accuracy study: Sum, Average and Adasum of the gradients, and Adasum of each rank's
#      model change, at 1, 4, 8, 16 and 32 thread ranks with the one-rank schedule unchanged,
#      seeds 1, 2 and 3 (a table; runs.csv, accuracy.svg);
#   2. the scheduling study: each merge plan over an emulated slow link on 2 ranks, beside
#      the planner's predictions and allreduce after backward (a table; profile.csv).
# Outputs go to build/demo/torch_study. Arguments are passed on to the accuracy study, e.g.
# `scripts/torch_study.sh --seeds 1,2,3,4,5`. Installs what it needs; safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
need_packages "${build_packages[@]}" "${torch_packages[@]}"
cmake --preset demo >/dev/null
cmake --build --preset demo --target train_fashion_mnist
out=build/demo/torch_study
program=build/demo/examples/train_fashion_mnist
start=$SECONDS
"$program" --study accuracy --out "$out" "$@"
echo
"$program" --study schedule --out "$out"
echo "== the study took $((SECONDS - start)) s; its files are in $out"
