// SMPI's allreduce algorithms and selectors by name, for scale_study.cpp: the functions
// libsimgrid exports (src/smpi/colls), which --cfg=smpi/allreduce:NAME selects for
// MPI_Allreduce, so that one run can call every one of them side by side.
#pragma once

#include <mpi.h>

#include <string>

namespace simgrid::smpi {
#define GRADSYNC_SMPI_ALLREDUCE(name) int allreduce__##name(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);
GRADSYNC_SMPI_ALLREDUCE(lr)
GRADSYNC_SMPI_ALLREDUCE(rab1)
GRADSYNC_SMPI_ALLREDUCE(rab2)
GRADSYNC_SMPI_ALLREDUCE(rab_rdb)
GRADSYNC_SMPI_ALLREDUCE(rdb)
GRADSYNC_SMPI_ALLREDUCE(smp_binomial)
GRADSYNC_SMPI_ALLREDUCE(smp_binomial_pipeline)
GRADSYNC_SMPI_ALLREDUCE(smp_rdb)
GRADSYNC_SMPI_ALLREDUCE(smp_rsag)
GRADSYNC_SMPI_ALLREDUCE(smp_rsag_lr)
GRADSYNC_SMPI_ALLREDUCE(smp_rsag_rab)
GRADSYNC_SMPI_ALLREDUCE(redbcast)
GRADSYNC_SMPI_ALLREDUCE(ompi_ring_segmented)
GRADSYNC_SMPI_ALLREDUCE(mvapich2_rs)
GRADSYNC_SMPI_ALLREDUCE(mvapich2_two_level)
GRADSYNC_SMPI_ALLREDUCE(rab)
GRADSYNC_SMPI_ALLREDUCE(ompi)
GRADSYNC_SMPI_ALLREDUCE(mpich)
GRADSYNC_SMPI_ALLREDUCE(mvapich2)
GRADSYNC_SMPI_ALLREDUCE(impi)
#undef GRADSYNC_SMPI_ALLREDUCE
} // namespace simgrid::smpi

// MVAPICH2's two-level algorithm, which `mpich` calls for commutative operations, takes its
// algorithms between hosts and inside one from these globals of libsimgrid: the `mvapich2`
// selector sets them on each call, for its message size, and unset they default to recursive
// doubling and `mpich`. scale_study.cpp unsets them before each side, so that no side's time
// depends on the sides that ran before it in the same simulation.
extern int (*MV2_Allreducection)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);
extern int (*MV2_Allreduce_intra_function)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);

namespace scale_study {

using smpi_allreduce = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);

struct smpi_side {
    const char* name;
    smpi_allreduce run;
};

#define GRADSYNC_SMPI_SIDE(name) {#name, &simgrid::smpi::allreduce__##name}
inline const smpi_side smpi_sides[] = {
    GRADSYNC_SMPI_SIDE(lr),         GRADSYNC_SMPI_SIDE(rab1),
    GRADSYNC_SMPI_SIDE(rab2),       GRADSYNC_SMPI_SIDE(rab_rdb),
    GRADSYNC_SMPI_SIDE(rdb),        GRADSYNC_SMPI_SIDE(smp_binomial),
    GRADSYNC_SMPI_SIDE(smp_binomial_pipeline), GRADSYNC_SMPI_SIDE(smp_rdb),
    GRADSYNC_SMPI_SIDE(smp_rsag),   GRADSYNC_SMPI_SIDE(smp_rsag_lr),
    GRADSYNC_SMPI_SIDE(smp_rsag_rab), GRADSYNC_SMPI_SIDE(redbcast),
    GRADSYNC_SMPI_SIDE(ompi_ring_segmented), GRADSYNC_SMPI_SIDE(mvapich2_rs),
    GRADSYNC_SMPI_SIDE(mvapich2_two_level), GRADSYNC_SMPI_SIDE(rab),
    GRADSYNC_SMPI_SIDE(ompi),       GRADSYNC_SMPI_SIDE(mpich),
    GRADSYNC_SMPI_SIDE(mvapich2),   GRADSYNC_SMPI_SIDE(impi),
};
#undef GRADSYNC_SMPI_SIDE

inline const smpi_side* find_smpi(const std::string& name)
{
    for (const smpi_side& s : smpi_sides)
        if (name == s.name)
            return &s;
    return nullptr;
}

} // namespace scale_study
