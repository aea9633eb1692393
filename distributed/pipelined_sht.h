// The distributed SHT with its transposes pipelined (sphere_transforms.h runs them when
// sht_pipeline_chunks_for says so). The fields (the flattened leading dims, N) are cut into chunks,
// and the all-to-all of one chunk runs while the FFT or Legendre contraction of another computes
// (non-blocking all_to_all_async, polled between the computations: MPI moves a non-blocking
// operation only inside its calls).
//
// Against the unpipelined path (1 chunk):
//   - the same values, to the bit: a chunk runs the same one-process kernels on some of the same
//     fields, whose arithmetic does not depend on the other fields of the call (tiles of fields, and
//     the Legendre path is pinned to the one the whole batch would take);
//   - the same bytes, counted the same way: a chunk holds, on each rank, a share of that rank's
//     block of the fields, so every value goes to the rank it went to before (block_transpose.h);
//   - the same gradients, of any order: each transform is one linear tape op whose backward is the
//     pipelined adjoint (the kernels' own backward rules, the transposes reversed), itself a tape op
//     whose backward is the transform.
// Design and measurements: distributed/NOTES.md, "Pipelined transposes"; BENCHMARKS.md.
#pragma once
#include <cstdint>

#include "distributed/process_grid.h"
#include "engine/tensor.h"
#include "ops/sphere/sht.h"

namespace gs::dist {

// The chunk setting of every distributed transform: 0 = automatic (the rule of
// sht_pipeline_chunks_for), 1 = unpipelined, k >= 2 = k chunks. GS_SHT_PIPELINE (auto, or a count)
// sets it at the first read. Returns the previous setting.
int set_sht_pipeline_chunks(int chunks);
int sht_pipeline_chunks();

// The chunks a transform on `grid` runs in (1: unpipelined; without a spatial split only a count
// set explicitly pipelines: the kernels then run chunk by chunk, with no transposes). The
// automatic rule is unpipelined: on the CPU the pipelined path was slower in every measurement
// (BENCHMARKS.md, "Pipelined transposes"); a GPU run (NCCL moving data beside the kernels) is
// where it may pay, and is not measured yet. Force it with GS_SHT_PIPELINE or the setter above.
int64_t sht_pipeline_chunks_for(const ProcessGrid& grid);

// The transforms on fields flattened to (N, [2,] rows, cols) (sphere_transforms.cpp checks and
// flattens): analysis = sht / vector_sht, synthesis = isht / ivector_sht, in `chunks` chunks.
Tensor pipelined_analysis(const Tensor& x, const sphere::ShtSpec& spec, const ProcessGrid& grid, bool vector,
                          int64_t chunks);
Tensor pipelined_synthesis(const Tensor& coeffs, const sphere::ShtSpec& spec, const ProcessGrid& grid, bool vector,
                           int64_t chunks);

}  // namespace gs::dist
