// Pictures for `gradsphere train` and `gradsphere rollout`: an RGBA canvas, PNG output (libpng,
// written to a temporary file and renamed so a reader never sees half an image), colour-mapped
// fields with a colour bar, a panel composer (truth | prediction | error), and an embedded 5x7
// bitmap font so titles and tick labels need no font files.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tensor.h"

namespace gs::tools {

struct Rgba {
  uint8_t r = 0, g = 0, b = 0, a = 255;
  bool operator==(const Rgba&) const = default;
};

inline constexpr Rgba kWhite{255, 255, 255};
inline constexpr Rgba kBlack{0, 0, 0};
inline constexpr Rgba kGrey{150, 150, 150};
// Non-finite field values: magenta appears in neither colour map, so a NaN cannot pass for data.
inline constexpr Rgba kNanColor{255, 0, 255};

// An 8-bit RGBA canvas, row-major, (0, 0) at the top left.
class Image {
 public:
  Image(int width, int height, Rgba fill = kWhite);
  int width() const { return width_; }
  int height() const { return height_; }
  Rgba at(int x, int y) const;       // throws outside the image
  void set(int x, int y, Rgba c);    // drawing clips: outside the image does nothing
  void fill_rect(int x, int y, int w, int h, Rgba c);  // clipped
  void blit(const Image& src, int x, int y);           // clipped, alpha ignored
  const std::vector<uint8_t>& rgba() const { return px_; }

 private:
  int width_, height_;
  std::vector<uint8_t> px_;
};

// Writes `img` as an 8-bit RGB PNG (or RGBA with keep_alpha) to `path` + ".tmp", then renames it.
void write_png(const Image& img, const std::string& path, bool keep_alpha = false);

// ---- text: printable ASCII; other bytes draw as '?'. Glyphs are 5x7 pixels (plus 2 rows of
// descenders: text_height is 9), 6 apart, all times scale.
int text_width(std::string_view text, int scale = 1);
int text_height(int scale = 1);
void draw_text(Image& img, int x, int y, std::string_view text, Rgba color, int scale = 1);
// A short label for a tick or colour bar value: 3 significant digits, "1.5e-05" style when needed.
std::string short_number(double v);

// ---- colour maps
enum class Colormap {
  viridis,    // perceptual, dark purple -> blue -> green -> yellow: fields
  diverging,  // blue -> white -> red, white at the middle: errors (use a range symmetric about 0)
};
// The colour at t in [0, 1] (clamped; NaN gives kNanColor).
Rgba colormap_color(Colormap cmap, double t);

struct ValueRange {
  double lo = 0, hi = 1;
};

struct FieldStyle {
  Colormap cmap = Colormap::viridis;
  // Fixed range (share it between truth and prediction); when unset, the finite min and max
  // (diverging: -max|v| .. +max|v|, so zero is white).
  std::optional<ValueRange> range = std::nullopt;
  int scale = 1;          // nearest-neighbour upscaling, so a 32x64 map is visible
  bool colorbar = true;   // a bar under the map labelled with its low, middle and high values
};

// The range FieldStyle uses when none is given. All values non-finite gives [0, 1].
ValueRange auto_range(std::span<const double> values, Colormap cmap);
// A (height, width) field, row-major, row 0 at the top (north). Values outside the range are
// clamped; NaN and +-Inf are drawn in kNanColor. A constant field maps to the middle colour.
Image field_image(std::span<const double> values, int64_t height, int64_t width, const FieldStyle& style);
// The same for a tensor of shape (H, W), or (1, ..., 1, H, W), of dtype f32 or f64 on any device.
Image field_image(const Tensor& field, const FieldStyle& style);
// The values of such a tensor (row-major), checking shape and dtype; sets height and width.
std::vector<double> field_values(const Tensor& field, int64_t& height, int64_t& width);

// ---- panels side by side, each with a title above it, on a white background.
struct Panel {
  std::string title;
  Image image;
};
Image compose_panels(const std::vector<Panel>& panels, std::string_view caption = "", int title_scale = 2);

// truth | prediction | error: truth and prediction on one shared scale, the error
// (prediction - truth) diverging and symmetric about 0. Both fields (H, W) as for field_image.
Image comparison_image(const Tensor& truth, const Tensor& prediction, int scale = 1, std::string_view caption = "");

}  // namespace gs::tools
