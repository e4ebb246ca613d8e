// gradsync: gradient allreduce (and broadcast) for data-parallel training.
// This umbrella header includes everything that needs no outside library. Transports that
// do are included by name: <gradsync/comm/mpi/mpi.hpp>, <gradsync/comm/mpi/boost_mpi.hpp>.
#pragma once

#include <gradsync/algorithm/adasum_recursive_doubling.hpp>
#include <gradsync/algorithm/adasum_recursive_halving.hpp>
#include <gradsync/algorithm/adasum_ring.hpp>
#include <gradsync/algorithm/automatic.hpp>
#include <gradsync/algorithm/automatic_broadcast.hpp>
#include <gradsync/algorithm/binomial_tree.hpp>
#include <gradsync/algorithm/exchange.hpp>
#include <gradsync/algorithm/hierarchical.hpp>
#include <gradsync/algorithm/memory.hpp>
#include <gradsync/algorithm/recursive_doubling.hpp>
#include <gradsync/algorithm/recursive_halving.hpp>
#include <gradsync/algorithm/ring.hpp>
#include <gradsync/algorithm/scatter_allgather.hpp>
#include <gradsync/algorithm/schedule.hpp>
#include <gradsync/algorithm/tuned.hpp>
#include <gradsync/allreduce.hpp>
#include <gradsync/broadcast.hpp>
#include <gradsync/broadcast_element.hpp>
#include <gradsync/broadcast_plan.hpp>
#include <gradsync/comm/local/local.hpp>
#include <gradsync/communicator.hpp>
#include <gradsync/error.hpp>
#include <gradsync/kernels/host.hpp>
#include <gradsync/kernels/host_adasum.hpp>
#include <gradsync/layout.hpp>
#include <gradsync/plan.hpp>
#include <gradsync/plan_table.hpp>
#include <gradsync/planner.hpp>
#include <gradsync/policy/adasum.hpp>
#include <gradsync/policy/reduction_policy.hpp>
#include <gradsync/policy/sum.hpp>
#include <gradsync/subgroup.hpp>
#include <gradsync/types.hpp>
#include <gradsync/verify.hpp>
#include <gradsync/comm/delay/delay.hpp>
#include <gradsync/runtime/synchronizer.hpp>
