// Subcommands of the `gradsphere` command. Each add_*_command registers its CLI11 subcommand and
// the function that runs it; main() runs the one the user picked.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

namespace gs::tools {

class CommandRegistry {
 public:
  void add(CLI::App* sub, std::function<int()> run) { entries_.push_back({sub, std::move(run)}); }
  int run_selected(const CLI::App& app) const {
    for (const auto& e : entries_)
      if (e.sub->parsed()) return e.run();
    return 1;
  }

 private:
  struct Entry {
    CLI::App* sub;
    std::function<int()> run;
  };
  std::vector<Entry> entries_;
};

void add_gradcheck_command(CLI::App& app, CommandRegistry& commands);
void add_bench_command(CLI::App& app, CommandRegistry& commands);
void add_train_command(CLI::App& app, CommandRegistry& commands);
void add_rollout_command(CLI::App& app, CommandRegistry& commands);

}  // namespace gs::tools
