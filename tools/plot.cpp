// Line plots (see plot.h). Everything is drawn on an Image with the bitmap font; no plotting library.
#include "tools/plot.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "engine/error.h"

namespace gs::tools {

namespace {

constexpr Rgba kGridColor{228, 228, 228};
constexpr Rgba kAxisColor{60, 60, 60};

// A point that survived filtering, in data coordinates (y already log10 on a log axis).
struct Pt {
  double x, y;
  bool valid;
};

std::vector<Pt> usable_points(const Series& s, bool log_y) {
  std::vector<Pt> out(s.y.size());
  for (size_t i = 0; i < s.y.size(); ++i) {
    double x = s.x.empty() ? static_cast<double>(i) : s.x[i], y = s.y[i];
    bool ok = std::isfinite(x) && std::isfinite(y) && (!log_y || y > 0);
    out[i] = {x, ok && log_y ? std::log10(y) : y, ok};
  }
  return out;
}

// A degenerate range (one point, or a flat curve) is widened so the data sits in the middle.
void widen(double& lo, double& hi) {
  if (hi > lo) return;
  double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
  lo -= pad, hi += pad;
}

// m * 10^e, by division for negative e so 0.1-steps land on the doubles nearest 0.1, 0.2, 0.3 ...
double scaled(double m, int e) { return e >= 0 ? m * std::pow(10.0, e) : m / std::pow(10.0, -e); }

// The 1, 2 or 5 x 10^e step closest above `raw`.
std::pair<double, int> nice_step(double raw) {
  int e = static_cast<int>(std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= scaled(m, e) * (1 + 1e-9)) return {m, e};
  return {1.0, e + 1};
}

// Draws a line `thick` pixels wide from (x0, y0) to (x1, y1), only inside the clip box.
struct Clip {
  int x0, y0, x1, y1;  // inclusive
};

void stamp(Image& img, int x, int y, int size, Rgba c, const Clip& clip) {
  for (int dy = 0; dy < size; ++dy)
    for (int dx = 0; dx < size; ++dx) {
      int px = x + dx - size / 2, py = y + dy - size / 2;
      if (px >= clip.x0 && px <= clip.x1 && py >= clip.y0 && py <= clip.y1) img.set(px, py, c);
    }
}

void draw_line(Image& img, int x0, int y0, int x1, int y1, Rgba c, int thick, const Clip& clip) {
  int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, err = dx + dy;
  while (true) {  // Bresenham
    stamp(img, x0, y0, thick, c, clip);
    if (x0 == x1 && y0 == y1) break;
    int e2 = 2 * err;
    if (e2 >= dy) err += dy, x0 += sx;
    if (e2 <= dx) err += dx, y0 += sy;
  }
}

void draw_marker(Image& img, int x, int y, Rgba c, const Clip& clip) {
  for (int dy = -3; dy <= 3; ++dy)
    for (int dx = -3; dx <= 3; ++dx)
      if (dx * dx + dy * dy <= 10 && x + dx >= clip.x0 && x + dx <= clip.x1 && y + dy >= clip.y0 && y + dy <= clip.y1)
        img.set(x + dx, y + dy, c);
}

}  // namespace

Rgba series_color(size_t k) {
  static constexpr std::array<Rgba, 10> kPalette = {{{31, 119, 180}, {255, 127, 14}, {44, 160, 44}, {214, 39, 40},
                                                      {148, 103, 189}, {140, 86, 75}, {227, 119, 194}, {127, 127, 127},
                                                      {188, 189, 34}, {23, 190, 207}}};
  return kPalette[k % kPalette.size()];
}

std::vector<double> linear_ticks(double lo, double hi, int target) {
  std::vector<double> out;
  if (!(hi > lo) || !std::isfinite(hi - lo) || target < 1) return out;
  auto [m, e] = nice_step((hi - lo) / target);
  const double step = scaled(m, e);
  for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k += 1)
    out.push_back(k == 0 ? 0.0 : scaled(k * m, e));  // k == 0: no "-0" label
  return out;
}

std::vector<double> log_ticks(double lo, double hi) {
  std::vector<double> out;
  if (!(lo > 0) || !(hi > lo) || !std::isfinite(hi)) return out;
  int first = static_cast<int>(std::ceil(std::log10(lo) - 1e-9)),
      last = static_cast<int>(std::floor(std::log10(hi) + 1e-9));
  if (last - first >= 1) {  // at least two powers of ten: label decades, thinned to about 8
    int every = std::max(1, (last - first + 1 + 7) / 8);
    for (int e = first; e <= last; e += every) out.push_back(scaled(1, e));
    return out;
  }
  for (int e = first - 1; e <= last; ++e)
    for (double m : {1.0, 2.0, 5.0}) {
      double v = scaled(m, e);
      if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) out.push_back(v);
    }
  if (out.size() >= 2) return out;
  return linear_ticks(lo, hi, 4);  // a range narrower than 1-2-5 steps: plain values
}

Image plot_image(const std::vector<Series>& series, const PlotOptions& opt) {
  GS_CHECK(opt.width >= 200 && opt.height >= 150 && opt.width <= 8000 && opt.height <= 8000,
           "plot: expected a size between 200 x 150 and 8000 x 8000 pixels, got {} x {}", opt.width, opt.height);
  std::vector<std::vector<Pt>> pts;
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (const Series& s : series) {
    GS_CHECK(s.x.empty() || s.x.size() == s.y.size(), "plot: series '{}' has {} x values but {} y values", s.label,
             s.x.size(), s.y.size());
    pts.push_back(usable_points(s, opt.log_y));
    for (const Pt& p : pts.back())
      if (p.valid)
        xlo = std::min(xlo, p.x), xhi = std::max(xhi, p.x), ylo = std::min(ylo, p.y), yhi = std::max(yhi, p.y);
  }
  const bool no_data = xlo > xhi;
  if (no_data) xlo = 0, xhi = 1, ylo = 0, yhi = 1;  // (log axis: 1 .. 10)
  widen(xlo, xhi);
  widen(ylo, yhi);
  const double ypad = 0.05 * (yhi - ylo);  // keep the curve off the frame
  ylo -= ypad, yhi += ypad;

  // Ticks, in data units; on a log axis the axis runs in log10 units.
  std::vector<double> xt = linear_ticks(xlo, xhi, 6);
  std::vector<double> yt = opt.log_y ? log_ticks(std::pow(10.0, ylo), std::pow(10.0, yhi)) : linear_ticks(ylo, yhi, 6);
  std::vector<std::string> ylabels;
  int ylabel_w = 0;
  for (double v : yt) ylabels.push_back(short_number(v)), ylabel_w = std::max(ylabel_w, text_width(ylabels.back()));

  const int th = text_height();
  const int left = ylabel_w + 14, right = opt.width - 16;
  const int top = 10 + (opt.title.empty() ? 0 : 2 * th + 8) + (opt.y_label.empty() ? 0 : th + 6);
  const int bottom = opt.height - (th + 10) - (opt.x_label.empty() ? 0 : th + 8);
  GS_CHECK(right - left >= 40 && bottom - top >= 40, "plot: {} x {} pixels leave no room for the plot area",
           opt.width, opt.height);
  const Clip area{left, top, right, bottom};
  // Pixel coordinates are clamped near the canvas: with values near the double limits the spans
  // overflow to inf and a NaN coordinate must not send the line drawer across 2^31 pixels.
  auto to_pixel = [&](double v) {
    double lim = 2.0 * std::max(opt.width, opt.height);
    return static_cast<int>(std::isnan(v) ? -lim : std::clamp(v, -lim, lim));
  };
  auto px = [&](double x) { return to_pixel(left + std::round((x - xlo) / (xhi - xlo) * (right - left))); };
  auto py = [&](double y) { return to_pixel(bottom - std::round((y - ylo) / (yhi - ylo) * (bottom - top))); };

  Image img(opt.width, opt.height);
  if (!opt.title.empty()) draw_text(img, (opt.width - text_width(opt.title, 2)) / 2, 10, opt.title, kBlack, 2);
  if (!opt.y_label.empty()) draw_text(img, 4, top - th - 6, opt.y_label, kBlack);
  if (!opt.x_label.empty())
    draw_text(img, (left + right - text_width(opt.x_label)) / 2, opt.height - th - 6, opt.x_label, kBlack);
  for (double v : xt) {
    int x = px(v);
    img.fill_rect(x, top, 1, bottom - top, kGridColor);
    img.fill_rect(x, bottom, 1, 4, kAxisColor);
    std::string s = short_number(v);
    draw_text(img, x - text_width(s) / 2, bottom + 7, s, kBlack);
  }
  for (size_t k = 0; k < yt.size(); ++k) {
    int y = py(opt.log_y ? std::log10(yt[k]) : yt[k]);
    img.fill_rect(left, y, right - left, 1, kGridColor);
    img.fill_rect(left - 4, y, 4, 1, kAxisColor);
    draw_text(img, left - 7 - text_width(ylabels[k]), y - th / 2, ylabels[k], kBlack);
  }
  // The frame.
  img.fill_rect(left, top, right - left + 1, 1, kAxisColor);
  img.fill_rect(left, bottom, right - left + 1, 1, kAxisColor);
  img.fill_rect(left, top, 1, bottom - top + 1, kAxisColor);
  img.fill_rect(right, top, 1, bottom - top + 1, kAxisColor);

  for (size_t k = 0; k < series.size(); ++k) {
    Rgba c = series[k].color.value_or(series_color(k));
    const std::vector<Pt>& p = pts[k];
    for (size_t i = 0; i < p.size(); ++i) {
      if (!p[i].valid) continue;
      int x = px(p[i].x), y = py(p[i].y);
      bool prev = i > 0 && p[i - 1].valid, next = i + 1 < p.size() && p[i + 1].valid;
      if (series[k].points || (!prev && !next)) draw_marker(img, x, y, c, area);  // a lone point stays visible
      if (!series[k].points && next) draw_line(img, x, y, px(p[i + 1].x), py(p[i + 1].y), c, 2, area);
    }
  }

  // Legend, top right inside the plot area; a series with nothing to draw says so.
  std::vector<std::pair<std::string, size_t>> entries;
  for (size_t k = 0; k < series.size(); ++k) {
    if (series[k].label.empty()) continue;
    bool any = std::any_of(pts[k].begin(), pts[k].end(), [](const Pt& p) { return p.valid; });
    entries.push_back({series[k].label + (any ? "" : " (no data)"), k});
  }
  if (!entries.empty()) {
    int w = 0;
    for (auto& e : entries) w = std::max(w, text_width(e.first));
    const int row = th + 6, box_w = w + 36, box_h = static_cast<int>(entries.size()) * row + 8;
    const int bx = right - box_w - 8, by = top + 8;
    img.fill_rect(bx, by, box_w, box_h, kWhite);
    img.fill_rect(bx, by, box_w, 1, kGrey), img.fill_rect(bx, by + box_h - 1, box_w, 1, kGrey);
    img.fill_rect(bx, by, 1, box_h, kGrey), img.fill_rect(bx + box_w - 1, by, 1, box_h, kGrey);
    for (size_t i = 0; i < entries.size(); ++i) {
      size_t k = entries[i].second;
      Rgba c = series[k].color.value_or(series_color(k));
      int y = by + 4 + static_cast<int>(i) * row, mid = y + th / 2;
      const Clip all{0, 0, opt.width - 1, opt.height - 1};
      if (series[k].points) draw_marker(img, bx + 14, mid, c, all);
      else draw_line(img, bx + 6, mid, bx + 22, mid, c, 2, all);
      draw_text(img, bx + 28, y, entries[i].first, kBlack);
    }
  }
  if (no_data) {
    const char* msg = "no data";
    draw_text(img, (left + right - text_width(msg, 2)) / 2, (top + bottom) / 2 - th, msg, kGrey, 2);
  }
  return img;
}

void write_plot(const std::string& path, const std::vector<Series>& series, const PlotOptions& options) {
  write_png(plot_image(series, options), path);
}

}  // namespace gs::tools
