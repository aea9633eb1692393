// The doctest main of every test executable. Without MPI it is doctest's own main. With MPI every
// rank runs the same test cases (collectives need all ranks to take part); rank 0 reports, the other
// ranks keep their report to themselves unless they fail (or GS_TEST_ALL_RANKS=1 is set), and every
// rank exits non-zero when any rank failed, so `mpiexec -n N test_x` fails as a whole.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>

#include "gradsphere_config.h"
#include "tests/mpi_test_util.h"

#if GS_HAVE_MPI
#include <mpi.h>
#endif

#if GS_HAVE_MPI

int test_rank() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return 0;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int test_world_size() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return 1;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  const int rank = test_rank();
  const int size = test_world_size();
  if (provided < MPI_THREAD_FUNNELED && rank == 0)
    std::fprintf(stderr, "[mpi] warning: MPI provides thread level %d < MPI_THREAD_FUNNELED\n", provided);

  const char* all_env = std::getenv("GS_TEST_ALL_RANKS");
  const bool all_ranks = all_env != nullptr && std::strcmp(all_env, "1") == 0;

  doctest::Context context;
  context.applyCommandLine(argc, argv);
  // The quiet ranks write their report into a buffer: dropped when they pass, shown when they fail,
  // so a failure on rank 3 is never hidden behind a clean report from rank 0.
  std::ostringstream quiet_report;
  if (rank != 0 && !all_ranks) context.setCout(&quiet_report);

  const int rc = context.run();
  const int failed_here = rc != 0 ? 1 : 0;

  int worst_rc = 0, failed_ranks = 0;
  MPI_Allreduce(&rc, &worst_rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&failed_here, &failed_ranks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);

  if (failed_ranks > 0 && !all_ranks && !context.shouldExit()) {
    // Failed quiet ranks print their report one after the other, in rank order.
    for (int r = 1; r < size; ++r) {
      if (r == rank && failed_here) {
        std::cout << "[mpi] report of rank " << rank << ":\n" << quiet_report.str() << std::flush;
      }
      MPI_Barrier(MPI_COMM_WORLD);
    }
  }
  if (rank == 0 && size > 1 && !context.shouldExit()) {
    std::cout << "[mpi] " << size << " ranks, failures on " << failed_ranks << " ranks" << std::endl;
  }

  MPI_Finalize();
  return worst_rc;
}

#else  // !GS_HAVE_MPI

int test_rank() { return 0; }
int test_world_size() { return 1; }

int main(int argc, char** argv) {
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  return context.run();
}

#endif
