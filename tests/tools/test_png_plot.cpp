// PNG output, colour-mapped fields, panels and line plots. Every picture is decoded back with
// libpng (independently of the writer) and checked for its size and colours at known points.
#include <doctest/doctest.h>
#include <png.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "engine/error.h"
#include "engine/tensor.h"
#include "tools/plot.h"
#include "tools/png_image.h"
#include "tests/test_util.h"

using gs_test::contains;
using gs_test::error_of;

using namespace gs::tools;
namespace fs = std::filesystem;

namespace {

struct Decoded {
  int width = 0, height = 0;
  std::vector<uint8_t> rgba;
  Rgba at(int x, int y) const {
    const uint8_t* p = &rgba[(static_cast<size_t>(y) * width + x) * 4];
    return {p[0], p[1], p[2], p[3]};
  }
};

Decoded read_png(const std::string& path) {
  png_image pi{};
  pi.version = PNG_IMAGE_VERSION;
  REQUIRE_MESSAGE(png_image_begin_read_from_file(&pi, path.c_str()) != 0, pi.message);
  pi.format = PNG_FORMAT_RGBA;
  Decoded d;
  d.width = static_cast<int>(pi.width);
  d.height = static_cast<int>(pi.height);
  d.rgba.resize(PNG_IMAGE_SIZE(pi));
  REQUIRE_MESSAGE(png_image_finish_read(&pi, nullptr, d.rgba.data(), 0, nullptr) != 0, pi.message);
  return d;
}

std::string temp_png(const std::string& name) {
  return (fs::temp_directory_path() / ("gs_test_" + name + ".png")).string();
}

gs::Tensor tensor_from(const std::vector<double>& v, gs::Shape shape, gs::DType dt) {
  gs::Tensor t = gs::empty(shape, dt);
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == gs::DType::f32) t.data<float>()[i] = static_cast<float>(v[i]);
    else t.data<double>()[i] = v[i];
  }
  return t;
}

// Pixels of colour c inside a rectangle.
int count_color(const Decoded& d, Rgba c, int x0 = 0, int y0 = 0, int x1 = -1, int y1 = -1) {
  if (x1 < 0) x1 = d.width;
  if (y1 < 0) y1 = d.height;
  int n = 0;
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x) n += d.at(x, y) == c;
  return n;
}

}  // namespace

TEST_CASE("png: an image round-trips through libpng, RGB and RGBA") {
  Image img(7, 3, Rgba{10, 20, 30});
  img.set(6, 2, Rgba{200, 100, 50});
  img.set(100, 100, kBlack);  // clipped, no effect
  img.fill_rect(0, 0, 2, 2, Rgba{1, 2, 3, 128});
  std::string path = temp_png("roundtrip");
  write_png(img, path);
  Decoded d = read_png(path);
  CHECK(d.width == 7);
  CHECK(d.height == 3);
  CHECK(d.at(6, 2) == Rgba{200, 100, 50, 255});
  CHECK(d.at(3, 1) == Rgba{10, 20, 30, 255});
  CHECK(d.at(1, 1) == Rgba{1, 2, 3, 255});  // RGB drops alpha
  write_png(img, path, /*keep_alpha=*/true);
  CHECK(read_png(path).at(1, 1) == Rgba{1, 2, 3, 128});
  // No temporary file is left behind.
  bool leftover = false;
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path()))
    leftover = leftover || e.path().filename().string().find("gs_test_roundtrip.png.tmp") != std::string::npos;
  CHECK_FALSE(leftover);
  fs::remove(path);
}

TEST_CASE("png: bad arguments are errors") {
  CHECK(error_of([] { Image(0, 5); }) == "Image: expected 1 <= width, height and at most 268435456 pixels, got 0 x 5");
  Image img(2, 2);
  CHECK(error_of([&] { img.at(2, 0); }) == "Image::at(2, 0) is outside the 2 x 2 image");
  CHECK(error_of([&] { write_png(img, "/nonexistent_dir_gs/x.png"); }) ==
        "cannot write '/nonexistent_dir_gs/x.png': directory '/nonexistent_dir_gs' does not exist");
}

TEST_CASE("png: colour maps") {
  Rgba v0 = colormap_color(Colormap::viridis, 0), v1 = colormap_color(Colormap::viridis, 1);
  CHECK(v0 == Rgba{68, 1, 84});
  CHECK(v1 == Rgba{253, 231, 37});
  CHECK(colormap_color(Colormap::viridis, -5) == v0);  // clamped
  CHECK(colormap_color(Colormap::viridis, 7) == v1);
  CHECK(colormap_color(Colormap::diverging, 0.5) == kWhite);  // zero error is white
  Rgba blue = colormap_color(Colormap::diverging, 0), red = colormap_color(Colormap::diverging, 1);
  CHECK(blue.b > blue.r);
  CHECK(red.r > red.b);
  CHECK(colormap_color(Colormap::viridis, NAN) == kNanColor);
  // The viridis-like ramp gets lighter all the way (perceptual order).
  double prev = -1;
  for (int i = 0; i <= 20; ++i) {
    Rgba c = colormap_color(Colormap::viridis, i / 20.0);
    double lum = 0.2126 * c.r + 0.7152 * c.g + 0.0722 * c.b;
    CHECK(lum > prev);
    prev = lum;
  }
}

TEST_CASE("png: a field maps min to the first colour and max to the last, upscaled") {
  // 2 x 3 field; row 0 is the top of the picture.
  std::vector<double> v = {0, 1, 2, 3, 4, NAN};
  for (auto dt : {gs::DType::f32, gs::DType::f64}) {
    gs::Tensor t = tensor_from(v, {2, 3}, dt);
    Image img = field_image(t, {.scale = 4, .colorbar = false});
    std::string path = temp_png("field");
    write_png(img, path);
    Decoded d = read_png(path);
    REQUIRE(d.width == 12);
    REQUIRE(d.height == 8);
    CHECK(d.at(0, 0) == colormap_color(Colormap::viridis, 0));   // value 0 = min
    CHECK(d.at(3, 3) == colormap_color(Colormap::viridis, 0));   // same 4x4 block
    CHECK(d.at(4, 0) == colormap_color(Colormap::viridis, 0.25));
    CHECK(d.at(7, 7) == colormap_color(Colormap::viridis, 1));   // value 4 = max, row 1 col 1
    CHECK(d.at(11, 7) == kNanColor);
    fs::remove(path);
  }
}

TEST_CASE("png: fixed ranges clamp, constant fields use the middle colour, diverging is symmetric") {
  std::vector<double> v = {-1, 0.5, 2};
  Image fixed = field_image(v, 1, 3, {.range = ValueRange{0, 1}, .colorbar = false});
  CHECK(fixed.at(0, 0) == colormap_color(Colormap::viridis, 0));  // -1 clamped to 0
  CHECK(fixed.at(1, 0) == colormap_color(Colormap::viridis, 0.5));
  CHECK(fixed.at(2, 0) == colormap_color(Colormap::viridis, 1));
  std::vector<double> flat = {3, 3};
  CHECK(field_image(flat, 1, 2, {.colorbar = false}).at(0, 0) == colormap_color(Colormap::viridis, 0.5));
  // Diverging: the range is +-max|v| = +-2, so 0.5 is a light red and -1 a light blue.
  std::vector<double> e = {-1, 0, 2, -2};
  auto r = auto_range(e, Colormap::diverging);
  CHECK(r.lo == -2);
  CHECK(r.hi == 2);
  Image div = field_image(e, 1, 4, {.cmap = Colormap::diverging, .colorbar = false});
  CHECK(div.at(1, 0) == kWhite);
  CHECK(div.at(0, 0) == colormap_color(Colormap::diverging, 0.25));
  CHECK(div.at(3, 0) == colormap_color(Colormap::diverging, 0));
  std::vector<double> nans = {NAN, INFINITY};
  CHECK(auto_range(nans, Colormap::viridis).lo == 0);
  CHECK(field_image(nans, 1, 2, {.colorbar = false}).at(1, 0) == kNanColor);  // Inf too
}

TEST_CASE("png: the colour bar spans the map's colours and carries labels") {
  std::vector<double> v(32 * 64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 64);
  Image img = field_image(v, 32, 64, {.scale = 2});
  CHECK(img.width() == 128);
  CHECK(img.height() > 64 + 8);
  int bar_y = 64 + 4 + 4;  // map, gap, middle of the bar
  CHECK(img.at(0, bar_y) == colormap_color(Colormap::viridis, 0));
  CHECK(img.at(127, bar_y) == colormap_color(Colormap::viridis, 1));
  int dark = 0;  // label text below the bar
  for (int y = bar_y + 6; y < img.height(); ++y)
    for (int x = 0; x < img.width(); ++x) dark += img.at(x, y) == kBlack;
  CHECK(dark > 20);
}

TEST_CASE("png: field errors name what was expected") {
  gs::Tensor t3 = gs::empty({2, 3, 4}, gs::DType::f32);
  CHECK(error_of([&] { field_image(t3, {}); }) ==
        "field image: expected an f32 or f64 field of shape (H, W) (leading dimensions of size 1 allowed), got " +
            t3.meta_str());
  CHECK_NOTHROW(field_image(gs::empty({1, 1, 2, 3}, gs::DType::f64), {}));
  gs::Tensor ti = gs::empty({2, 3}, gs::DType::i64);
  CHECK(error_of([&] { field_image(ti, {}); }).find("expected an f32 or f64 field") != std::string::npos);
  std::vector<double> v(5);
  CHECK(error_of([&] { field_image(v, 2, 3, {}); }) == "field image: expected 2 x 3 = 6 values, got 5");
  CHECK(error_of([&] { field_image(v, 1, 5, {.scale = 0}); }).find("upscaling factor >= 1") != std::string::npos);
  CHECK(error_of([&] { field_image(v, 1, 5, {.range = ValueRange{1, 0}}); }) ==
        "field image: expected a finite range with low <= high, got [1, 0]");
}

TEST_CASE("png: text draws glyph pixels and measures widths") {
  CHECK(text_width("") == 0);
  CHECK(text_width("A") == 5);
  CHECK(text_width("AB", 2) == 22);
  Image img(20, 10);
  draw_text(img, 0, 0, "I", kBlack);
  // 'I': top row .###. and middle column down the glyph.
  CHECK(img.at(0, 0) == kWhite);
  CHECK(img.at(1, 0) == kBlack);
  CHECK(img.at(3, 0) == kBlack);
  CHECK(img.at(2, 3) == kBlack);
  CHECK(img.at(0, 3) == kWhite);
  Image big(20, 20);
  draw_text(big, 0, 0, "\x01", kBlack, 2);  // unknown bytes draw as '?', here at scale 2
  CHECK(big.at(2, 0) == kBlack);
  CHECK(big.at(3, 1) == kBlack);
  CHECK(big.at(0, 0) == kWhite);
  CHECK(short_number(0) == "0");
  CHECK(short_number(-0.0) == "0");
  CHECK(short_number(1.5e-5) == "1.5e-5");
  CHECK(short_number(123456) == "1.23e5");
  CHECK(short_number(0.25) == "0.25");
  CHECK(short_number(-3) == "-3");
}

TEST_CASE("png: panels and the truth | prediction | error picture") {
  Image a(10, 10, Rgba{255, 0, 0}), b(20, 5, Rgba{0, 0, 255});
  Image p = compose_panels({{"a", a}, {"b", b}}, "", 1);
  // margin 8, title row 9+6, panels top-aligned.
  CHECK(p.at(8, 8 + 15) == Rgba{255, 0, 0});
  CHECK(p.at(8 + 10 + 8, 8 + 15) == Rgba{0, 0, 255});
  CHECK(p.width() == 8 + 10 + 8 + 20 + 8);
  CHECK(error_of([] { compose_panels({}); }) == "compose_panels: expected at least one panel, got none");

  std::vector<double> tv = {0, 1, 2, 3}, pv = {0, 1, 2, 5};
  gs::Tensor truth = tensor_from(tv, {2, 2}, gs::DType::f32), pred = tensor_from(pv, {2, 2}, gs::DType::f64);
  Image cmp = comparison_image(truth, pred, 8, "step 3");
  std::string path = temp_png("comparison");
  write_png(cmp, path);
  Decoded d = read_png(path);
  CHECK(d.width == cmp.width());
  // Truth and prediction share the range [0, 5]: value 0 is the first colour in both, value 3 of
  // the truth is not the last colour, value 5 of the prediction is.
  CHECK(count_color(d, colormap_color(Colormap::viridis, 0)) >= 2 * 64);
  CHECK(count_color(d, colormap_color(Colormap::viridis, 1)) >= 64);
  CHECK(count_color(d, colormap_color(Colormap::viridis, 3.0 / 5.0)) >= 64);
  // Error: three zeros (white) and one +2 at the top of the symmetric range (dark red).
  CHECK(count_color(d, colormap_color(Colormap::diverging, 1)) >= 64);
  CHECK(error_of([&] { comparison_image(truth, gs::empty({2, 3}, gs::DType::f32)); }) ==
        "comparison image: truth is 2 x 2 but prediction is 2 x 3");
  fs::remove(path);
}

TEST_CASE("plot: ticks") {
  CHECK(linear_ticks(0, 10, 5) == std::vector<double>{0, 2, 4, 6, 8, 10});
  CHECK(linear_ticks(-0.3, 0.3, 6) == std::vector<double>{-0.3, -0.2, -0.1, 0, 0.1, 0.2, 0.3});
  CHECK(linear_ticks(1, 1).empty());
  CHECK(log_ticks(1e-4, 1) == std::vector<double>{1e-4, 1e-3, 1e-2, 1e-1, 1});
  CHECK(log_ticks(0.15, 0.9) == std::vector<double>{0.2, 0.5});
  CHECK(log_ticks(0.0, 1).empty());
  auto narrow = log_ticks(0.31, 0.34);
  CHECK(narrow.size() >= 2);
  for (double t : narrow) CHECK((t >= 0.31 && t <= 0.34));
  CHECK(series_color(0) != series_color(1));
  CHECK(series_color(10) == series_color(0));
}

TEST_CASE("plot: loss curves with validation points, log axis, decode back") {
  Series train{.label = "train", .x = {}, .y = {}};
  for (int i = 0; i < 200; ++i) train.y.push_back(std::exp(-i / 40.0));
  Series val{.label = "validation", .x = {0, 100, 199}, .y = {1.0, 0.08, 0.007}, .points = true};
  std::string path = temp_png("loss");
  write_plot(path, {train, val}, {.title = "loss", .y_label = "mse", .log_y = true, .width = 640, .height = 400});
  Decoded d = read_png(path);
  CHECK(d.width == 640);
  CHECK(d.height == 400);
  CHECK(count_color(d, series_color(0)) > 200);  // the train line
  CHECK(count_color(d, series_color(1)) > 40);   // three markers plus the legend marker
  CHECK(count_color(d, kBlack) > 100);           // title, tick labels, legend text
  fs::remove(path);
}

TEST_CASE("plot: NaN, Inf, empty series and a single point do not crash") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  Series gappy{.label = "gappy", .x = {}, .y = {1, 2, nan, 4, inf, 6, -1}};
  Series empty{.label = "empty", .x = {}, .y = {}};
  Series single{.label = "single", .x = {5}, .y = {0.5}};
  for (bool log_y : {false, true}) {
    Image img = plot_image({gappy, empty, single}, {.log_y = log_y});
    CHECK(img.width() == 800);
    std::string path = temp_png(log_y ? "gappy_log" : "gappy");
    write_png(img, path);
    Decoded d = read_png(path);
    CHECK(count_color(d, series_color(0)) > 10);
    CHECK(count_color(d, series_color(2)) > 10);  // the lone point is drawn as a marker
    fs::remove(path);
  }
  // Nothing at all to draw: axes and "no data", still a picture.
  Image none = plot_image({empty, Series{.label = "all nan", .x = {}, .y = {nan, nan}}}, {.log_y = true});
  CHECK(none.height() == 480);
  Image zero = plot_image({}, {});
  CHECK(zero.width() == 800);
  CHECK(error_of([] { plot_image({Series{.label = "s", .x = {1, 2}, .y = {1}}}, {}); }) ==
        "plot: series 's' has 2 x values but 1 y values");
  // Values at the ends of the double range (spans overflow to inf) still give a picture.
  const double big = std::numeric_limits<double>::max();
  CHECK(plot_image({Series{.label = "huge", .x = {-big, big}, .y = {-big, big}}}, {}).width() == 800);
  CHECK(error_of([] { plot_image({}, {.width = 10}); }).find("expected a size between") != std::string::npos);
}
