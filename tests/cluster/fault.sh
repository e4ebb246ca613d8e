#!/usr/bin/env bash
# A fault on the test cluster's real links, mid-call. Runs PROGRAM's fault mode
# (tests/cluster/cluster_rank.cpp: checked Sum calls until one fails or the test says stop) as
# HOSTS x PER_HOST ranks over ENGINE (gloo: tests/cluster/run.sh; mpi: Open MPI's launcher,
# tests/cluster/run_mpi.sh), waits until every rank is under way, does KIND to host TARGET,
# and checks:
#   - every rank that was not killed ended as KIND allows (a named gradsync error, or stopped
#     when asked with every result exact; over MPI also terminated by the launcher, which
#     ends every rank once one calls MPI_Abort, or dies under Open MPI's default), between
#     the fault's start and 5 s past the deadline after its end; none with wrong data;
#   - the whole job ended on every host (launcher and daemons included) within 30 s of the
#     fault's end;
#   - once the link is back, nothing is left: no process in any host, no listening port, no
#     Open MPI session directory or shared-memory segment of a host;
#   - a new job on the same hosts then works.
# Prints each rank's outcome and when it came. Exits 77 without the cluster.
#
# KIND (the ranks' deadline in brackets):
#   link_down  TARGET's link taken down (3 s); every rank must name an error
#   flap       TARGET's link down 1 s and up 1 s, five times (3 s); stopped or an error
#   kill       TARGET's first rank killed with SIGKILL (3 s); the others name an error
#              (over MPI started with mpiexec --enable-recovery, so that they live to, or
#              are ended by Open MPI itself)
#   kill_default
#              over MPI only, the same under Open MPI's default: its launcher ends the others
#   crawl      TARGET's link throttled to 100 kbit/s (3 s); every rank must name an error
#   slow       TARGET's link throttled to 20 Mbit/s for 5 s, with a queue of 1 s that drops
#              little, then stop (60 s); every rank must stop with exact results
#
#   tests/cluster/fault.sh ENGINE KIND HOSTS PER_HOST TARGET PROGRAM [MPIEXEC]
set -euo pipefail
[ $# -ge 6 ] || { echo "usage: fault.sh gloo|mpi KIND HOSTS PER_HOST TARGET PROGRAM [MPIEXEC]" >&2; exit 2; }
engine=$1 kind=$2 hosts=$3 per_host=$4 target=$5 program=$6 mpiexec=${7:-mpiexec}
here=$(cd "$(dirname "$0")" && pwd)
cluster="$here/../../scripts/cluster.sh"
prefix=${GRADSYNC_CLUSTER:-gs}
rate=1gbit # the CTest fixture's
count=1048576
case "$kind" in
link_down | flap | kill | kill_default | crawl) deadline=3 ;;
slow) deadline=60 ;;
*) echo "fault.sh: no fault '$kind' (link_down, flap, kill, kill_default, crawl, slow)" >&2; exit 2 ;;
esac
case "$engine" in
gloo | mpi) ;;
*) echo "fault.sh: no engine '$engine' (gloo, mpi)" >&2; exit 2 ;;
esac
[ "$kind" != kill_default ] || [ "$engine" = mpi ] || { echo "fault.sh: kill_default is Open MPI's launcher's; over Gloo use kill" >&2; exit 2; }
bound_ms=$(((deadline + 5) * 1000))
job_bound_ms=30000

"$cluster" need "$hosts" || exit $?
outcomes=$(mktemp -d /tmp/gradsync_cluster_fault.XXXXXX)
restore() {
  "$cluster" link "$target" up
  "$cluster" rate "$target" "$rate"
}
trap 'restore; rm -rf "$outcomes"' EXIT

now() { date +%s%3N; }
launch() { # DIR: a job of fault-mode ranks writing their outcomes to DIR
  if [ "$engine" = gloo ]; then
    "$here/run.sh" "$hosts" "$per_host" 150 "$program" --fault "$1" "$deadline" "$count"
  else
    local recovery=()
    [ "$kind" != kill ] || recovery=(--enable-recovery)
    "$here/run_mpi.sh" "$mpiexec" "$hosts" "$per_host" 150 "${recovery[@]}" "$program" --fault "$1" "$deadline" "$count"
  fi
}

launch "$outcomes" >"$outcomes/out" 2>&1 &
job=$!
size=$((hosts * per_host))
for _ in $(seq 1 300); do # every rank's first call done (30 s at most)
  [ "$(grep -c ': under way$' "$outcomes/out" || true)" -lt "$size" ] || break
  sleep 0.1
done
if [ "$(grep -c ': under way$' "$outcomes/out" || true)" -lt "$size" ]; then
  cat "$outcomes/out"
  echo "fault.sh: the job did not get under way" >&2
  exit 1
fi
sleep 0.5
victim=$(((target - 1) * per_host))
start=$(now)
case "$kind" in
link_down) "$cluster" link "$target" down ;;
flap)
  for _ in 1 2 3 4 5; do
    "$cluster" link "$target" down
    sleep 1
    "$cluster" link "$target" up
    sleep 1
  done
  touch "$outcomes/stop"
  ;;
kill | kill_default) kill -KILL "$(cat "$outcomes/pid-$victim")" ;;
crawl) "$cluster" rate "$target" 100kbit ;;
slow)
  "$cluster" rate "$target" 20mbit 1s
  sleep 5
  touch "$outcomes/stop"
  ;;
esac
end=$(now)
wait "$job" || true
running() { # what still runs in any host
  for h in $(seq 1 "$hosts"); do ip netns pids "${prefix}-h${h}" 2>/dev/null; done
}
while [ -n "$(running)" ] && [ $(($(now) - end)) -le "$job_bound_ms" ]; do sleep 0.2; done
job_ms=$(($(now) - end))
cat "$outcomes/out"

failed=0
named=0 # ranks that named a gradsync error
complain() {
  echo "fault.sh: $*" >&2
  failed=1
}
for r in $(seq 0 $((size - 1))); do
  if [[ "$kind" = kill* ]] && [ "$r" -eq "$victim" ]; then
    echo "rank $r: killed"
    continue
  fi
  line=$(cat "$outcomes/rank-$r" 2>/dev/null | head -1 || true)
  if [ -z "$line" ] && [ "$engine" = mpi ] && [[ "$kind" = kill* ]]; then
    # Open MPI ends a rank without a trace: its launcher with SIGKILL, or the rank itself with
    # _exit when a transfer with the dead rank fails (docs/cluster.md, "A rank killed").
    echo "rank $r: ended by Open MPI without a record"
    continue
  fi
  if [[ "$line" =~ ^rank\ $r:\ ([a-z_]+)\ at\ ([0-9]+)\  ]]; then
    what=${BASH_REMATCH[1]} at=${BASH_REMATCH[2]}
    echo "rank $r: $what $((at - start)) ms after the fault began, $((at - end)) ms after it ended"
    case "$what" in
    deadline_error | communication_error | error)
      named=$((named + 1))
      [ "$kind" != slow ] || complain "rank $r: $what on a slow but live link"
      ;;
    stopped) [ "$kind" = flap ] || [ "$kind" = slow ] || complain "rank $r: no error after $kind" ;;
    terminated)
      [ "$engine" = mpi ] || complain "rank $r: terminated, though nothing ends a Gloo job"
      [ "$kind" != kill ] || complain "rank $r: terminated, though --enable-recovery lets it live to name an error"
      ;;
    *) complain "rank $r: $line" ;;
    esac
    if [ "$at" -lt "$start" ] || [ $((at - end)) -gt "$bound_ms" ]; then
      complain "rank $r ended outside the fault's start .. ${bound_ms} ms after its end"
    fi
  else
    complain "rank $r did not end in a named gradsync error or stop: ${line:-no outcome}"
  fi
done
[ "$kind" != kill ] || [ "$named" -gt 0 ] || complain "no rank named an error after the kill"
echo "the job ended on every host ${job_ms} ms after the fault ended"
[ "$job_ms" -le "$job_bound_ms" ] || complain "the job outlived the fault by more than ${job_bound_ms} ms"

restore
# Nothing left, now that the job ended everywhere.
for h in $(seq 1 "$hosts"); do
  ns="${prefix}-h${h}"
  left=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
  [ -z "$left" ] || complain "host $h still runs $(ps -o comm= -p ${left// /,} | tr '\n' ' ')"
  ports=$(ip netns exec "$ns" ss -Htln 2>/dev/null | wc -l)
  [ "$ports" -eq 0 ] || complain "host $h still listens on $ports port(s)"
  for f in /tmp/ompi."${prefix}"-h"${h}".* /dev/shm/vader_segment."${prefix}"-h"${h}".*; do
    [ ! -e "$f" ] || complain "host $h left $f"
  done
done

# After the link is back a new job works: one call each, asked to stop from the start.
again=$(mktemp -d "$outcomes/again.XXXXXX")
touch "$again/stop"
if launch "$again" >"$again/out" 2>&1 && [ "$(cat "$again"/rank-* | grep -c ': stopped at ')" -eq "$size" ]; then
  echo "a new job on the same hosts: every rank stopped with exact results"
else
  cat "$again/out"
  complain "a new job on the same hosts failed"
fi
exit $failed
