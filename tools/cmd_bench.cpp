// `gradsphere bench NAME [--quick] [--csv FILE]`: speed and memory measurements. Timings belong here, never in
// the test suite.
#include <map>
#include <memory>

#include "engine/error.h"
#include "tools/bench/benches.h"
#include "tools/commands.h"

namespace gs::tools {
namespace {

struct BenchArgs {
  std::string name;
  BenchOptions options;
};

const std::map<std::string, int (*)(const BenchOptions&)>& benches() {
  static const std::map<std::string, int (*)(const BenchOptions&)> b = {
      {"engine", &bench_engine}, {"sht", &bench_sht}, {"train", &bench_train}, {"comm", &bench_comm}, {"dist", &bench_dist},
      {"data", &bench_data}, {"ensemble", &bench_ensemble}, {"memory", &bench_memory}};
  return b;
}

int run_bench(const BenchArgs& args) {
  auto it = benches().find(args.name);
  if (it == benches().end()) {
    std::string names;
    for (const auto& [n, f] : benches()) names += (names.empty() ? "" : ", ") + n;
    fail("bench: unknown benchmark '{}'; available: {}", args.name, names);
  }
  const Device d = parse_device(args.options.device);
  if (!d.is_cpu()) {
    GS_CHECK(args.name == "engine" || args.name == "sht" || args.name == "train",
             "bench {} --device {}: expected --device cpu for `bench {}`; engine, sht and train run on a GPU "
             "(comm and dist measure the MPI layer, which stages through host memory)", args.name, d, args.name);
    if (args.name == "engine") return bench_engine_cuda(args.options, d);
    if (args.name == "sht") return bench_sht_cuda(args.options, d);
  }
  return it->second(args.options);
}

}  // namespace

void add_bench_command(CLI::App& app, CommandRegistry& commands) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* sub = app.add_subcommand("bench", "Measure speed against baselines run in the same process");
  sub->add_option("name", args->name, "Which benchmark (engine, sht, train, memory, data, ensemble, comm, dist: run comm and dist under mpiexec -n N)")->required();
  sub->add_flag("--quick", args->options.quick, "Small sizes (a smoke run, not a measurement)");
  sub->add_option("--csv", args->options.csv, "Also write the results to this CSV file (sht, train, ensemble)");
  sub->add_option("--device", args->options.device, "bench engine, sht, train: cpu (default), cuda or cuda:N");
  sub->add_flag("--bf16-mlp", args->options.bf16_mlp,
                "bench train: each case also with bf16 MLP storage (mlp_storage bf16), in the next row");
  sub->add_option("--grid", args->options.grid,
                  "bench data, ensemble under mpiexec: the process grid DATAxHxW or ENSEMBLExDATAxHxW");
  sub->add_option("--case", args->options.sht_case,
                  "bench sht: only this case, GRID:NLATxNLON (e.g. legendre-gauss:180x360; tools/compare_sht.py "
                  "runs the cases one at a time beside the references)");
  sub->add_flag("--train", args->options.train_only, "bench dist: only the training steps (time and bytes by collective)");
  sub->add_flag("--pipeline", args->options.pipeline_only,
                "bench dist: only the pipelined transposes against the unpipelined path");
  commands.add(sub, [args] { return run_bench(*args); });
}

}  // namespace gs::tools
