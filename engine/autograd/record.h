// How ops put themselves on the tape.
//
//   Tensor out = ...forward kernel...;
//   if (should_record({a, b}))
//     record_op("mul", {a, b}, {&out}, /*saved*/ {a, b}, /*saved outputs*/ {},
//               [](BackwardContext& ctx, const std::vector<Tensor>& g) -> std::vector<Tensor> {...});
//
// Saved tensors are numbered in order: first the `saved` list, then the saved outputs.
#pragma once
#include <initializer_list>
#include <vector>

#include "engine/autograd/node.h"

namespace gs {

// Recording is on and at least one input requires grad.
bool should_record(std::initializer_list<Tensor> inputs);
bool should_record(const std::vector<Tensor>& inputs);

std::shared_ptr<Node> record_op(std::string name, const std::vector<Tensor>& inputs,
                                const std::vector<Tensor*>& outputs, const std::vector<Tensor>& saved,
                                const std::vector<size_t>& saved_outputs, BackwardRule rule);

// Connects an already-built node: edges from inputs, metadata, grad_fn on outputs, saved tensors.
void connect_node(const std::shared_ptr<Node>& node, const std::vector<Tensor>& inputs,
                  const std::vector<Tensor*>& outputs, const std::vector<Tensor>& saved,
                  const std::vector<size_t>& saved_outputs);

// In-place protocol. Before writing into `self`: checks read-only storage, the leaf rule and the
// view rule (an in-place write on a view would leave the base's history stale, so it is refused
// while autograd is recording). After writing: bumps the version and, when recording, makes
// `self`'s history go through a new node (rebase).
void check_inplace(const Tensor& self, const char* op, std::initializer_list<Tensor> others);
// The same, for a write that has already happened (custom functions' mark_dirty): the history
// check compares against the version before that write.
void check_inplace(const Tensor& self, const char* op, std::initializer_list<Tensor> others,
                   uint64_t version_before_write);
void finish_inplace(Tensor& self, const char* op, const std::vector<Tensor>& other_inputs, BackwardRule rule,
                    const std::vector<Tensor>& saved = {});

}  // namespace gs
