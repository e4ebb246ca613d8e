#!/usr/bin/env bash
# Runs a job across the test cluster's hosts (scripts/cluster.sh; the CTest fixture
# `cluster` makes it): HOSTS x PER_HOST ranks, rank r on host r / PER_HOST + 1, each started
# in its host (own network, own host name) as PROGRAM RANK SIZE STORE_DIR ADDRESS ARGS, with a
# file store in a fresh directory that every host reaches. Waits for every rank, at most
# LIMIT seconds each, and removes the store; ends the ranks if it is itself ended. Exits 0
# when every rank did, 77 when there is no cluster of HOSTS hosts (CTest: skipped), else 1.
#
#   tests/cluster/run.sh HOSTS PER_HOST LIMIT PROGRAM [ARGS...]
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: run.sh HOSTS PER_HOST LIMIT PROGRAM [ARGS...]" >&2; exit 2; }
hosts=$1 per_host=$2 limit=$3 program=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
cluster="$here/../../scripts/cluster.sh"
net=${GRADSYNC_CLUSTER_NET:-10.77.0}

"$cluster" need "$hosts" || exit $?

store=$(mktemp -d /tmp/gradsync_cluster_store.XXXXXX)
pids=()
finish() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$store"
}
trap finish EXIT
trap 'exit 1' INT TERM

size=$((hosts * per_host))
for r in $(seq 0 $((size - 1))); do
  h=$((r / per_host + 1))
  "$cluster" exec "$h" timeout -s KILL "$limit" "$program" "$r" "$size" "$store" "${net}.${h}" "$@" &
  pids+=($!)
done
failed=0
for r in $(seq 0 $((size - 1))); do
  if ! wait "${pids[$r]}"; then
    echo "run.sh: rank $r on host $((r / per_host + 1)) failed" >&2
    failed=1
  fi
done
pids=()
exit $failed
