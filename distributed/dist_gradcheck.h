// Gradient checks of distributed functions. The function is the *global* one: its input vector is
// every rank's per-rank tensors plus one copy of each replicated tensor, in world-rank order, and
// likewise its output. Every rank steps through the global indices in lock-step (each evaluation
// and each backward issues the same collectives everywhere), so uneven splits cannot deadlock.
//   - dist_gradcheck: analytical Jacobian (backward on every rank, seeded where the output element
//     lives) against central differences (the element perturbed where the input element lives);
//   - dist_gradgradcheck: the same for x, v -> vjp(f, x, v) with create_graph;
//   - dist_adjoint_check: <A x, y> = <x, A^T y> summed over ranks, for linear A (all collectives);
//   - dist_jvpcheck: forward mode (engine/autograd/forward_ad.h) on every rank: the tangent of the
//     global function for a random global tangent t against central differences along t, against
//     reverse mode by the transpose identity <J t, u> = <t, J^T u> summed over ranks, and against a
//     run where no input requires grad.
#pragma once
#include "distributed/dist_registry.h"

namespace gs::dist {

GradcheckReport dist_gradcheck(const ProcessGrid& grid, const DistSample& sample, const GradcheckOptions& options = {});
GradcheckReport dist_gradgradcheck(const ProcessGrid& grid, const DistSample& sample,
                                   const GradcheckOptions& options = {});
// max_rel_error holds |<Ax,y> - <x,A^T y>| / max(|<Ax,y>|, tiny); ok when below `rtol`.
GradcheckReport dist_adjoint_check(const ProcessGrid& grid, const DistSample& sample, RandomKey key,
                                   double rtol = 1e-12);

GradcheckReport dist_jvpcheck(const ProcessGrid& grid, const DistSample& sample, const GradcheckOptions& options = {});

}  // namespace gs::dist
