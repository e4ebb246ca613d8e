#!/usr/bin/env bash
# The scale study's smoke test: gradsync's MPI reducers under SimGrid's SMPI, 16 ranks on a
# fat-tree. Every gradsync algorithm gives the exact sum on every rank (--check), and with
# whole messages (--cut whole) ring, recursive halving and recursive doubling take the
# simulated time of SMPI's lr, rab_rdb and rdb (the same messages in the same order) within 1%:
# waits that polled MPI_Test, or a clock that read real time, would not.
# usage: smoke.sh SMPIRUN SCALE_STUDY PLATFORM
set -euo pipefail
smpirun=$1 study=$2 platform=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() {
  "$smpirun" -np 16 -platform "$platform" --cfg=smpi/simulate-computation:no --cfg=smpi/tmpdir:"$work" \
    --log=root.thres:warning "$study" --sizes 65536,4194304 --reps 1 --check "$@"
}
run --sides ring,recursive_halving,recursive_doubling,hierarchical,automatic > "$work/transport.csv"
run --cut whole --sides ring,lr,recursive_halving,rab_rdb,recursive_doubling,rdb > "$work/whole.csv"
cat "$work/transport.csv" "$work/whole.csv"
awk -F, '
  FNR == 1 { next }
  { rows++ }
  $6 != "yes" { print "not exact: " $0; bad = 1 }
  FILENAME ~ /whole/ { t[$2 "," $4] = $5 }
  END {
    if (rows != 22) { print "expected 22 rows, got " rows; bad = 1 }
    split("ring:lr recursive_halving:rab_rdb recursive_doubling:rdb", pairs, " ")
    split("65536 4194304", sizes, " ")
    for (p in pairs) for (s in sizes) {
      split(pairs[p], side, ":")
      a = t[sizes[s] "," side[1]]; b = t[sizes[s] "," side[2]]
      if (a == "" || b == "" || b <= 0 || a / b > 1.01 || a / b < 0.99) {
        printf "%s bytes: %s %s s against SMPI %s %s s\n", sizes[s], side[1], a, side[2], b; bad = 1
      }
    }
    exit bad
  }' "$work/transport.csv" "$work/whole.csv"
echo "simulation.smoke: exact, and the same simulated times as SMPI's algorithms"
