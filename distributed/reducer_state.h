// Internal to the gradient reducer (reducer.cpp: construction, buckets, hook mode;
// reducer_tape.cpp: tape mode). Not part of the library's interface.
#pragma once
#include <memory>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/reducer.h"

namespace gs::dist {

struct ReducerBucket {
  Group group = Group::world;
  DType dtype = DType::f32;
  std::vector<int> params;
  int64_t elems = 0;  // gradient elements; one flag per parameter follows them in `flat`
  int ready = 0;      // hook mode: parameters whose gradient is in
  bool arrived = false;   // tape mode: the bucket's node ran this pass (its flat is filled)
  bool recorded = false;  // tape mode: reduced on the tape this pass (create_graph)
  bool flushed = false;   // tape mode: its node did not run this pass; reduced at the pass's end
  Tensor flat;
  WorkHandle work;
};

struct GradientReducer::State : std::enable_shared_from_this<State> {
  ProcessGrid grid;
  std::vector<ReducedParameter> params;
  ReducerOptions options;
  std::vector<ReducerBucket> buckets;  // a bucket's index is its identity (nodes keep it)
  std::vector<int> launch_order;       // bucket indices in the order they are launched
  std::vector<int> bucket_of;
  std::vector<char> ready;
  std::vector<int> observed;  // ready order of the first reduced pass (hook mode)
  bool rebuilt = false, reduce_next = true, in_pass = false, dead = false;
  size_t next_launch = 0;  // position in launch_order
  ReducerStats stats;
  // Tape mode: each parameter's local gradients of the step's earlier (unreduced) passes, and
  // whether a forward scope is open.
  std::vector<Tensor> stash;
  std::vector<int> observed_buckets;  // the order the bucket nodes ran in, first reduced pass

  void build(const std::vector<int>& order);
  // The bucket's flat: gradient elements, then one flag per parameter, from `grads` (one per
  // parameter of the bucket; undefined: none).
  void fill(size_t bi, const std::vector<Tensor>& grads);
  // Starts the bucket's flat as a non-blocking all-reduce.
  void start(size_t bi, bool in_backward);
  // Starts buckets in bucket order while the next one is complete.
  void launch_ready_in_order(bool in_backward);
  // Drives MPI's progress on what is in flight (MPI progresses non-blocking collectives only while
  // it is called).
  void progress();
  // Waits for bucket bi and returns its reduced gradients (undefined where no rank had one).
  std::vector<Tensor> take_reduced(size_t bi);
  // The replica checker's look at a bucket's reduced gradients (GS_CHECK_REPLICAS=1).
  void check_reduced(size_t bi, const std::vector<Tensor>& reduced);
  // Writes reduced gradients into the parameters' .grad (after the replica checker's look).
  void store_reduced(size_t bi, const std::vector<Tensor>& reduced);
  void end_pass_bookkeeping();  // a pass's end: counted, then reset_pass()
  void reset_pass();            // the per-pass flags and the launch position

  // hook mode (reducer.cpp)
  void on_ready(int k);
  void finish_hooks();
  void rebuild_from_rank0_order();

  // tape mode (reducer_tape.cpp)
  std::vector<Tensor> tape_backward(size_t bi, std::vector<Tensor> grads);
  void finish_tape();
  // Rank 0's observed node order, shared: the launch order follows it (the buckets' contents and
  // indices stay, so graphs recorded before, by a double backward say, remain valid).
  void reorder_buckets_from_rank0();
  // Once no node can run any more in the pass: the buckets whose node did not run go as zeros (or
  // what the step's earlier passes stashed), so every rank issues the same all-reduces in order.
  void flush_unreached();
  // A gradient accumulated into parameter k's .grad must have come from its bucket's node.
  void check_came_through_node(int k) const;
  void open_pass();
  // A backward pass that ended by an exception (its end-of-backward callback never ran): waits for
  // what is in flight (every rank started it) and resets the pass, so the next one starts clean.
  void abandon_pass() noexcept;
};

}  // namespace gs::dist
