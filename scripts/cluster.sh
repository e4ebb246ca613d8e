#!/usr/bin/env bash
# A cluster of hosts on this machine, for running gradsync across hosts (docs/cluster.md):
# each host a network namespace with its own address on one bridge, every link shaped to a
# rate with tc's token bucket (tbf), and processes started in a host with its own host name
# (a UTS namespace). Needs root (it exits 77, "skipped", where it cannot make namespaces).
#
#   scripts/cluster.sh up H [RATE]        makes hosts 1..H (RATE for tc, e.g. 1gbit; default
#                                         10gbit) and prints what it made
#   scripts/cluster.sh exec I CMD ARGS    runs CMD in host I, whose host name is gs-hI
#   scripts/cluster.sh link I down|up     takes host I's link down or up
#   scripts/cluster.sh rate I RATE        shapes host I's link to RATE
#   scripts/cluster.sh down               kills what runs in the hosts and removes them all
#   scripts/cluster.sh status             lists what exists
#   scripts/cluster.sh need H             exits 0 when hosts 1..H exist, else 77 (skipped)
#
# Names: namespaces gs-h1.., their interfaces eth0 (address 10.77.0.I/24), the bridge gs-br
# with 10.77.0.254 (so the root namespace reaches every host, as a launcher must), the
# bridge's ports gs-pI. GRADSYNC_CLUSTER (default gs) changes the gs prefix and
# GRADSYNC_CLUSTER_NET (default 10.77.0) the network, for two clusters at once. `up`
# removes a cluster of the same name first and, should it fail half way, what it made; so
# every command is safe to rerun.
set -eEuo pipefail

prefix=${GRADSYNC_CLUSTER:-gs}
net=${GRADSYNC_CLUSTER_NET:-10.77.0}
bridge=${prefix}-br

die() {
  echo "cluster.sh: $*" >&2
  exit 1
}

skip() {
  echo "cluster.sh: skipped: $*" >&2
  exit 77
}

host_ns() { echo "${prefix}-h$1"; }
port() { echo "${prefix}-p$1"; }

hosts() {
  ip netns list 2>/dev/null | awk '{print $1}' | sed -n "s/^${prefix}-h\([0-9][0-9]*\)$/\1/p" | sort -n
}

can_run() {
  [ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, a bridge, tc)"
  command -v ip >/dev/null || skip "needs ip (Debian package iproute2)"
  command -v tc >/dev/null || skip "needs tc (Debian package iproute2)"
  local probe="${prefix}-probe$$"
  ip netns add "$probe" 2>/dev/null || skip "this kernel or container does not allow network namespaces"
  ip netns delete "$probe"
}

# tbf on the bridge's port shapes what a host receives; inside the host, on eth0, what it
# sends. The bucket holds a few milliseconds at the rate, at least 64 KiB.
shape() {
  local i=$1 rate=$2 bits burst
  bits=$(numfmt --from=si "$(echo "${rate%bit}" | tr kmg KMG)")
  burst=$((bits / 8 / 200))
  [ "$burst" -ge 65536 ] || burst=65536
  tc qdisc replace dev "$(port "$i")" root tbf rate "$rate" burst "$burst" latency 50ms
  ip netns exec "$(host_ns "$i")" tc qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" latency 50ms
}

down() {
  local i pids
  for i in $(hosts); do
    pids=$(ip netns pids "$(host_ns "$i")" 2>/dev/null || true)
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
    ip link delete "$(port "$i")" 2>/dev/null || true
    ip netns delete "$(host_ns "$i")" 2>/dev/null || true
  done
  ip link delete "$bridge" 2>/dev/null || true
}

up() {
  local count=$1 rate=${2:-10gbit} i ns
  [[ "$count" =~ ^[1-9][0-9]?$ ]] && [ "$count" -le 64 ] || die "up takes a host count from 1 to 64, got '$count'"
  [[ "$rate" =~ ^[0-9]+[kmg]?bit$ ]] || die "a rate is a number and kbit, mbit, gbit or bit, got '$rate'"
  can_run
  down
  trap 'down; die "making the cluster failed; removed what was made"' ERR
  ip link add "$bridge" type bridge
  ip addr add "${net}.254/24" dev "$bridge"
  ip link set "$bridge" up
  for i in $(seq 1 "$count"); do
    ns=$(host_ns "$i")
    ip netns add "$ns"
    ip link add "$(port "$i")" type veth peer name eth0 netns "$ns"
    ip link set "$(port "$i")" master "$bridge" up
    ip netns exec "$ns" ip addr add "${net}.${i}/24" dev eth0
    ip netns exec "$ns" ip link set eth0 up
    ip netns exec "$ns" ip link set lo up
    shape "$i" "$rate"
  done
  trap - ERR
  echo "cluster ${prefix}: bridge ${bridge} ${net}.254/24, every link at ${rate}"
  for i in $(seq 1 "$count"); do
    echo "  host ${prefix}-h${i}: namespace $(host_ns "$i"), address ${net}.${i}, bridge port $(port "$i")"
  done
}

need_host() {
  [[ "$1" =~ ^[0-9]+$ ]] && ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$(host_ns "$1")" ||
    die "there is no host $1 in cluster ${prefix} (scripts/cluster.sh status)"
}

command=${1:-}
shift || true
case "$command" in
up)
  [ $# -ge 1 ] || die "usage: cluster.sh up H [RATE]"
  up "$@"
  ;;
down)
  [ "$(id -u)" -eq 0 ] || skip "needs root"
  down
  ;;
exec)
  [ $# -ge 2 ] || die "usage: cluster.sh exec I CMD [ARGS...]"
  need_host "$1"
  i=$1
  shift
  exec ip netns exec "$(host_ns "$i")" unshare --uts sh -c 'hostname "$0" && exec "$@"' "${prefix}-h${i}" "$@"
  ;;
link)
  [ $# -eq 2 ] && { [ "$2" = up ] || [ "$2" = down ]; } || die "usage: cluster.sh link I down|up"
  need_host "$1"
  ip link set "$(port "$1")" "$2"
  ;;
rate)
  [ $# -eq 2 ] || die "usage: cluster.sh rate I RATE"
  need_host "$1"
  [[ "$2" =~ ^[0-9]+[kmg]?bit$ ]] || die "a rate is a number and kbit, mbit, gbit or bit, got '$2'"
  shape "$1" "$2"
  ;;
need)
  [ $# -eq 1 ] && [[ "$1" =~ ^[0-9]+$ ]] || die "usage: cluster.sh need H"
  for i in $(seq 1 "$1"); do
    hosts | grep -qx "$i" || skip "cluster ${prefix} has no host $i (scripts/cluster.sh up $1)"
  done
  ;;
status)
  found=$(hosts)
  if [ -z "$found" ]; then
    echo "cluster ${prefix}: none"
  else
    echo "cluster ${prefix}: hosts $(echo $found)"
  fi
  ;;
*)
  die "usage: cluster.sh up H [RATE] | exec I CMD... | link I down|up | rate I RATE | down | status | need H"
  ;;
esac
