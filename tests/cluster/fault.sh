#!/usr/bin/env bash
# A host's link taken down mid-call: runs PROGRAM --fault (tests/cluster/cluster_rank.cpp's
# fault mode: calls until one fails, with a deadline of 3 s) as HOSTS x PER_HOST ranks
# through run.sh, takes host CUT's link down once the calls are under way, and checks that
# every rank, on either side of the cut, ended in a named gradsync error within the
# deadline + 5 s of the cut, none before it and none with wrong data; then brings the link
# back. Prints each rank's outcome and how long after the cut it came. Exits 77 without the
# cluster.
#
#   tests/cluster/fault.sh HOSTS PER_HOST CUT PROGRAM
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: fault.sh HOSTS PER_HOST CUT PROGRAM" >&2; exit 2; }
hosts=$1 per_host=$2 cut_host=$3 program=$4
here=$(cd "$(dirname "$0")" && pwd)
cluster="$here/../../scripts/cluster.sh"
bound_ms=8000 # the ranks' deadline, 3 s, and 5 s

"$cluster" need "$hosts" || exit $?
out=$(mktemp /tmp/gradsync_cluster_fault.XXXXXX)
trap '"$cluster" link "$cut_host" up; rm -f "$out"' EXIT

"$here/run.sh" "$hosts" "$per_host" 60 "$program" --fault >"$out" 2>&1 &
job=$!
size=$((hosts * per_host))
for _ in $(seq 1 300); do # every rank's first call done (30 s at most), then a little more
  [ "$(grep -c ': under way$' "$out" || true)" -lt "$size" ] || break
  sleep 0.1
done
sleep 0.5
cut=$(date +%s%3N)
"$cluster" link "$cut_host" down
wait "$job" || true
cat "$out"

failed=0
for r in $(seq 0 $((size - 1))); do
  line=$(grep -E "^rank $r: " "$out" | grep -v ': under way$' | head -1 || true)
  if [[ "$line" =~ ^rank\ $r:\ (deadline_error|communication_error|error)\ at\ ([0-9]+)\  ]]; then
    after=$((BASH_REMATCH[2] - cut))
    echo "rank $r: ${BASH_REMATCH[1]} ${after} ms after the cut"
    if [ "$after" -lt 0 ] || [ "$after" -gt "$bound_ms" ]; then
      echo "fault.sh: rank $r ended ${after} ms after the cut, outside 0 .. ${bound_ms} ms" >&2
      failed=1
    fi
  else
    echo "fault.sh: rank $r did not end in a named gradsync error: ${line:-no outcome}" >&2
    failed=1
  fi
done
exit $failed
