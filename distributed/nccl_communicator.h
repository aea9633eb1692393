// The NCCL communicator: the collectives of communicator.h between GPUs, on device tensors, with no
// host staging. Each rank of a group drives one GPU; the group is built over a bootstrap
// communicator (MPI, or the single-process one), which carries NCCL's unique id and the replica
// checker's call records.
//
// Streams and waiting: an operation runs on the process's NCCL stream of its GPU (one for all NCCL
// communicators there, so their kernels run in issue order and cannot deadlock each other) after
// the work already queued on the rank's current stream (an event orders them), so compute queued
// later overlaps the transfer. wait() blocks the host until the transfer completed, polling with the communicator's
// timeout (GS_COMM_TIMEOUT): a collective that never completes, or an error NCCL reports for the
// communicator, aborts the communicator (so its peers see an error too) and the job, or throws,
// with a message naming the call, instead of a hang. Point-to-point transfers are paired by their
// order, not by tag: every rank issues its exchanges in the same order.
// Memory used by a transfer is kept from reuse until it completed (record_stream).
#pragma once
#include <string>
#include <utility>

#include "distributed/communicator.h"

namespace gs::dist {

// Whether this gradsphere was built with NCCL (with CUDA, when nccl.h and libnccl are found).
bool built_with_nccl();
// "2.28.9" (the library loaded at run time), or why there is none.
std::string nccl_version();

// A communicator over the ranks of `bootstrap` in which this rank moves tensors on `device`
// (collective over `bootstrap`). Two ranks of one group on one GPU are refused on every rank (NCCL
// cannot run them). Tensors on other devices are staged through `device`. split() builds the
// sub-group's NCCL communicator over the bootstrap's split.
CommPtr nccl_communicator(const CommPtr& bootstrap, Device device);

// Whether two ranks of `bootstrap` drive one GPU (collective): the first such pair, or (-1, -1).
std::pair<int, int> ranks_sharing_a_gpu(Communicator& bootstrap, Device device);

// The world communicator of a job whose ranks each train on `device`: NCCL where it can run (built
// with it, the library loads, one GPU per rank), else MPI staging GPU tensors through the host.
// GS_COMM=nccl|mpi forces one (auto by default). Collective over the world.
struct GpuWorld {
  CommPtr comm;
  std::string how;  // "NCCL 2.28.9", or "MPI, ... (why)": for the run's log
};
GpuWorld gpu_world_communicator(Device device);

// The GPU a rank of a multi-GPU job uses: its rank among the ranks on its machine (as the launcher
// tells it: MPI_LOCALRANKID, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID; 0 without one) modulo the
// number of visible devices.
Device local_rank_device();

}  // namespace gs::dist
