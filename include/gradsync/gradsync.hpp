// gradsync: gradient allreduce (and broadcast, allgather, gather, scatter and all-to-all) for
// data-parallel training.
// This umbrella header includes everything that needs no outside library, layer by layer
// (docs/design.md, "Layers"). Transports that do are included by name:
// <gradsync/comm/mpi/mpi.hpp>, <gradsync/comm/mpi/boost_mpi.hpp>, <gradsync/comm/gloo/gloo.hpp>.
#pragma once

#include <gradsync/core/broadcast_element.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/core/layout.hpp>
#include <gradsync/core/types.hpp>
#include <gradsync/comm/communicator.hpp>
#include <gradsync/comm/subgroup.hpp>
#include <gradsync/comm/shared/buffer.hpp>
#include <gradsync/comm/delay/delay.hpp>
#include <gradsync/comm/local/local.hpp>
#include <gradsync/kernels/host.hpp>
#include <gradsync/kernels/host_adasum.hpp>
#include <gradsync/kernels/host_bitwise.hpp>
#include <gradsync/kernels/host_elementwise.hpp>
#include <gradsync/kernels/host_extrema.hpp>
#include <gradsync/kernels/host_product.hpp>
#include <gradsync/policy/adasum.hpp>
#include <gradsync/policy/bitwise.hpp>
#include <gradsync/policy/combine_with.hpp>
#include <gradsync/policy/extrema.hpp>
#include <gradsync/policy/product.hpp>
#include <gradsync/policy/reduction_policy.hpp>
#include <gradsync/policy/sum.hpp>
#include <gradsync/memory/host_memory.hpp>
#include <gradsync/plan/allgather_plan.hpp>
#include <gradsync/plan/broadcast_plan.hpp>
#include <gradsync/plan/exchange.hpp>
#include <gradsync/plan/plan.hpp>
#include <gradsync/plan/schedule.hpp>
#include <gradsync/algorithm/adasum_recursive_doubling.hpp>
#include <gradsync/algorithm/adasum_recursive_halving.hpp>
#include <gradsync/algorithm/adasum_ring.hpp>
#include <gradsync/algorithm/adasum_shared_memory.hpp>
#include <gradsync/algorithm/binomial_tree.hpp>
#include <gradsync/algorithm/bruck_allgather.hpp>
#include <gradsync/algorithm/hierarchical.hpp>
#include <gradsync/algorithm/linear_gather.hpp>
#include <gradsync/algorithm/linear_scatter.hpp>
#include <gradsync/algorithm/pairwise_exchange.hpp>
#include <gradsync/algorithm/recursive_doubling.hpp>
#include <gradsync/algorithm/recursive_halving.hpp>
#include <gradsync/algorithm/ring.hpp>
#include <gradsync/algorithm/ring_allgather.hpp>
#include <gradsync/algorithm/scatter_allgather.hpp>
#include <gradsync/algorithm/shared_memory.hpp>
#include <gradsync/selector/automatic.hpp>
#include <gradsync/selector/automatic_allgather.hpp>
#include <gradsync/selector/automatic_broadcast.hpp>
#include <gradsync/selector/plan_table.hpp>
#include <gradsync/selector/tuned.hpp>
#include <gradsync/collective/all_to_all.hpp>
#include <gradsync/collective/allgather.hpp>
#include <gradsync/collective/allreduce.hpp>
#include <gradsync/collective/broadcast.hpp>
#include <gradsync/collective/gather.hpp>
#include <gradsync/collective/movement.hpp>
#include <gradsync/collective/scatter.hpp>
#include <gradsync/collective/verify.hpp>
#include <gradsync/runtime/synchronizer.hpp>
#include <gradsync/planner.hpp>
