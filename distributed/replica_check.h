// The replica checker, a distributed anomaly mode (GS_CHECK_REPLICAS=1 or set_check_replicas).
// Two checks, both off by default because each costs a collective:
//   - every collective states its sequence number and name before it runs, so ranks that reach
//     different collectives get an error naming both calls instead of a deadlock (communicator.h);
//   - tensors declared replicated over a group (outputs of reduce_replicated and gather_along, inputs
//     of copy_to_group and scatter_along, the gradients that reach them, replicated parameters and
//     their reduced gradients) are compared across the group: a hash first, the values on a mismatch.
#pragma once
#include <string>

#include "distributed/communicator.h"
#include "engine/tensor.h"

namespace gs::dist {

// Throws on every rank of `comm` when the ranks hold different values of t: the error names `what`,
// the group, the first rank that differs from rank 0 and the largest absolute difference.
// Runs whether or not the checker is on (callers test check_replicas_enabled()).
void check_replicated(const Tensor& t, Communicator& comm, const std::string& what);

// check_replicated when the checker is on; nothing otherwise.
inline void maybe_check_replicated(const Tensor& t, Communicator& comm, const std::string& what) {
  if (check_replicas_enabled() && comm.size() > 1) check_replicated(t, comm, what);
}

}  // namespace gs::dist
