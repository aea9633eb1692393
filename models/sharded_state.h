// State dicts on a split sphere. A rank's Module::state_dict() holds its shards (parameters and
// constant tables declared with a Distribution); checkpoints hold the whole tensors, as one process
// writes them, so a checkpoint written on one grid loads on any other.
#pragma once
#include "distributed/process_grid.h"
#include "models/module.h"

namespace gs::models {

// The model's state as one process holds it: every sharded tensor gathered (collective over the
// grid's h and w groups; every rank gets the whole). On a grid that does not split the sphere,
// module.state_dict().
StateDict whole_state_dict(const Module& module, const dist::ProcessGrid& grid);
// This rank's part of a whole state dict of `module` (the inverse; no communication).
StateDict local_state_dict(const StateDict& whole, const Module& module, const dist::ProcessGrid& grid);

// The same for a training state (Stepper::training_state): an entry whose key ends in
// ".<parameter name>" and has that parameter's rank (an optimizer moment) is sharded like it;
// scalars and everything else are replicated and pass unchanged.
StateDict whole_training_state(const StateDict& state, const Module& module, const dist::ProcessGrid& grid);
StateDict local_training_state(const StateDict& whole, const Module& module, const dist::ProcessGrid& grid);

}  // namespace gs::models
