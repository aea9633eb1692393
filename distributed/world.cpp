#include "distributed/world.h"

#include <cstdio>
#include <cstdlib>

#include "gradsphere_config.h"

namespace gs::dist {

int launcher_world_size() {
  // MPICH/hydra and Intel MPI (PMI_SIZE), PMIx launchers, Open MPI, and Slurm's srun (a job step's
  // task count; SLURM_NTASKS alone is also set inside a plain sbatch shell).
  for (const char* var : {"PMI_SIZE", "PMIX_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "SLURM_STEP_NUM_TASKS"}) {
    const char* v = std::getenv(var);
    if (v && *v) {
      int n = std::atoi(v);
      if (n > 1) return n;
    }
  }
  return 1;
}

int launcher_rank() {
  for (const char* var : {"PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}) {
    const char* v = std::getenv(var);
    if (v && *v) return std::atoi(v);
  }
  return 0;
}

#if !GS_HAVE_MPI
CommPtr world_communicator() {
  static CommPtr world = single_process_communicator("world");
  return world;
}

void abort_job(const std::string& message, int code) {
  std::fprintf(stderr, "[rank %d] error: %s\n", launcher_rank(), message.c_str());
  std::exit(code);
}
#endif

}  // namespace gs::dist
