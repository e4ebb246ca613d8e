#!/usr/bin/env bash
# Runs an MPI job across the test cluster's hosts (scripts/cluster.sh) with Open MPI's own
# launcher, started in host 1 as a batch job's script runs on its first node: a host file of
# HOSTS hosts (their addresses) with PER_HOST slots each, the remote-shell agent
# tests/cluster/rsh_agent.sh in place of ssh, the launcher's connections and the ranks' TCP on
# the cluster's network, shared memory only within a host. Ends the job after LIMIT seconds.
# Exits with the launcher's status, 77 when there is no cluster of HOSTS hosts.
#
#   tests/cluster/run_mpi.sh MPIEXEC HOSTS PER_HOST LIMIT PROGRAM [ARGS...]
set -euo pipefail
[ $# -ge 5 ] || { echo "usage: run_mpi.sh MPIEXEC HOSTS PER_HOST LIMIT PROGRAM [ARGS...]" >&2; exit 2; }
mpiexec=$1 hosts=$2 per_host=$3 limit=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
cluster="$here/../../scripts/cluster.sh"
net=${GRADSYNC_CLUSTER_NET:-10.77.0}

"$cluster" need "$hosts" || exit $?

hostfile=$(mktemp /tmp/gradsync_cluster_hosts.XXXXXX)
trap 'rm -f "$hostfile"' EXIT
for h in $(seq 1 "$hosts"); do
  echo "${net}.${h} slots=${per_host}" >>"$hostfile"
done
root=()
[ "$(id -u)" -ne 0 ] || root=(--allow-run-as-root)
"$cluster" exec 1 timeout -s KILL "$limit" "$mpiexec" "${root[@]}" --hostfile "$hostfile" -np $((hosts * per_host)) \
  --mca plm_rsh_agent "$here/rsh_agent.sh" \
  --mca oob_tcp_if_include "${net}.0/24" --mca btl_tcp_if_include "${net}.0/24" \
  --mca btl self,vader,tcp "$@"
