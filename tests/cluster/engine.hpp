// The engine a cluster program is built for: MPI with GRADSYNC_CLUSTER_MPI (its ranks started
// by Open MPI's launcher, tests/cluster/run_mpi.sh), Gloo otherwise (started in their hosts by
// tests/cluster/run.sh, meeting through a file store).
#pragma once

#if GRADSYNC_CLUSTER_MPI
#include <mpi.h>

#include <gradsync/comm/mpi/abort.hpp>
#include <gradsync/comm/mpi/mpi.hpp>
using communicator = gradsync::mpi_communicator;
#else
#include <gradsync/comm/gloo/file_store.hpp>
#include <gradsync/comm/gloo/gloo.hpp>
#include <gradsync/comm/gloo/rendezvous.hpp>
using communicator = gradsync::gloo_communicator;
#endif
