// `gradsphere gradcheck [--op NAME]`: walks the op registry and checks every op's backward
// against finite differences in f64 (first order) and its double backward (second order), and its
// forward mode (jvpcheck: central differences and the transpose identity), naming the kind of JVP
// rule that produced the tangents (view, written, diagonal, derived: engine/autograd/forward_ad.h).
// `mpiexec -n N gradsphere gradcheck --distributed [--grid [E]xDxHxW]` walks the distributed registry
// instead, on every grid of N ranks (or the one given): first and second order of the global
// function and the adjoint identity, every rank in lock-step; rank 0 prints.
#include <fmt/core.h>

#include <algorithm>
#include <memory>

#include "distributed/dist_gradcheck.h"
#include "distributed/world.h"
#include "engine/autograd/forward_ad.h"
#include "engine/autograd/gradcheck.h"
#include "engine/cuda_runtime.h"
#include "ops/registry.h"
#include "tools/commands.h"

namespace gs::tools {
namespace {

struct GradcheckArgs {
  std::string op;
  std::string device = "cpu";
  uint64_t seed = 1234;
  bool verbose = false;
  bool distributed = false;
  std::string grid;
};

struct OpResult {
  double abs_err = 0, rel_err = 0;
  double vs_cpu = 0;  // on a device: the largest difference from the CPU f64 run (f64 and f32)
  bool first_ok = true, second_ok = true, vs_cpu_ok = true, jvp_ok = true;
  std::string jvp_kinds;  // the kinds of JVP rule used, e.g. "view" or "written+derived"
  std::string failure;
};

// "written+derived": the kinds that produced tangents between two counts.
std::string kinds_between(const forward_ad::RuleCounts& a, const forward_ad::RuleCounts& b) {
  std::string s;
  auto add = [&](uint64_t n, const char* name) {
    if (n > 0) s += (s.empty() ? "" : "+") + std::string(name);
  };
  add(b.view - a.view, "view");
  add(b.written - a.written, "written");
  add(b.diagonal - a.diagonal, "diagonal");
  add(b.derived - a.derived, "derived");
  return s.empty() ? "none" : s;
}

OpResult check_op(const OpInfo& op, uint64_t seed, Device device) {
  OpResult r;
  const DifferentiableFn fn = device.is_cpu() ? op.fn : on_device(op.fn, device);
  for (auto& sample : op.samples({seed, 1})) {
    auto first = gradcheck(fn, sample.inputs, op.tolerances);
    r.abs_err = std::max(r.abs_err, first.max_abs_error);
    r.rel_err = std::max(r.rel_err, first.max_rel_error);
    if (!first.ok && r.first_ok) r.failure = fmt::format("[{}] first order: {}", sample.label, first.failure);
    r.first_ok &= first.ok;
    if (op.second_order) {
      auto second = gradgradcheck(fn, sample.inputs, op.tolerances);
      r.abs_err = std::max(r.abs_err, second.max_abs_error);
      r.rel_err = std::max(r.rel_err, second.max_rel_error);
      if (!second.ok && r.second_ok && r.failure.empty())
        r.failure = fmt::format("[{}] second order: {}", sample.label, second.failure);
      r.second_ok &= second.ok;
    }
    const auto before = forward_ad::rule_counts();
    auto fwd = jvpcheck(fn, sample.inputs, op.tolerances);
    if (r.jvp_kinds.empty()) r.jvp_kinds = kinds_between(before, forward_ad::rule_counts());
    if (!fwd.ok && r.jvp_ok && r.failure.empty()) r.failure = fmt::format("[{}] forward mode: {}", sample.label, fwd.failure);
    r.jvp_ok &= fwd.ok;
    if (device.is_cpu()) continue;
    for (bool single : {false, true}) {
      auto c = compare_with_cpu(op, sample, {device.type, single});
      r.vs_cpu = std::max(r.vs_cpu, c.max_error);
      if (!c.ok && r.vs_cpu_ok && r.failure.empty())
        r.failure = fmt::format("[{}] against the CPU ({}): {}", sample.label, single ? "f32" : "f64", c.failure);
      r.vs_cpu_ok &= c.ok;
    }
  }
  return r;
}

int run_gradcheck(const GradcheckArgs& args) {
  const Device device = parse_device(args.device);
  if (!device.is_cpu()) cuda::require_device(device, "gradcheck --device");
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
  const bool on_dev = !device.is_cpu();
  fmt::print("{:<24} {:>12} {:>12} {:>12} {:>13} {:>22}{}\n", "op", "max abs err", "max rel err", "first order",
             "second order", "forward mode (rule)", on_dev ? fmt::format(" {:>12}", "vs cpu") : "");
  int failures = 0, missing = 0;
  for (const OpInfo* op : ops) {
    if (on_dev && !op->cuda_missing.empty()) {
      ++missing;
      fmt::print("{:<24} no CUDA kernel: {}\n", op->name, op->cuda_missing);
      continue;
    }
    OpResult r;
    try {
      r = check_op(*op, args.seed, device);
    } catch (const Error& e) {
      r.first_ok = r.second_ok = r.jvp_ok = false;
      r.failure = fmt::format("threw: {}", e.what());
    }
    bool ok = r.first_ok && r.second_ok && r.vs_cpu_ok && r.jvp_ok;
    failures += !ok;
    fmt::print("{:<24} {:>12.2e} {:>12.2e} {:>12} {:>13} {:>22}{}\n", op->name, r.abs_err, r.rel_err,
               r.first_ok ? "ok" : "FAIL", !op->second_order ? "n/a" : r.second_ok ? "ok" : "FAIL",
               r.jvp_ok ? "ok (" + r.jvp_kinds + ")" : "FAIL",
               on_dev ? fmt::format(" {:>12}", r.vs_cpu_ok ? fmt::format("{:.1e}", r.vs_cpu) : "FAIL") : "");
    if (!ok) fmt::print("    {}\n", r.failure);
  }
  const size_t checked = ops.size() - missing;
  fmt::print("{} ops checked{}, {} passed, {} failed", checked, on_dev ? " on " + device.str() : "", checked - failures,
             failures);
  if (missing > 0) fmt::print("; {} without CUDA kernels (not checked)", missing);
  fmt::print("\n");
  return failures == 0 ? 0 : 2;
}

struct DistResult {
  double abs_err = 0, rel_err = 0, adjoint = 0;
  bool first_ok = true, second_ok = true, adjoint_ok = true, jvp_ok = true;
  int samples = 0;
  std::string failure;
};

DistResult check_dist_op(const dist::DistOpInfo& op, const dist::ProcessGrid& grid, uint64_t seed) {
  DistResult r;
  auto note = [&](const GradcheckReport& rep, const char* what) {
    r.abs_err = std::max(r.abs_err, rep.max_abs_error);
    r.rel_err = std::max(r.rel_err, rep.max_rel_error);
    if (!rep.ok && r.failure.empty()) r.failure = fmt::format("{}: {}", what, rep.failure);
    return rep.ok;
  };
  for (auto& sample : op.samples(grid, {seed, 1})) {
    ++r.samples;
    r.first_ok &= note(dist::dist_gradcheck(grid, sample), "first order");
    if (op.second_order) r.second_ok &= note(dist::dist_gradgradcheck(grid, sample), "second order");
    r.jvp_ok &= note(dist::dist_jvpcheck(grid, sample), "forward mode");
    if (sample.linear) {
      auto adj = dist::dist_adjoint_check(grid, sample, {seed, 99});
      r.adjoint = std::max(r.adjoint, adj.max_rel_error);
      if (!adj.ok && r.failure.empty()) r.failure = adj.failure;
      r.adjoint_ok &= adj.ok;
    }
  }
  return r;
}

int run_dist_gradcheck(const GradcheckArgs& args) {
  auto world = dist::world_communicator();
  const bool root = world->rank() == 0;
  std::vector<dist::GridSpec> grids;
  if (!args.grid.empty()) grids.push_back(dist::parse_grid(args.grid));
  else grids = dist::all_grids(world->size(), /*with_ensemble=*/true);
  if (!args.op.empty()) GS_CHECK(dist::DistRegistry::find(args.op) != nullptr,
                                 "gradcheck --distributed: unknown distributed op '{}'", args.op);
  int failures = 0, checked = 0;
  for (const auto& spec : grids) {
    auto grid = dist::ProcessGrid::create(world, spec);
    if (root)
      fmt::print("grid {} ({} ranks)\n{:<24} {:>8} {:>12} {:>12} {:>12} {:>13} {:>12} {:>13}\n", spec.str(), spec.size(),
                 "op", "samples", "max abs err", "max rel err", "first order", "second order", "adjoint", "forward mode");
    for (const auto& op : dist::DistRegistry::all()) {
      if (!args.op.empty() && op.name != args.op) continue;
      DistResult r = check_dist_op(op, grid, args.seed);
      const bool ok = r.first_ok && r.second_ok && r.adjoint_ok && r.jvp_ok;
      failures += !ok;
      ++checked;
      if (root) {
        fmt::print("{:<24} {:>8} {:>12.2e} {:>12.2e} {:>12} {:>13} {:>12} {:>13}\n", op.name, r.samples, r.abs_err,
                   r.rel_err, r.first_ok ? "ok" : "FAIL", !op.second_order ? "n/a" : r.second_ok ? "ok" : "FAIL",
                   r.adjoint_ok ? fmt::format("{:.1e}", r.adjoint) : "FAIL", r.jvp_ok ? "ok" : "FAIL");
        if (!ok) fmt::print("    {}\n", r.failure);
      }
    }
  }
  if (root)
    fmt::print("{} (op, grid) pairs checked on {} ranks, {} passed, {} failed\n", checked, world->size(),
               checked - failures, failures);
  return failures == 0 ? 0 : 2;
}

}  // namespace

void add_gradcheck_command(CLI::App& app, CommandRegistry& commands) {
  auto args = std::make_shared<GradcheckArgs>();
  CLI::App* sub = app.add_subcommand(
      "gradcheck", "Check every registered op's backward (first and second order) and forward mode against finite "
                   "differences");
  sub->add_option("--op", args->op, "Check only this op");
  sub->add_option("--seed", args->seed, "Seed for the sample inputs");
  sub->add_option("--device", args->device,
                  "cpu (default), cuda or cuda:N: run each op there (inputs moved with to()), gradcheck it, and "
                  "compare its outputs and gradients in f64 and f32 with the CPU run");
  sub->add_flag("--distributed", args->distributed,
                "Check the distributed registry (collective tape ops) on the ranks of this job (run under mpiexec)");
  sub->add_option("--grid", args->grid,
                  "With --distributed: only this grid DATAxHxW or ENSEMBLExDATAxHxW (default: every grid of the job, "
                  "ensemble axes included)");
  commands.add(sub, [args] { return args->distributed ? run_dist_gradcheck(*args) : run_gradcheck(*args); });
}

}  // namespace gs::tools
