// Line plots to PNG for training curves: several series (train loss per step as a line, validation
// loss as points), linear or log y axis, ticks labelled with the bitmap font, a legend.
// Non-finite values (and values <= 0 on a log axis) are skipped and break the line; empty series
// and an all-empty plot still give a valid picture.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "tools/png_image.h"

namespace gs::tools {

struct Series {
  std::string label = "";  // shown in the legend (none when empty)
  std::vector<double> x = {};  // empty: 0, 1, 2, ...
  std::vector<double> y = {};
  bool points = false;    // markers only (validation points) instead of a line
  std::optional<Rgba> color = std::nullopt;  // default: the palette colour of the series' index
};

struct PlotOptions {
  std::string title = "";
  std::string x_label = "step";
  std::string y_label = "";
  bool log_y = false;
  int width = 800;
  int height = 480;
};

Image plot_image(const std::vector<Series>& series, const PlotOptions& options);
// plot_image written as a PNG (atomically, see write_png).
void write_plot(const std::string& path, const std::vector<Series>& series, const PlotOptions& options);

// The colour of series k: ten well-separated colours, then round again.
Rgba series_color(size_t k);
// Tick positions: "nice" values (1, 2, 5 x 10^k steps) inside [lo, hi], about `target` of them.
std::vector<double> linear_ticks(double lo, double hi, int target = 6);
// Ticks for a log axis on [lo, hi] (lo > 0): powers of ten, or 1-2-5 steps inside one decade.
std::vector<double> log_ticks(double lo, double hi);

}  // namespace gs::tools
