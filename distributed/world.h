// The job: its world communicator, and how a failure on one rank ends every rank.
#pragma once
#include <string>

#include "distributed/communicator.h"

namespace gs::dist {

// MPI_COMM_WORLD when gradsphere is built with MPI (MPI is initialised here if nobody did, and
// finalised at exit), else the single-process communicator. The same object on every call.
CommPtr world_communicator();

// The world size the launcher announced (mpiexec/hydra, Open MPI, Slurm's srun), without
// initialising MPI; 1 when started directly.
int launcher_world_size();
// This process's rank as the launcher tells it (PMI_RANK, PMIX_RANK, OMPI_COMM_WORLD_RANK or
// SLURM_PROCID), before MPI is initialised; 0 without a launcher.
int launcher_rank();

// Ends the whole job: prints "[rank R] error: message" on this rank and, in a multi-rank job,
// aborts every rank (MPI_Abort), so no rank is left waiting in a collective for one that failed.
// A single-process job just exits with `code`.
[[noreturn]] void abort_job(const std::string& message, int code = 1);

}  // namespace gs::dist
