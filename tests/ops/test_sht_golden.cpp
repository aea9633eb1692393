// The scalar and vector SHT against torch-harmonics 0.9.3, computed outside the build by
// tools/make_golden.py (tests/ops/data/golden_sht.safetensors): every normalisation (ortho,
// four-pi, schmidt) and csphase setting, forward and inverse, on an equiangular and a
// legendre-gauss grid, in f64. These values come from code independent of gradsphere's Legendre
// recurrence, so a wrong degree factor in one normalisation (as the Schmidt vector transform had)
// fails here even when every round trip closes.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "ops/sphere/sht.h"
#include "ops/sphere/vector_sht.h"
#include "tests/golden_util.h"

using namespace gs;
using namespace gs::sphere;

namespace {

struct GoldenGrid {
  const char* name;
  GridKind kind;
  int64_t nlat, nlon, lmax;
};

constexpr GoldenGrid kGrids[] = {{"equiangular", GridKind::equiangular, 13, 24, 7},
                                 {"legendre-gauss", GridKind::legendre_gauss, 12, 24, 12}};

}  // namespace

TEST_CASE("sht golden: scalar and vector transforms equal torch-harmonics 0.9.3 for every normalisation and csphase") {
  const auto golden = gs_test::load_golden("tests/ops/data/golden_sht.safetensors").tensors;
  int compared = 0;
  double worst = 0;
  for (const auto& g : kGrids) {
    for (Normalization norm : {Normalization::ortho, Normalization::four_pi, Normalization::schmidt}) {
      for (bool cs : {true, false}) {
        const std::string pre =
            std::string(g.name) + "." + std::string(normalization_name(norm)) + (cs ? ".cs." : ".nocs.");
        CAPTURE(pre);
        const ShtSpec spec = make_sht_spec(g.kind, g.nlat, g.nlon, g.lmax, g.lmax, norm, cs);
        auto at = [&](const std::string& key) {
          REQUIRE_MESSAGE(golden.count(pre + key), "missing golden tensor " << pre + key);
          return golden.at(pre + key);
        };
        // Forward transforms of random fields, inverse transforms of random band-limited coefficients.
        for (double err : {gs_test::relative_error(sht(at("scalar.x"), spec), at("scalar.sht")),
                           gs_test::relative_error(isht(at("scalar.c"), spec), at("scalar.isht")),
                           gs_test::relative_error(vector_sht(at("vector.x"), spec), at("vector.sht")),
                           gs_test::relative_error(ivector_sht(at("vector.c"), spec), at("vector.isht"))}) {
          CHECK(err < 1e-12);
          worst = std::max(worst, err);
          ++compared;
        }
      }
    }
  }
  CHECK(compared == 48);
  MESSAGE("largest relative difference from torch-harmonics: " << worst);
}
