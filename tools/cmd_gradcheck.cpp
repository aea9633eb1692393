// `gradsphere gradcheck [--op NAME]`: walks the op registry and checks every op's backward
// against finite differences in f64 (first order) and its double backward (second order).
#include <fmt/core.h>

#include <algorithm>
#include <memory>

#include "engine/autograd/gradcheck.h"
#include "ops/registry.h"
#include "tools/commands.h"

namespace gs::tools {
namespace {

struct GradcheckArgs {
  std::string op;
  uint64_t seed = 1234;
  bool verbose = false;
};

struct OpResult {
  double abs_err = 0, rel_err = 0;
  bool first_ok = true, second_ok = true;
  std::string failure;
};

OpResult check_op(const OpInfo& op, uint64_t seed) {
  OpResult r;
  for (auto& sample : op.samples({seed, 1})) {
    auto first = gradcheck(op.fn, sample.inputs, op.tolerances);
    r.abs_err = std::max(r.abs_err, first.max_abs_error);
    r.rel_err = std::max(r.rel_err, first.max_rel_error);
    if (!first.ok && r.first_ok) r.failure = fmt::format("[{}] first order: {}", sample.label, first.failure);
    r.first_ok &= first.ok;
    if (op.second_order) {
      auto second = gradgradcheck(op.fn, sample.inputs, op.tolerances);
      r.abs_err = std::max(r.abs_err, second.max_abs_error);
      r.rel_err = std::max(r.rel_err, second.max_rel_error);
      if (!second.ok && r.second_ok && r.failure.empty())
        r.failure = fmt::format("[{}] second order: {}", sample.label, second.failure);
      r.second_ok &= second.ok;
    }
  }
  return r;
}

int run_gradcheck(const GradcheckArgs& args) {
  std::vector<const OpInfo*> ops;
  if (!args.op.empty()) {
    const OpInfo* op = OpRegistry::find(args.op);
    if (!op) {
      std::string names;
      for (const auto& n : OpRegistry::names()) names += (names.empty() ? "" : ", ") + n;
      fail("gradcheck: unknown op '{}'; registered ops: {}", args.op, names);
    }
    ops.push_back(op);
  } else {
    for (const auto& op : OpRegistry::all()) ops.push_back(&op);
  }
  fmt::print("{:<24} {:>12} {:>12} {:>12} {:>13}\n", "op", "max abs err", "max rel err", "first order", "second order");
  int failures = 0;
  for (const OpInfo* op : ops) {
    OpResult r;
    try {
      r = check_op(*op, args.seed);
    } catch (const Error& e) {
      r.first_ok = r.second_ok = false;
      r.failure = fmt::format("threw: {}", e.what());
    }
    bool ok = r.first_ok && r.second_ok;
    failures += !ok;
    fmt::print("{:<24} {:>12.2e} {:>12.2e} {:>12} {:>13}\n", op->name, r.abs_err, r.rel_err, r.first_ok ? "ok" : "FAIL",
               !op->second_order ? "n/a" : r.second_ok ? "ok" : "FAIL");
    if (!ok) fmt::print("    {}\n", r.failure);
  }
  fmt::print("{} ops checked, {} passed, {} failed\n", ops.size(), ops.size() - failures, failures);
  return failures == 0 ? 0 : 2;
}

}  // namespace

void add_gradcheck_command(CLI::App& app, CommandRegistry& commands) {
  auto args = std::make_shared<GradcheckArgs>();
  CLI::App* sub = app.add_subcommand(
      "gradcheck", "Check every registered op's backward (first and second order) against finite differences");
  sub->add_option("--op", args->op, "Check only this op");
  sub->add_option("--seed", args->seed, "Seed for the sample inputs");
  commands.add(sub, [args] { return run_gradcheck(*args); });
}

}  // namespace gs::tools
