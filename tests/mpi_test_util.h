// Helpers for tests that behave differently per rank. Defined in tests/mpi_test_main.cpp, which
// every test executable links; without MPI they return rank 0 of a world of 1.
#pragma once

// This process's rank in MPI_COMM_WORLD (0 without MPI or outside MPI_Init/MPI_Finalize).
int test_rank();
// The number of ranks in MPI_COMM_WORLD (1 without MPI or outside MPI_Init/MPI_Finalize).
int test_world_size();
