#!/usr/bin/env bash
# The planner at scale (docs/results_scale.md): the MG-WFBP study's plans of the GoogLeNet
# and ResNet-50 profiles replayed by bench/simulation/plan_replay.cpp on the simulated
# 10 Gbit/s fat-tree, one rank per host, N = 8 to 64, with the profiles' times and with
# them 10 times shorter. Prints one markdown table per scale on stdout.
#   scripts/plan_replay.sh
# Environment: RANKS (default "8 16 32 64"), SCALES (default "1 0.1"), PLATFORM (a name
# under bench/simulation/platforms, default fat_tree_10g_1).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
source scripts/deps.sh
need_packages "${build_packages[@]}" libsimgrid-dev catch2 libbenchmark-dev
ranks=${RANKS:-"8 16 32 64"}
scales=${SCALES:-"1 0.1"}
platform=${PLATFORM:-fat_tree_10g_1}
replay=build/release/bench/simulation/plan_replay
cmake --preset release >/dev/null
cmake --build --preset release --target plan_replay >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for scale in $scales; do
  echo "### $platform, backward times x $scale"
  echo
  header=--header
  for profile in examples/profiles/googlenet_k80.csv examples/profiles/resnet50.csv; do
    for n in $ranks; do
      for ((h = 0; h < n; h++)); do echo "host-$h:1"; done > "$work/hosts"
      # smpirun unrolls the hostfile into the directory it runs in: $work, not the tree
      (cd "$work" && smpirun -np "$n" -platform "$root/bench/simulation/platforms/$platform.xml" -hostfile hosts \
        --cfg=smpi/simulate-computation:no --cfg=smpi/tmpdir:"$work" --log=root.thres:warning \
        "$root/$replay" --profile "$root/$profile" --scale "$scale" $header)
      header=
    done
  done
  echo
done
