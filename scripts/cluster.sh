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
#   scripts/cluster.sh rate I RATE [QUEUE]
#                                         shapes host I's link to RATE, packets dropped after
#                                         QUEUE in its queue (default 50ms)
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
# sends. The bucket holds a few milliseconds at the rate, at least 64 KiB. A new rate gets a
# new qdisc, not tc's in-place change: a changed tbf keeps its queue, and a segmentation-
# offload packet queued under a larger bucket (up to 68 KB) can never be sent from a 64 KiB
# one, which stopped the link for good (seen as a TCP connection timing out).
shape() { # I RATE [QUEUE]: QUEUE, tbf's latency, is how long a packet may wait before it is dropped
  local i=$1 rate=$2 queue=${3:-50ms} bits burst
  bits=$(numfmt --from=si "$(echo "${rate%bit}" | tr kmg KMG)")
  burst=$((bits / 8 / 200))
  [ "$burst" -ge 65536 ] || burst=65536
  tc qdisc del dev "$(port "$i")" root 2>/dev/null || true
  tc qdisc add dev "$(port "$i")" root tbf rate "$rate" burst "$burst" latency "$queue"
  ip netns exec "$(host_ns "$i")" tc qdisc del dev eth0 root 2>/dev/null || true
  ip netns exec "$(host_ns "$i")" tc qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency "$queue"
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
    # TCP gives up on a peer that acknowledges nothing after about 12.6 s instead of Linux's
    # default 15 minutes, so that a launcher's daemon on either side of a cut link ends
    # (docs/cluster.md, "When a link fails").
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_retries2=5
    shape "$i" "$rate"
  done
  trap - ERR
  echo "cluster ${prefix}: bridge ${bridge} ${net}.254/24, every link at ${rate}, tcp_retries2=5"
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
  if [ "$2" = up ]; then
    # Back as a host whose link was replugged: its port forwarding again, and no host keeping
    # the neighbour entries that failed while it was away.
    for _ in $(seq 1 50); do
      [ "$(cat "/sys/class/net/$(port "$1")/operstate")" != up ] || break
      sleep 0.1
    done
    for i in $(hosts); do ip -n "$(host_ns "$i")" neigh flush all 2>/dev/null || true; done
  fi
  ;;
rate)
  [ $# -eq 2 ] || [ $# -eq 3 ] || die "usage: cluster.sh rate I RATE [QUEUE]"
  need_host "$1"
  [[ "$2" =~ ^[0-9]+[kmg]?bit$ ]] || die "a rate is a number and kbit, mbit, gbit or bit, got '$2'"
  [[ "${3:-50ms}" =~ ^[0-9]+(ms|s)$ ]] || die "a queue is a number and ms or s, got '$3'"
  shape "$@"
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
  die "usage: cluster.sh up H [RATE] | exec I CMD... | link I down|up | rate I RATE [QUEUE] | down | status | need H"
  ;;
esac
