// Real GEMMs that read a where it is and copy b panel by panel (a weight gradient run as its
// transpose swaps the two roles), for products with a small dimension: the per-point channel
// mixings of an SFNO (its MLPs, encoder and decoder), where (points x C) meets (C x C') in forward
// and in the input gradient, and (C x points) meets (points x C') in the weight gradient
// (gemm_direct; gemm_dots for a thin weight gradient, when the points are contiguous in both).
// Eigen packs the large operand on every such call, which was a quarter of its time in a 128x256
// training step (models/BENCHMARKS.md). Internal to ops/: gemm_cpu.cpp calls them for the shapes
// where gemm_direct_suits() / gemm_dots_suits() say so, and splits the depth of the long products
// left to Eigen where gemm_depth_split_suits() says so.
//
// gemm_direct: each output element is summed over the depth in chunks of 256 in increasing order,
// each chunk from zero (the first from c when accumulating), the chunks added to c in order (a
// weight gradient with more columns than rows runs as its transpose, then added to c).
// gemm_dots: per-lane partial sums over the depth, summed across the lanes by a fixed tree, then
// added to c when accumulating. Both split the work across threads by output tiles only, so
// neither result depends on the thread count.
#pragma once
#include <cstdint>

#include "ops/gemm_cpu.h"

namespace gs::gemm_cpu {

// Whether gemm_direct is used for c (n x m) = a (n x k) @ b (k x m) of this element size: the
// output has at least one whole vector per row, the depth is small but at least 16 (forward, input
// gradient) or the output is small (weight gradient, where the depth is the number of points), and
// a b stored by columns meets at least 16 rows of a.
bool gemm_direct_suits(int64_t n, int64_t k, int64_t m, int64_t element_bytes, bool b_row_major);

// c = a @ b (or c += a @ b when `accumulate`), the contract of gemm_cpu::gemm for real T.
template <typename T>
void gemm_direct(T* c, int64_t c_outer, const Operand<T>& a, const Operand<T>& b, int64_t n, int64_t k, int64_t m,
                 bool accumulate);

// Whether gemm_dots is used: a with contiguous rows, b with contiguous columns (every output a dot
// product read in place), a long depth and a small output (a channels-first weight gradient).
bool gemm_dots_suits(int64_t n, int64_t k, int64_t m, bool a_row_major, bool b_row_major);

// c = a @ b (or c += a @ b when `accumulate`) for the shapes gemm_dots_suits accepts (gemm_dots.cpp).
template <typename T>
void gemm_dots(T* c, int64_t c_outer, const Operand<T>& a, const Operand<T>& b, int64_t n, int64_t k, int64_t m,
               bool accumulate);

// Whether gemm_cpu::gemm splits the depth of a real product that neither kernel above takes (asked
// after both): a depth of 2048 or more against a small output, a balanced weight gradient. Chunks
// of the depth that depend on k alone go to Eigen, one thread each, and the partial products are
// added in chunk order (gemm_cpu.cpp), so the result does not depend on the thread count either.
bool gemm_depth_split_suits(int64_t n, int64_t k, int64_t m);

}  // namespace gs::gemm_cpu
