#include "tools/run_outputs.h"

#include <cmath>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "engine/error.h"
#include "ops/ops.h"
#include "tools/metrics_csv.h"
#include "tools/plot.h"
#include "tools/png_image.h"

namespace gs::tools {
namespace {

// Column `name` of a CSV written by MetricsCsv, as (x, y) pairs keyed by the `step` column; later
// rows with the same step replace earlier ones (a resumed run repeats nothing, but be safe).
std::map<double, double> read_column(const std::filesystem::path& path, const std::string& name) {
  std::map<double, double> out;
  std::ifstream in(path);
  if (!in) return out;
  std::string line;
  if (!std::getline(in, line)) return out;
  auto header = csv_split(line);
  int step_col = -1, col = -1;
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == "step") step_col = static_cast<int>(i);
    if (header[i] == name) col = static_cast<int>(i);
  }
  if (step_col < 0 || col < 0) return out;
  while (std::getline(in, line)) {
    auto f = csv_split(line);
    if (static_cast<int>(f.size()) <= std::max(step_col, col)) continue;  // a row cut short by a crash
    try {
      out[std::stod(f[step_col])] = std::stod(f[col]);
    } catch (const std::exception&) {
    }
  }
  return out;
}

}  // namespace

std::vector<std::filesystem::path> write_maps(const std::filesystem::path& dir, const Tensor& truth,
                                              const Tensor& prediction, const std::vector<std::string>& variables,
                                              const std::vector<int64_t>& leads, double dt_hours, int scale,
                                              const std::string& caption) {
  std::filesystem::create_directories(dir);
  std::vector<std::filesystem::path> written;
  const int64_t n_pred = prediction.size(0), n_truth = truth.defined() ? truth.size(0) : 0;
  for (int64_t k : leads) {
    GS_CHECK(k >= 0 && k < n_pred, "write_maps: lead index {} is outside the {} predicted steps", k, n_pred);
    for (size_t c = 0; c < variables.size(); ++c) {
      const double hours = dt_hours * static_cast<double>(k + 1);
      const std::string cap = fmt::format("{}  lead {:g}h  {}", variables[c], hours, caption);
      const Tensor p = select(select(prediction, 0, k), 0, static_cast<int64_t>(c));
      Image img = k < n_truth ? comparison_image(select(select(truth, 0, k), 0, static_cast<int64_t>(c)), p, scale, cap)
                              : compose_panels({{"prediction", field_image(p, FieldStyle{.scale = scale})}}, cap);
      auto path = dir / fmt::format("{}_lead{:03g}h.png", variables[c], hours);
      write_png(img, path.string());
      written.push_back(path);
    }
  }
  return written;
}

void write_loss_curve(const std::filesystem::path& metrics_csv, const std::filesystem::path& validation_csv,
                      const std::filesystem::path& png) {
  Series train{.label = "train loss"}, val{.label = "validation loss", .points = true};
  for (auto [x, y] : read_column(metrics_csv, "loss")) train.x.push_back(x), train.y.push_back(y);
  for (auto [x, y] : read_column(validation_csv, "val_loss")) val.x.push_back(x), val.y.push_back(y);
  write_plot(png.string(), {train, val},
             PlotOptions{.title = "loss (area-weighted MSE, normalised units)", .x_label = "step", .log_y = true});
}

void write_skill_plot(const ValidationScores& s, const std::filesystem::path& png) {
  std::vector<Series> series;
  for (size_t c = 0; c < s.variables.size(); ++c) {
    Series v{.label = s.variables[c], .x = s.lead_hours};
    for (size_t k = 0; k < s.lead_hours.size(); ++k)
      v.y.push_back(s.persistence[k][c] > 0 ? s.rmse[k][c] / s.persistence[k][c] : std::nan(""));
    series.push_back(v);
  }
  Series one{.label = "persistence", .x = s.lead_hours, .y = std::vector<double>(s.lead_hours.size(), 1.0),
             .color = kGrey};
  series.push_back(one);
  write_plot(png.string(), series,
             PlotOptions{.title = "RMSE / persistence RMSE (below 1: better than persistence)",
                         .x_label = "lead (hours)"});
}

void write_ensemble_plots(const ValidationScores& s, const std::filesystem::path& spread_skill_png,
                          const std::filesystem::path& rank_histogram_png) {
  std::vector<Series> series;
  for (size_t c = 0; c < s.variables.size(); ++c) {
    Series v{.label = s.variables[c], .x = s.lead_hours};
    for (size_t k = 0; k < s.lead_hours.size(); ++k) v.y.push_back(s.spread_skill[k][c]);
    series.push_back(v);
  }
  series.push_back(Series{.label = "calibrated", .x = s.lead_hours, .y = std::vector<double>(s.lead_hours.size(), 1.0),
                          .color = kGrey});
  write_plot(spread_skill_png.string(), series,
             PlotOptions{.title = fmt::format("spread/skill, {} members (1: calibrated)", s.members),
                         .x_label = "lead (hours)"});
  Series ranks{.label = "truth's rank", .points = true};
  for (size_t r = 0; r < s.rank_histogram.size(); ++r) ranks.x.push_back(static_cast<double>(r)), ranks.y.push_back(s.rank_histogram[r]);
  const double flat = 1.0 / static_cast<double>(s.rank_histogram.size());
  Series uniform{.label = "flat (calibrated)", .x = ranks.x, .y = std::vector<double>(ranks.x.size(), flat), .color = kGrey};
  write_plot(rank_histogram_png.string(), {ranks, uniform},
             PlotOptions{.title = "rank histogram (area-weighted, all leads)",
                         .x_label = "members below the truth", .y_label = "share"});
}

}  // namespace gs::tools
