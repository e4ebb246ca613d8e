#!/usr/bin/env bash
# The Python study (docs/torch.md, "The same study in Python"): examples/python/train_fashion_mnist.py,
# DDP over the gradsync backend, Average, Sum and Adasum (hook) at 1, 4 and 8 ranks (processes of
# this host), seeds 1, 2 and 3, the C++ study's schedule; prints each run's line and the table of
# test accuracy, mean (min..max) over the seeds. Arguments: the rank counts and seeds, e.g.
# `scripts/python_study.sh "1 2 4 8" "1 2 3 4 5"`. Builds the Python package first; installs what
# it needs; safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
need_packages "${build_packages[@]}" "${torch_packages[@]}" libgloo-dev "${python_packages[@]}"
cmake --preset release >/dev/null
cmake --build --preset release --target gradsync_c10d
ranks=${1:-1 4 8}
seeds=${2:-1 2 3}
out=build/release/python_study
mkdir -p "$out"
: > "$out/runs.txt"
start=$SECONDS
for seed in $seeds; do
  for n in $ranks; do
    # One rank: every policy reduces one gradient to itself, so one run serves the three.
    for policy in $([ "$n" -eq 1 ] && echo average || echo average sum adasum); do
      PYTHONPATH=build/release/python /usr/bin/python3 examples/python/train_fashion_mnist.py \
        --spawn "$n" --policy "$policy" --seed "$seed" 2>&1 | grep '^policy=' | tee -a "$out/runs.txt"
    done
  done
done
/usr/bin/python3 - "$out/runs.txt" <<'TABLE'
import collections, re, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = dict(re.findall(r"(\w+)=(\S+)", line))
    runs[(int(f["ranks"]), f["policy"])].append(float(f["accuracy"]))
print("| ranks | Sum | Average | Adasum |\n|---:|---|---|---|")
for n in sorted({n for n, _ in runs}):
    cells = []
    for policy in ("sum", "average", "adasum"):
        a = runs.get((n, policy)) or runs.get((n, "average"))
        cells.append(f"{statistics.mean(a):.2f} ({min(a):.2f}..{max(a):.2f})")
    print(f"| {n} | " + " | ".join(cells) + " |")
TABLE
echo "== the study took $((SECONDS - start)) s; its runs are in $out/runs.txt"
