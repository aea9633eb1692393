// The `gradsphere` command: one binary, one subcommand per job. Library errors (gs::Error) and
// errors of the environment (file system, memory) are printed as "error: ..." and exit with status
// 1; a failed check exits with status 2; anything else is a bug: "internal error", status 3.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <new>
#include <string>

#include "distributed/world.h"
#include "engine/error.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"gradsphere: reverse-mode autodiff, spherical harmonic transforms and SFNO training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gradsphere 0.1.0");
  gs::tools::CommandRegistry commands;
  gs::tools::add_gradcheck_command(app, commands);
  gs::tools::add_bench_command(app, commands);
  gs::tools::add_train_command(app, commands);
  gs::tools::add_rollout_command(app, commands);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return commands.run_selected(app);
  } catch (const gs::AgreedError& e) {
    // Every rank is here together: no one waits in a collective, so the job ends cleanly, with one
    // message (MPI is finalised at exit).
    if (gs::dist::launcher_rank() == 0) std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const gs::Error& e) {
    // Under a launcher, the other ranks may be waiting in a collective for this one: end them all.
    if (gs::dist::launcher_world_size() > 1) gs::dist::abort_job(e.what(), 1);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // The environment, not a bug: a path under a regular file, a read-only or full file system, a
    // permission. The message names the path(s) and the cause.
    const std::string message = std::string(e.what());
    if (gs::dist::launcher_world_size() > 1) gs::dist::abort_job(message, 1);
    std::fprintf(stderr, "error: %s\n", message.c_str());
    return 1;
  } catch (const std::bad_alloc&) {
    const std::string message =
        "out of memory: an allocation outside the tensors failed (std::bad_alloc); the job needs more memory than "
        "this machine or its limits (ulimit -v, the container) give it";
    if (gs::dist::launcher_world_size() > 1) gs::dist::abort_job(message, 1);
    std::fprintf(stderr, "error: %s\n", message.c_str());
    return 1;
  } catch (const std::exception& e) {
    if (gs::dist::launcher_world_size() > 1) gs::dist::abort_job(std::string("internal error: ") + e.what(), 3);
    std::fprintf(stderr, "internal error: %s\n", e.what());
    return 3;
  }
}
