// Pictures and tables a run leaves behind: truth | prediction | error maps per variable and lead,
// the loss curve from the metrics files, and the skill-by-lead plot (model RMSE over persistence).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "tools/validation.h"

namespace gs::tools {

// truth and prediction (n, C, H, W) in physical units (prediction may be longer than truth, then
// the leads without truth are drawn alone); writes <dir>/<variable>_lead<hours>h.png for the leads
// in `leads` (0-based steps). Returns the paths written.
std::vector<std::filesystem::path> write_maps(const std::filesystem::path& dir, const Tensor& truth,
                                              const Tensor& prediction, const std::vector<std::string>& variables,
                                              const std::vector<int64_t>& leads, double dt_hours, int scale,
                                              const std::string& caption);

// Reads metrics.csv (columns step, loss) and validation.csv (step, val_loss) and plots both.
void write_loss_curve(const std::filesystem::path& metrics_csv, const std::filesystem::path& validation_csv,
                      const std::filesystem::path& png);

// RMSE / persistence RMSE per variable against lead time (below 1: the model beats persistence).
void write_skill_plot(const ValidationScores& scores, const std::filesystem::path& png);
// An ensemble's: the spread-skill ratio by lead per variable (1: calibrated), and the rank histogram
// (flat: calibrated; U: too little spread; dome: too much).
void write_ensemble_plots(const ValidationScores& scores, const std::filesystem::path& spread_skill_png,
                          const std::filesystem::path& rank_histogram_png);

}  // namespace gs::tools
