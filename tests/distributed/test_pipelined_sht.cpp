// The pipelined distributed SHT (distributed/pipelined_sht.h) against the unpipelined path (one
// chunk) on every spatially split grid of the world: the same values, gradients and second-order
// terms byte for byte, the same bytes sent, scalar and vector, forward and inverse, with uneven splits
// (5 fields, 9 latitudes and orders over 2, 3 or 4 ranks) and more chunks than some ranks have
// fields. Kept small: the suite runs at 2, 3 and 4 ranks.
#include <doctest/doctest.h>

#include <cstring>
#include <functional>

#include "distributed/collectives.h"
#include "distributed/pipelined_sht.h"
#include "distributed/sphere_transforms.h"
#include "engine/autograd/engine.h"
#include "engine/factory.h"
#include "ops/ops.h"
#include "tests/distributed/dist_test_util.h"
#include "tests/test_util.h"

using namespace gs;
using namespace gs::dist;
using sphere::GridKind;
using sphere::ShtSpec;

namespace {

using Transform = std::function<Tensor(const Tensor&)>;

// The same dtype, shape and bytes (stricter than ==: a zero's sign counts too).
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  const Tensor ca = contiguous_copy(a.detach()), cb = contiguous_copy(b.detach());
  return std::memcmp(ca.raw_data(), cb.raw_data(), static_cast<size_t>(ca.numel()) * dtype_size(ca.dtype())) == 0;
}

// Restores the chunk setting when a case ends.
struct ChunksGuard {
  int previous = sht_pipeline_chunks();
  ~ChunksGuard() { set_sht_pipeline_chunks(previous); }
};

// What one run of a transform gives: its value y, the first-order term h = A^T gy (the gradient
// for output gradient gy, with create_graph), the second-order term A v (the gradient of <v, h>
// with respect to gy), the transpose bytes sent and the collectives started.
struct Run {
  Tensor y, h, second;
  int64_t bytes = 0;
  uint64_t calls = 0;
};

Run run(const Transform& f, const Tensor& x, const Tensor& gy_whole, const Tensor& v_whole, const ProcessGrid& g) {
  const auto calls_of = [&] {
    return (g.w_size() > 1 ? g.comm(Group::w)->calls() : 0) + (g.h_size() > 1 ? g.comm(Group::h)->calls() : 0);
  };
  Run r;
  Tensor xl = clone(x);
  xl.set_requires_grad();
  const int64_t bytes0 = collective_traffic().transpose;
  const uint64_t calls0 = calls_of();
  r.y = f(xl);
  r.bytes = collective_traffic().transpose - bytes0;
  r.calls = calls_of() - calls0;
  Tensor gy = clone(gy_whole);
  gy.set_requires_grad();
  r.h = grad({r.y}, {xl}, {gy}, {.create_graph = true})[0];
  r.second = grad({r.h}, {gy}, {v_whole})[0];
  return r;
}

// The transform with the pipeline forced to `chunks` (1: the unpipelined path).
Run run_with(int chunks, const Transform& f, const Tensor& x, const Tensor& gy, const Tensor& v, const ProcessGrid& g) {
  set_sht_pipeline_chunks(chunks);
  return run(f, x, gy, v, g);
}

void check_same(const char* transform, const Transform& f, const Tensor& x, const Tensor& gy, const Tensor& v,
                const ProcessGrid& g) {
  CAPTURE(transform);
  const Run one = run_with(1, f, x, gy, v, g);
  for (int chunks : {2, 3}) {
    CAPTURE(chunks);
    const Run many = run_with(chunks, f, x, gy, v, g);
    CHECK(same_bits(many.y, one.y));
    CHECK(same_bits(many.h, one.h));
    CHECK(same_bits(many.second, one.second));
    CHECK(many.bytes == one.bytes);
    CHECK(many.calls > one.calls);  // the chunks' own all-to-alls: the pipeline ran
  }
}

}  // namespace

TEST_CASE("pipelined sht: values, gradients, second-order terms and bytes equal the unpipelined path") {
  ChunksGuard restore;
  gs::test::for_each_grid([](const ProcessGrid& g) {
    if (!g.spatially_split()) return;
    const ShtSpec spec = sphere::make_sht_spec(GridKind::legendre_gauss, 9, 16, 9, 9);
    const Block rows = g.local_lat(spec.nlat), cols = g.local_lon(spec.nlon);
    const Block deg = local_degrees(g, spec.lmax), ord = local_orders(g, spec.mmax);
    for (DType dt : {DType::f64, DType::f32}) {
      CAPTURE(dtype_name(dt));
      const DType ct = complex_dtype(dt);
      // 5 fields, uneven over every group (and 3 chunks: more than some ranks have fields).
      const Tensor x = randn({5, rows.count, cols.count}, RandomKey{61, static_cast<uint64_t>(g.world_rank())}, dt);
      const Tensor c = randn({5, deg.count, ord.count}, RandomKey{62, static_cast<uint64_t>(g.world_rank())}, ct);
      const Tensor uv = randn({5, 2, rows.count, cols.count}, RandomKey{63, static_cast<uint64_t>(g.world_rank())}, dt);
      const Tensor vc = randn({5, 2, deg.count, ord.count}, RandomKey{64, static_cast<uint64_t>(g.world_rank())}, ct);
      check_same("sht", [&](const Tensor& t) { return sht(t, spec, g); }, x, c, x, g);
      check_same("isht", [&](const Tensor& t) { return isht(t, spec, g); }, c, x, c, g);
      check_same("vector_sht", [&](const Tensor& t) { return vector_sht(t, spec, g); }, uv, vc, uv, g);
      check_same("ivector_sht", [&](const Tensor& t) { return ivector_sht(t, spec, g); }, vc, uv, vc, g);
    }
  });
}

TEST_CASE("pipelined sht: the setting") {
  ChunksGuard restore;
  const ProcessGrid one;
  set_sht_pipeline_chunks(0);
  CHECK(sht_pipeline_chunks_for(one) == 1);  // automatic: no transposes to hide on one process
  set_sht_pipeline_chunks(4);
  CHECK(sht_pipeline_chunks() == 4);
  CHECK(sht_pipeline_chunks_for(one) == 4);  // a count asked for runs the kernels chunk by chunk
  set_sht_pipeline_chunks(1);
  CHECK(sht_pipeline_chunks_for(one) == 1);
  CHECK(gs_test::contains(gs_test::error_of([] { set_sht_pipeline_chunks(-1); }), "expected 0 (automatic)"));
}
