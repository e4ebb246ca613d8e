#!/usr/bin/env bash
# Open MPI's remote-shell agent for the test cluster (plm_rsh_agent): where ssh would log in to
# a host, this enters the host's namespace under its host name (scripts/cluster.sh exec) and
# runs the launcher's command line there with sh, as ssh's remote shell would. A host is
# named by its address on the cluster's network (NET.I) or by its name (PREFIX-hI).
#
#   rsh_agent.sh HOST COMMAND...
set -euo pipefail
prefix=${GRADSYNC_CLUSTER:-gs}
net=${GRADSYNC_CLUSTER_NET:-10.77.0}
host=$1
shift
case "$host" in
"$net".*) i=${host#"$net".} ;;
"$prefix"-h*) i=${host#"$prefix"-h} ;;
*) echo "rsh_agent.sh: $host is not a host of cluster $prefix ($net.I or $prefix-hI)" >&2; exit 255 ;;
esac
exec "$(dirname "$0")/../../scripts/cluster.sh" exec "$i" sh -c "$*"
