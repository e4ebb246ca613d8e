#!/usr/bin/env bash
# The scale study's preloaded operator new[] (bench/simulation/shared_malloc_preload.cpp): SMPI's own
# algorithms and gradsync's, 16 ranks, 4 MiB, timed with every allocation private (--check:
# every result exact) and again with the preload sharing SMPI's scratch arrays of 1 MiB or more.
# The simulated times must be the same to the bit, and the shared run's results not exact
# (else nothing was shared).
# usage: shared_malloc.sh SMPIRUN SCALE_STUDY PLATFORM PRELOAD
set -euo pipefail
smpirun=$1 study=$2 platform=$3 preload=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() {
  "$@" "$smpirun" -np 16 -platform "$platform" --cfg=smpi/simulate-computation:no --cfg=smpi/tmpdir:"$work" \
    --log=root.thres:warning "$study" --sizes 4194304 --reps 1 --check \
    --sides lr,rab_rdb,rdb,smp_rsag,ompi,mpich,recursive_halving,automatic
}
run env > "$work/private.csv"
# its results are not exact, so the program exits 1: the rows below are what is judged
run env LD_PRELOAD="$preload" GRADSYNC_SHARED_MALLOC_FROM=1048576 > "$work/shared.csv" || true
cat "$work/private.csv" "$work/shared.csv"
awk -F, '
  !/^[0-9]/ { next } # the header, and what smpirun adds when the program exits 1
  FILENAME ~ /private/ { rows++; t[$4] = $5; if ($6 != "yes") { print "not exact without the preload: " $0; bad = 1 } next }
  { shared++; if ($5 != t[$4]) { print "time changed by the preload: " $0 " against " t[$4]; bad = 1 } if ($6 == "NO") garbled++ }
  END {
    if (rows != 8 || shared != 8) { print "expected 8 rows each, got " rows " and " shared; bad = 1 }
    if (garbled == 0) { print "every result exact with the preload: nothing was shared"; bad = 1 }
    exit bad
  }' "$work/private.csv" "$work/shared.csv"
echo "simulation.shared_malloc: the same simulated times with SMPI's scratch shared"
