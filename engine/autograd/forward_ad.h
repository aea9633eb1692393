// Forward-mode automatic differentiation: dual tensors, as torch.autograd.forward_ad.
//
//   gs::forward_ad::DualLevel level;                    // tangents exist while it lives
//   Tensor x = gs::forward_ad::make_dual(primal, v);    // x carries the tangent v
//   Tensor y = f(x);                                    // every op propagates it
//   Tensor jv = gs::forward_ad::unpack_dual(y).tangent; // J v
//
// Tangents propagate wherever an op records a node (record.h): the tape's recording is the one
// place every differentiable op passes through, so every op gets a JVP without a line of its own.
// Which rule an op's tangent comes from (forward_ad.cpp; ops/jvp_rules.cpp lists the ops of each):
//   view     an output sharing an input's storage: the same view of the input's tangent (aliasing,
//            as PyTorch: a write into the view's tangent is a write into the base's);
//   written  a JVP rule registered for the op's node name (out-of-place forms only);
//   diagonal ops whose Jacobian is a real diagonal matrix (element-wise unary maps on real tensors):
//            J t = J^T t, so the op's own VJP rule applied to t is its JVP;
//   derived  every other op: the VJP rule is linear in its output gradient u, so
//            J t = d/du <J^T u, t> (the "double VJP": the rule run on a zero u that requires grad,
//            then one reverse pass). Correct for any op whose backward is differentiable, at about
//            the cost of its backward and double backward; an op marked once_differentiable has none
//            and fails naming the op.
// In-place ops update the tangent in place (views of it see the change). Tangents are
// differentiable (reverse-over-forward) when grad mode is on and a primal or tangent requires grad.
// One level at a time: hessian() is forward-over-reverse, which needs one.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "engine/tensor.h"

namespace gs {

class Node;

namespace forward_ad {

// Opens a dual level; tangents made in it vanish when it closes (as torch's dual_level): a tensor
// that outlives the level no longer shows its tangent (whose memory goes with that tensor).
class DualLevel {
 public:
  DualLevel();
  ~DualLevel();
  DualLevel(const DualLevel&) = delete;
  DualLevel& operator=(const DualLevel&) = delete;
};

// A level is open and tangent propagation is not paused.
bool active();

// A new alias of `primal` (same storage, version counter and reverse-mode history) carrying
// `tangent`, which must have the primal's shape and dtype (an f32 tangent for f32, ...).
Tensor make_dual(const Tensor& primal, const Tensor& tangent);

struct Dual {
  Tensor primal;   // an alias without the tangent
  Tensor tangent;  // undefined when `t` has none at the current level
};
Dual unpack_dual(const Tensor& t);

// The tangent of `t` at the current level (undefined when none): its own, or for a view whose own
// is unset, the view of its base's.
Tensor tangent_of(const Tensor& t);

// Inside it no tangents propagate (derived rules run the VJP rule under it).
class PauseGuard {
 public:
  PauseGuard();
  ~PauseGuard();
  PauseGuard(const PauseGuard&) = delete;
  PauseGuard& operator=(const PauseGuard&) = delete;
};

// For an op that computes its value from other ops before recording its own node: no history and
// no tangents for the intermediate steps (the op's node gives the output both).
class PrimalOnlyGuard {
 private:
  NoGradGuard no_history_;
  PauseGuard no_tangents_;
};

// How many output tangents each kind of rule produced since the last reset (tests, bench).
struct RuleCounts {
  uint64_t view = 0, written = 0, diagonal = 0, derived = 0;
};
RuleCounts rule_counts();
void reset_rule_counts();
// The kind of rule the op named `node_name` gets ("written", "diagonal" or "derived"; views are
// recognised by their outputs, not by name).
std::string rule_kind(const std::string& node_name);

// ---- rules, registered by ops/jvp_rules.cpp (the engine knows no op by name)

// inputs: the op's primal inputs; outputs: its primal outputs; tangents: one per input, undefined
// where an input has none. Returns one tangent per output (undefined: zero).
using JvpRule = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs,
                                                  const std::vector<Tensor>& outputs,
                                                  const std::vector<Tensor>& tangents)>;
void register_jvp_rule(const std::string& node_name, JvpRule rule);
void register_diagonal_jvp(const std::string& node_name);
// Re(sum(conj(a) * b)) as a 0-dim real tensor, differentiable: the pairing of the derived rule.
void register_real_dot(Tensor (*real_dot)(const Tensor& a, const Tensor& b));

// Called by connect_node (record.cpp) for every node it connects while a level is active:
// computes the outputs' tangents. `inplace`: output 0 is input 0 written in place.
void propagate_tangents(const std::shared_ptr<Node>& node, const std::vector<Tensor>& inputs,
                        const std::vector<Tensor*>& outputs, bool inplace);
// Any input carries a tangent at the active level.
bool any_tangent(const std::vector<Tensor>& inputs);

}  // namespace forward_ad
}  // namespace gs
