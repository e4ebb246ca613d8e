#!/usr/bin/env bash
# The MG-WFBP paper's experiment over a real network (docs/results_planner.md, "Over a real
# network"). Makes 8 hosts with scripts/cluster.sh (cluster gsls, 10.81.0.0/24), then
#   1. the bridge: every host sends to the next at once for 3 s (scripts/bridge_rate.py),
#      links shaped to 1, 2, 4 and 10 Gbit/s in turn: what each flow got;
#   2. the study: build/release/examples/link_study on 8 hosts x 1 rank, GoogLeNet and
#      ResNet-50 (examples/profiles), links shaped to RATE_MBIT, the profiles' times
#      multiplied by 10 000 / RATE_MBIT so that compute and communication stand as they did
#      on the paper's 10 GbE; the tables on stdout, the chart in docs/img/link_study_RATE_MBITmbit.svg.
# Removes the cluster afterwards, also when it fails or is interrupted. Needs root and a
# release build of link_study.
#
#   scripts/link_study.sh [RATE_MBIT]     (default 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-1000}
export GRADSYNC_CLUSTER=gsls GRADSYNC_CLUSTER_NET=10.81.0
hosts=8
study=build/release/examples/link_study
[ -x "$study" ] || { echo "link_study.sh: build $study first (cmake --build --preset release --target link_study)" >&2; exit 1; }
scripts/cluster.sh up "$hosts" "${rate}mbit"
trap 'scripts/cluster.sh down' EXIT
trap 'exit 1' INT TERM

echo "## The bridge: 8 flows at once, host i to host i+1, 3 s"
echo
echo "| shaped rate Mbit/s | each flow got Mbit/s: least | median | most |"
echo "|---:|---:|---:|---:|"
for shaped in 1000 2000 4000 10000; do
  for i in $(seq 1 "$hosts"); do scripts/cluster.sh rate "$i" "${shaped}mbit"; done
  out=$(mktemp -d)
  for i in $(seq 1 "$hosts"); do
    scripts/cluster.sh exec "$i" python3 scripts/bridge_rate.py receive 5201 3 >"$out/$i" &
  done
  sleep 0.5
  for i in $(seq 1 "$hosts"); do
    scripts/cluster.sh exec "$i" python3 scripts/bridge_rate.py send "${GRADSYNC_CLUSTER_NET}.$((i % hosts + 1))" 5201 3 &
  done
  wait
  cat "$out"/* | awk '{ printf "%.0f\n", $1 * 8 / $2 / 1e6 }' | sort -n | awk -v shaped="$shaped" '
    { r[NR] = $1 } END { printf "| %d | %d | %d | %d |\n", shaped, r[1], r[int((NR + 1) / 2)], r[NR] }'
  rm -rf "$out"
done
echo
for i in $(seq 1 "$hosts"); do scripts/cluster.sh rate "$i" "${rate}mbit"; done

scale=$(awk -v r="$rate" 'BEGIN { printf "%g", 10000 / r }')
tests/cluster/run.sh "$hosts" 1 3600 "$study" --profile examples/profiles/googlenet_k80.csv \
  --profile examples/profiles/resnet50.csv --scale "$scale" --rate-mbit "$rate" --svg "$PWD/docs/img/link_study_${rate}mbit.svg"
