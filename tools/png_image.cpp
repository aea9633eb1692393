// PNG output, colour maps, field images, panels and the embedded bitmap font.
#include "tools/png_image.h"

#include <png.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>

#include "engine/error.h"
#include "models/atomic_file.h"

namespace gs::tools {

namespace {

// 5x7 glyphs for ASCII 32..126 in a 5x9 cell: rows 0-6 hold capitals and digits, rows 7-8 the
// descenders of g, j, p, q, y (without them "g" reads as "9"). One byte per row, top row first,
// bit 4 = leftmost column. Drawn for this project.
constexpr uint8_t kFont[95][9] = {
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00},  // ' '
    {0x04, 0x04, 0x04, 0x04, 0x04, 0x00, 0x04, 0x00, 0x00},  // '!'
    {0x0a, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00},  // '"'
    {0x0a, 0x0a, 0x1f, 0x0a, 0x1f, 0x0a, 0x0a, 0x00, 0x00},  // '#'
    {0x04, 0x0f, 0x14, 0x0e, 0x05, 0x1e, 0x04, 0x00, 0x00},  // '$'
    {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03, 0x00, 0x00},  // '%'
    {0x0c, 0x12, 0x14, 0x08, 0x15, 0x12, 0x0d, 0x00, 0x00},  // '&'
    {0x04, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00},  // "'"
    {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02, 0x00, 0x00},  // '('
    {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08, 0x00, 0x00},  // ')'
    {0x00, 0x04, 0x15, 0x0e, 0x15, 0x04, 0x00, 0x00, 0x00},  // '*'
    {0x00, 0x04, 0x04, 0x1f, 0x04, 0x04, 0x00, 0x00, 0x00},  // '+'
    {0x00, 0x00, 0x00, 0x00, 0x0c, 0x04, 0x08, 0x00, 0x00},  // ','
    {0x00, 0x00, 0x00, 0x1f, 0x00, 0x00, 0x00, 0x00, 0x00},  // '-'
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x0c, 0x00, 0x00},  // '.'
    {0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00, 0x00, 0x00},  // '/'
    {0x0e, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0e, 0x00, 0x00},  // '0'
    {0x04, 0x0c, 0x04, 0x04, 0x04, 0x04, 0x0e, 0x00, 0x00},  // '1'
    {0x0e, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1f, 0x00, 0x00},  // '2'
    {0x1f, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0e, 0x00, 0x00},  // '3'
    {0x02, 0x06, 0x0a, 0x12, 0x1f, 0x02, 0x02, 0x00, 0x00},  // '4'
    {0x1f, 0x10, 0x1e, 0x01, 0x01, 0x11, 0x0e, 0x00, 0x00},  // '5'
    {0x06, 0x08, 0x10, 0x1e, 0x11, 0x11, 0x0e, 0x00, 0x00},  // '6'
    {0x1f, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08, 0x00, 0x00},  // '7'
    {0x0e, 0x11, 0x11, 0x0e, 0x11, 0x11, 0x0e, 0x00, 0x00},  // '8'
    {0x0e, 0x11, 0x11, 0x0f, 0x01, 0x02, 0x0c, 0x00, 0x00},  // '9'
    {0x00, 0x0c, 0x0c, 0x00, 0x0c, 0x0c, 0x00, 0x00, 0x00},  // ':'
    {0x00, 0x0c, 0x0c, 0x00, 0x0c, 0x04, 0x08, 0x00, 0x00},  // ';'
    {0x02, 0x04, 0x08, 0x10, 0x08, 0x04, 0x02, 0x00, 0x00},  // '<'
    {0x00, 0x00, 0x1f, 0x00, 0x1f, 0x00, 0x00, 0x00, 0x00},  // '='
    {0x08, 0x04, 0x02, 0x01, 0x02, 0x04, 0x08, 0x00, 0x00},  // '>'
    {0x0e, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04, 0x00, 0x00},  // '?'
    {0x0e, 0x11, 0x01, 0x0d, 0x15, 0x15, 0x0e, 0x00, 0x00},  // '@'
    {0x0e, 0x11, 0x11, 0x1f, 0x11, 0x11, 0x11, 0x00, 0x00},  // 'A'
    {0x1e, 0x11, 0x11, 0x1e, 0x11, 0x11, 0x1e, 0x00, 0x00},  // 'B'
    {0x0e, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0e, 0x00, 0x00},  // 'C'
    {0x1c, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1c, 0x00, 0x00},  // 'D'
    {0x1f, 0x10, 0x10, 0x1e, 0x10, 0x10, 0x1f, 0x00, 0x00},  // 'E'
    {0x1f, 0x10, 0x10, 0x1e, 0x10, 0x10, 0x10, 0x00, 0x00},  // 'F'
    {0x0e, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0f, 0x00, 0x00},  // 'G'
    {0x11, 0x11, 0x11, 0x1f, 0x11, 0x11, 0x11, 0x00, 0x00},  // 'H'
    {0x0e, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0e, 0x00, 0x00},  // 'I'
    {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0c, 0x00, 0x00},  // 'J'
    {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11, 0x00, 0x00},  // 'K'
    {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1f, 0x00, 0x00},  // 'L'
    {0x11, 0x1b, 0x15, 0x15, 0x11, 0x11, 0x11, 0x00, 0x00},  // 'M'
    {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11, 0x00, 0x00},  // 'N'
    {0x0e, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0e, 0x00, 0x00},  // 'O'
    {0x1e, 0x11, 0x11, 0x1e, 0x10, 0x10, 0x10, 0x00, 0x00},  // 'P'
    {0x0e, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0d, 0x00, 0x00},  // 'Q'
    {0x1e, 0x11, 0x11, 0x1e, 0x14, 0x12, 0x11, 0x00, 0x00},  // 'R'
    {0x0f, 0x10, 0x10, 0x0e, 0x01, 0x01, 0x1e, 0x00, 0x00},  // 'S'
    {0x1f, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x00, 0x00},  // 'T'
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0e, 0x00, 0x00},  // 'U'
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x0a, 0x04, 0x00, 0x00},  // 'V'
    {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0a, 0x00, 0x00},  // 'W'
    {0x11, 0x11, 0x0a, 0x04, 0x0a, 0x11, 0x11, 0x00, 0x00},  // 'X'
    {0x11, 0x11, 0x0a, 0x04, 0x04, 0x04, 0x04, 0x00, 0x00},  // 'Y'
    {0x1f, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1f, 0x00, 0x00},  // 'Z'
    {0x0e, 0x08, 0x08, 0x08, 0x08, 0x08, 0x0e, 0x00, 0x00},  // '['
    {0x00, 0x10, 0x08, 0x04, 0x02, 0x01, 0x00, 0x00, 0x00},  // '\\'
    {0x0e, 0x02, 0x02, 0x02, 0x02, 0x02, 0x0e, 0x00, 0x00},  // ']'
    {0x04, 0x0a, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00},  // '^'
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1f, 0x00, 0x00},  // '_'
    {0x08, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00},  // '`'
    {0x00, 0x00, 0x0e, 0x01, 0x0f, 0x11, 0x0f, 0x00, 0x00},  // 'a'
    {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1e, 0x00, 0x00},  // 'b'
    {0x00, 0x00, 0x0e, 0x10, 0x10, 0x11, 0x0e, 0x00, 0x00},  // 'c'
    {0x01, 0x01, 0x0d, 0x13, 0x11, 0x11, 0x0f, 0x00, 0x00},  // 'd'
    {0x00, 0x00, 0x0e, 0x11, 0x1f, 0x10, 0x0e, 0x00, 0x00},  // 'e'
    {0x06, 0x09, 0x08, 0x1c, 0x08, 0x08, 0x08, 0x00, 0x00},  // 'f'
    {0x00, 0x00, 0x0f, 0x11, 0x11, 0x11, 0x0f, 0x01, 0x0e},  // 'g'
    {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11, 0x00, 0x00},  // 'h'
    {0x04, 0x00, 0x0c, 0x04, 0x04, 0x04, 0x0e, 0x00, 0x00},  // 'i'
    {0x02, 0x00, 0x06, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0c},  // 'j'
    {0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12, 0x00, 0x00},  // 'k'
    {0x0c, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0e, 0x00, 0x00},  // 'l'
    {0x00, 0x00, 0x1a, 0x15, 0x15, 0x11, 0x11, 0x00, 0x00},  // 'm'
    {0x00, 0x00, 0x16, 0x19, 0x11, 0x11, 0x11, 0x00, 0x00},  // 'n'
    {0x00, 0x00, 0x0e, 0x11, 0x11, 0x11, 0x0e, 0x00, 0x00},  // 'o'
    {0x00, 0x00, 0x1e, 0x11, 0x11, 0x11, 0x1e, 0x10, 0x10},  // 'p'
    {0x00, 0x00, 0x0f, 0x11, 0x11, 0x11, 0x0f, 0x01, 0x01},  // 'q'
    {0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10, 0x00, 0x00},  // 'r'
    {0x00, 0x00, 0x0e, 0x10, 0x0e, 0x01, 0x1e, 0x00, 0x00},  // 's'
    {0x08, 0x08, 0x1c, 0x08, 0x08, 0x09, 0x06, 0x00, 0x00},  // 't'
    {0x00, 0x00, 0x11, 0x11, 0x11, 0x13, 0x0d, 0x00, 0x00},  // 'u'
    {0x00, 0x00, 0x11, 0x11, 0x11, 0x0a, 0x04, 0x00, 0x00},  // 'v'
    {0x00, 0x00, 0x11, 0x11, 0x15, 0x15, 0x0a, 0x00, 0x00},  // 'w'
    {0x00, 0x00, 0x11, 0x0a, 0x04, 0x0a, 0x11, 0x00, 0x00},  // 'x'
    {0x00, 0x00, 0x11, 0x11, 0x11, 0x11, 0x0f, 0x01, 0x0e},  // 'y'
    {0x00, 0x00, 0x1f, 0x02, 0x04, 0x08, 0x1f, 0x00, 0x00},  // 'z'
    {0x02, 0x04, 0x04, 0x08, 0x04, 0x04, 0x02, 0x00, 0x00},  // '{'
    {0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x00, 0x00},  // '|'
    {0x08, 0x04, 0x04, 0x02, 0x04, 0x04, 0x08, 0x00, 0x00},  // '}'
    {0x00, 0x00, 0x08, 0x15, 0x02, 0x00, 0x00, 0x00, 0x00},  // '~'
};

constexpr int kGlyphW = 5, kGlyphH = 9, kAdvance = 6;

// Anchor colours of the maps, evenly spaced in t and interpolated linearly in RGB. The viridis-like
// ramp rises steadily in lightness, so equal value steps look like equal steps.
constexpr std::array<Rgba, 9> kViridisLike = {{{68, 1, 84},    {71, 44, 123},  {59, 82, 139},
                                               {44, 114, 142}, {33, 145, 140}, {40, 174, 128},
                                               {94, 201, 98},  {173, 220, 48}, {253, 231, 37}}};
constexpr std::array<Rgba, 5> kBlueWhiteRed = {{{33, 80, 160}, {110, 160, 215}, {255, 255, 255},
                                                {235, 130, 100}, {170, 20, 30}}};

template <size_t N>
Rgba interpolate(const std::array<Rgba, N>& anchors, double t) {
  double pos = std::clamp(t, 0.0, 1.0) * (N - 1);
  size_t i = std::min(static_cast<size_t>(pos), N - 2);
  double f = pos - static_cast<double>(i);
  auto mix = [f](uint8_t a, uint8_t b) { return static_cast<uint8_t>(std::lround(a + (b - a) * f)); };
  const Rgba &a = anchors[i], &b = anchors[i + 1];
  return {mix(a.r, b.r), mix(a.g, b.g), mix(a.b, b.b), 255};
}

constexpr int64_t kMaxPixels = int64_t{1} << 28;  // a 16k x 16k image: anything larger is a mistake

}  // namespace

// ---- canvas

Image::Image(int width, int height, Rgba fill) : width_(width), height_(height) {
  GS_CHECK(width >= 1 && height >= 1 && int64_t{width} * height <= kMaxPixels,
           "Image: expected 1 <= width, height and at most {} pixels, got {} x {}", kMaxPixels, width, height);
  px_.resize(static_cast<size_t>(width) * height * 4);
  for (size_t i = 0; i < px_.size(); i += 4)
    px_[i] = fill.r, px_[i + 1] = fill.g, px_[i + 2] = fill.b, px_[i + 3] = fill.a;
}

Rgba Image::at(int x, int y) const {
  GS_CHECK(x >= 0 && x < width_ && y >= 0 && y < height_, "Image::at({}, {}) is outside the {} x {} image", x, y,
           width_, height_);
  const uint8_t* p = &px_[(static_cast<size_t>(y) * width_ + x) * 4];
  return {p[0], p[1], p[2], p[3]};
}

void Image::set(int x, int y, Rgba c) {
  if (x < 0 || x >= width_ || y < 0 || y >= height_) return;
  uint8_t* p = &px_[(static_cast<size_t>(y) * width_ + x) * 4];
  p[0] = c.r, p[1] = c.g, p[2] = c.b, p[3] = c.a;
}

void Image::fill_rect(int x, int y, int w, int h, Rgba c) {
  for (int yy = std::max(y, 0); yy < std::min(y + h, height_); ++yy)
    for (int xx = std::max(x, 0); xx < std::min(x + w, width_); ++xx) set(xx, yy, c);
}

void Image::blit(const Image& src, int x, int y) {
  for (int yy = 0; yy < src.height(); ++yy)
    for (int xx = 0; xx < src.width(); ++xx) set(x + xx, y + yy, src.at(xx, yy));
}

// ---- PNG

void write_png(const Image& img, const std::string& path, bool keep_alpha) {
  namespace fs = std::filesystem;
  fs::path parent = fs::path(path).parent_path();
  GS_CHECK(parent.empty() || fs::is_directory(parent), "cannot write '{}': directory '{}' does not exist", path,
           parent.string());
  std::vector<uint8_t> rgb;
  const uint8_t* data = img.rgba().data();
  if (!keep_alpha) {
    rgb.reserve(img.rgba().size() / 4 * 3);
    for (size_t i = 0; i < img.rgba().size(); i += 4) rgb.insert(rgb.end(), &img.rgba()[i], &img.rgba()[i + 3]);
    data = rgb.data();
  }
  png_image pi{};
  pi.version = PNG_IMAGE_VERSION;
  pi.width = static_cast<png_uint_32>(img.width());
  pi.height = static_cast<png_uint_32>(img.height());
  pi.format = keep_alpha ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB;
  // Written through the run outputs' atomic writer: a crash never leaves half a picture in place.
  models::AtomicFile file(path);
  file.close_descriptor();  // libpng writes the temporary file by its path
  int ok = png_image_write_to_file(&pi, file.temp_path().c_str(), 0, data, 0, nullptr);
  std::string why = pi.message;
  png_image_free(&pi);
  if (!ok) gs::fail("cannot write '{}': {}", path, why);
  file.commit();
}

// ---- text

int text_width(std::string_view text, int scale) {
  return text.empty() ? 0 : (static_cast<int>(text.size()) * kAdvance - 1) * scale;
}

int text_height(int scale) { return kGlyphH * scale; }

void draw_text(Image& img, int x, int y, std::string_view text, Rgba color, int scale) {
  for (size_t k = 0; k < text.size(); ++k) {
    unsigned char c = static_cast<unsigned char>(text[k]);
    if (c < 32 || c > 126) c = '?';
    const uint8_t* rows = kFont[c - 32];
    int gx = x + static_cast<int>(k) * kAdvance * scale;
    for (int r = 0; r < kGlyphH; ++r)
      for (int col = 0; col < kGlyphW; ++col)
        if (rows[r] & (0x10 >> col)) img.fill_rect(gx + col * scale, y + r * scale, scale, scale, color);
  }
}

std::string short_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return "0";  // also -0
  std::string s = fmt::format("{:.3g}", v);
  // "1.5e-05" -> "1.5e-5", "2e+04" -> "2e4": shorter labels for a small font.
  size_t e = s.find('e');
  if (e == std::string::npos) return s;
  std::string mant = s.substr(0, e), exp = s.substr(e + 1);
  bool neg = exp[0] == '-';
  size_t first = exp.find_first_not_of("+-0");
  return mant + "e" + (neg ? "-" : "") + (first == std::string::npos ? "0" : exp.substr(first));
}

// ---- colour maps and fields

Rgba colormap_color(Colormap cmap, double t) {
  if (std::isnan(t)) return kNanColor;
  return cmap == Colormap::viridis ? interpolate(kViridisLike, t) : interpolate(kBlueWhiteRed, t);
}

ValueRange auto_range(std::span<const double> values, Colormap cmap) {
  double lo = INFINITY, hi = -INFINITY;
  for (double v : values)
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (lo > hi) return {0, 1};  // nothing finite
  if (cmap == Colormap::diverging) {
    double m = std::max(std::abs(lo), std::abs(hi));
    return {-m, m};
  }
  return {lo, hi};
}

std::vector<double> field_values(const Tensor& field, int64_t& height, int64_t& width) {
  GS_CHECK(field.defined(), "field image: the tensor is undefined");
  bool leading_ones = field.dim() >= 2;
  for (int64_t d = 0; d + 2 < field.dim(); ++d) leading_ones = leading_ones && field.size(d) == 1;
  GS_CHECK(leading_ones && is_floating(field.dtype()),
           "field image: expected an f32 or f64 field of shape (H, W) (leading dimensions of size 1 allowed), got {}",
           field.meta_str());
  height = field.size(field.dim() - 2);
  width = field.size(field.dim() - 1);
  return field.to_vector<double>();
}

Image field_image(std::span<const double> values, int64_t height, int64_t width, const FieldStyle& style) {
  GS_CHECK(height >= 1 && width >= 1 && static_cast<int64_t>(values.size()) == height * width,
           "field image: expected {} x {} = {} values, got {}", height, width, height * width, values.size());
  GS_CHECK(style.scale >= 1 && style.scale <= 1024 && height * width * style.scale * style.scale <= kMaxPixels,
           "field image: expected an upscaling factor >= 1 that keeps the image under {} pixels, got {} for {} x {}",
           kMaxPixels, style.scale, height, width);
  ValueRange r = style.range ? *style.range : auto_range(values, style.cmap);
  GS_CHECK(std::isfinite(r.lo) && std::isfinite(r.hi) && r.lo <= r.hi,
           "field image: expected a finite range with low <= high, got [{}, {}]", r.lo, r.hi);
  const int s = style.scale, map_w = static_cast<int>(width) * s, map_h = static_cast<int>(height) * s;

  std::string lo = short_number(r.lo), mid = short_number(0.5 * (r.lo + r.hi)), hi = short_number(r.hi);
  constexpr int kBarGap = 4, kBarH = 8, kLabelGap = 2, kMargin = 2;
  int canvas_w = map_w, canvas_h = map_h;
  if (style.colorbar) {
    canvas_w = std::max(map_w, text_width(lo) + text_width(mid) + text_width(hi) + 16);
    canvas_h = map_h + kBarGap + kBarH + kLabelGap + text_height() + kMargin;
  }
  Image img(canvas_w, canvas_h);
  const int x0 = (canvas_w - map_w) / 2;
  const double span = r.hi - r.lo;
  for (int64_t i = 0; i < height; ++i) {
    for (int64_t j = 0; j < width; ++j) {
      double v = values[static_cast<size_t>(i * width + j)];
      double t = !std::isfinite(v) ? NAN : span > 0 ? (v - r.lo) / span : 0.5;
      img.fill_rect(x0 + static_cast<int>(j) * s, static_cast<int>(i) * s, s, s, colormap_color(style.cmap, t));
    }
  }
  if (style.colorbar) {
    const int bar_y = map_h + kBarGap, label_y = bar_y + kBarH + kLabelGap;
    for (int x = 0; x < canvas_w; ++x)
      img.fill_rect(x, bar_y, 1, kBarH, colormap_color(style.cmap, canvas_w > 1 ? double(x) / (canvas_w - 1) : 0.5));
    draw_text(img, 0, label_y, lo, kBlack);
    draw_text(img, (canvas_w - text_width(mid)) / 2, label_y, mid, kBlack);
    draw_text(img, canvas_w - text_width(hi), label_y, hi, kBlack);
  }
  return img;
}

Image field_image(const Tensor& field, const FieldStyle& style) {
  int64_t h = 0, w = 0;
  std::vector<double> v = field_values(field, h, w);
  return field_image(v, h, w, style);
}

// ---- panels

Image compose_panels(const std::vector<Panel>& panels, std::string_view caption, int title_scale) {
  GS_CHECK(!panels.empty(), "compose_panels: expected at least one panel, got none");
  GS_CHECK(title_scale >= 1, "compose_panels: expected a title scale >= 1, got {}", title_scale);
  constexpr int kMargin = 8;
  const int title_h = text_height(title_scale) + 6;
  const int top = kMargin + (caption.empty() ? 0 : text_height(title_scale) + 8);
  int width = kMargin, tallest = 0;
  std::vector<int> column_w;
  for (const Panel& p : panels) {
    column_w.push_back(std::max(p.image.width(), text_width(p.title, title_scale)));
    width += column_w.back() + kMargin;
    tallest = std::max(tallest, p.image.height());
  }
  Image out(width, top + title_h + tallest + kMargin);
  if (!caption.empty()) draw_text(out, kMargin, kMargin, caption, kBlack, title_scale);
  int x = kMargin;
  for (size_t k = 0; k < panels.size(); ++k) {
    const Panel& p = panels[k];
    draw_text(out, x + (column_w[k] - text_width(p.title, title_scale)) / 2, top, p.title, kBlack, title_scale);
    out.blit(p.image, x + (column_w[k] - p.image.width()) / 2, top + title_h);
    x += column_w[k] + kMargin;
  }
  return out;
}

Image comparison_image(const Tensor& truth, const Tensor& prediction, int scale, std::string_view caption) {
  int64_t h = 0, w = 0, ph = 0, pw = 0;
  std::vector<double> t = field_values(truth, h, w);
  std::vector<double> p = field_values(prediction, ph, pw);
  GS_CHECK(h == ph && w == pw, "comparison image: truth is {} x {} but prediction is {} x {}", h, w, ph, pw);
  std::vector<double> both = t;
  both.insert(both.end(), p.begin(), p.end());
  FieldStyle shared{.cmap = Colormap::viridis, .range = auto_range(both, Colormap::viridis), .scale = scale};
  std::vector<double> err(t.size());
  double sq = 0;
  size_t n = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    err[i] = p[i] - t[i];  // NaN when either is
    if (std::isfinite(err[i])) sq += err[i] * err[i], ++n;
  }
  FieldStyle diverging{.cmap = Colormap::diverging, .scale = scale};
  std::string err_title = "error, rmse " + (n ? short_number(std::sqrt(sq / double(n))) : std::string("nan"));
  return compose_panels({{"truth", field_image(t, h, w, shared)},
                         {"prediction", field_image(p, h, w, shared)},
                         {err_title, field_image(err, h, w, diverging)}},
                        caption, scale >= 3 ? 2 : 1);
}

}  // namespace gs::tools
