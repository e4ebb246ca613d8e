#!/usr/bin/env bash
# The scale study (docs/results_scale.md): gradsync's allreduce algorithms and SMPI's on
# simulated clusters (bench/simulation/platforms), N = 16 to 1 024 ranks, 4 KiB to 64 MiB,
# Sum and Adasum, every rank's arithmetic left out of the simulated time
# (smpi/simulate-computation:no) for both sides. One CSV per platform in OUT (default
# build/scale_study): ranks,bytes,policy,side,seconds,exact,predicted (bench/simulation/scale_study.cpp).
#   scripts/scale_study.sh [OUT]
# Environment: PLATFORMS (names under bench/simulation/platforms, without .xml), RANKS, SIZES
# (bytes), CUT (transport or whole: how gradsync cuts its messages, bench/simulation/scale_study.cpp),
# SIDES (comma-separated; default every side; Adasum runs the gradsync ones among them),
# POLICIES (default "sum adasum").
# Memory: every allocation of 1 MiB or more, the program's (shared_memory_hook.hpp) and SMPI's
# own collectives' scratch (shared_malloc_preload.cpp, preloaded), is one block that every
# simulated rank shares, in blocks of SMPI's shared malloc as large as the largest size, so
# that N = 1 024 at 64 MiB fits in a few GB with the simulated times unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
source scripts/deps.sh
need_packages "${build_packages[@]}" libsimgrid-dev catch2 libbenchmark-dev
out=${1:-build/scale_study}
platforms=${PLATFORMS:-"fat_tree_10g_1 fat_tree_100g_1 torus_10g_1 torus_100g_1 fat_tree_10g_8 fat_tree_100g_8 torus_10g_8 torus_100g_8"}
ranks=${RANKS:-"16 64 256 1024"}
sizes=${SIZES:-"4096,65536,1048576,16777216,67108864"}
cut=${CUT:-transport}
sides=${SIDES:-}
policies=${POLICIES:-"sum adasum"}
study=build/release/bench/simulation/scale_study
cmake --preset release >/dev/null
cmake --build --preset release --target scale_study shared_malloc_preload
mkdir -p "$out"
largest=$(tr , '\n' <<< "$sizes" | sort -n | tail -1)
block=$(((largest + 4095) / 4096 * 4096)) # SMPI's shared-malloc blocks are whole pages
preload=(env LD_PRELOAD="$root/build/release/bench/simulation/libshared_malloc_preload.so" GRADSYNC_SHARED_MALLOC_FROM=1048576)
side_list() { # POLICY: SIDES, for Adasum only gradsync's (SMPI's have no Adasum, tuned runs Sum only)
  if [ "$1" = sum ]; then echo "$sides"; return; fi
  tr , '\n' <<< "$sides" | grep -xE 'ring|recursive_halving|recursive_doubling|hierarchical|automatic' | paste -sd,
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT # a signal ends the script through its EXIT trap, so $work goes too
trap 'exit 143' TERM
for platform in $platforms; do
  per=${platform##*_}
  csv=$out/$platform.csv
  echo "ranks,bytes,policy,side,seconds,exact,predicted" > "$csv"
  for n in $ranks; do
    for ((h = 0; h < (n + per - 1) / per; h++)); do echo "host-$h:$per"; done > "$work/hosts"
    for policy in $policies; do
      # SIDES of SMPI's alone: nothing to run for Adasum
      if [ -n "$sides" ] && [ -z "$(side_list "$policy")" ]; then continue; fi
      start=$SECONDS
      # smpirun unrolls the hostfile into the directory it runs in: $work, not the tree
      (cd "$work" && "${preload[@]}" smpirun -np "$n" -platform "$root/bench/simulation/platforms/$platform.xml" -hostfile hosts \
        --cfg=smpi/simulate-computation:no --cfg=smpi/shared-malloc-blocksize:$block --cfg=smpi/tmpdir:"$work" \
        --log=root.thres:warning \
        "$root/$study" --sizes "$sizes" --policy "$policy" --reps 1 --cut "$cut" --predict \
        ${sides:+--sides "$(side_list "$policy")"}) | tail -n +2 >> "$csv"
      echo "$platform N=$n $policy: $((SECONDS - start)) s"
    done
  done
done
echo "scale study: $out/*.csv"
