// `gradsphere rollout CHECKPOINT --data FILES --steps N`: forced inference as ACE runs it. From the
// state at --start of the files, the model steps N times, each step fed the forcing of its input
// time from the files (the configuration's variable roles, as in training), the prognostic
// prediction fed back, diagnostics predicted alongside. Each step's prediction is written through
// to predictions.nc (CF, the files' time units and calendar) as it is made, and the metrics of
// inference_metrics.h are accumulated, so memory stays flat however long the run. At the end:
// global_means.csv and global_means/<variable>.png (prediction against truth per step),
// time_mean_bias/<variable>.png, inference_metrics.csv (RMSE of the time mean, global-mean bias).
// Under mpiexec every rank reads and steps its tile; world rank 0 gathers and writes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gs::tools {

struct ForcedRolloutArgs {
  std::string checkpoint;
  std::vector<std::string> data;  // NetCDF files (joined along time as data.netcdf.join says)
  int64_t steps = 0;
  int64_t start = 0;       // the state index the rollout starts from
  int64_t trajectory = 0;  // which trajectory of the files (several files read as separate ones)
  std::string out;
  std::string grid;
  int map_scale = 0;  // 0: the configuration's output.map_scale
};

int run_forced_rollout(const ForcedRolloutArgs& args);

}  // namespace gs::tools
