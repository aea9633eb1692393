// The unpacked GEMM (ops/gemm_direct.h) against a naive long-double product: every layout of a and
// b, accumulation, a strided c, depths longer than one chunk, partial row and column tiles and a
// column tail past the last whole vector; results independent of the thread count; which shapes take it.
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops/gemm_direct.h"

using namespace gs::gemm_cpu;

namespace {

struct Case {
  int64_t n, k, m;
};

template <typename T>
std::vector<T> random_values(size_t count, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<T> v(count);
  for (auto& x : v) x = static_cast<T>(dist(gen));
  return v;
}

// Runs one case with a and b stored as asked; returns c (n rows of c_outer = m + 3 values).
template <typename T>
std::vector<T> run_case(const Case& cs, bool a_row, bool b_row, bool accumulate, const std::vector<T>& c0,
                        std::vector<T>* a_out = nullptr, std::vector<T>* b_out = nullptr) {
  const int64_t a_outer = (a_row ? cs.k : cs.n) + 2, b_outer = (b_row ? cs.m : cs.k) + 1;
  auto a = random_values<T>(static_cast<size_t>((a_row ? cs.n : cs.k) * a_outer), 11);
  auto b = random_values<T>(static_cast<size_t>((b_row ? cs.k : cs.m) * b_outer), 12);
  std::vector<T> c = c0;
  gemm_direct<T>(c.data(), cs.m + 3, {a.data(), a_row, a_outer}, {b.data(), b_row, b_outer}, cs.n, cs.k, cs.m,
                 accumulate);
  if (a_out) *a_out = a;
  if (b_out) *b_out = b;
  return c;
}

template <typename T>
void check_against_naive(const Case& cs, bool a_row, bool b_row, bool accumulate) {
  const int64_t c_outer = cs.m + 3;
  auto c0 = random_values<T>(static_cast<size_t>(cs.n * c_outer), 13);
  std::vector<T> a, b;
  auto c = run_case<T>(cs, a_row, b_row, accumulate, c0, &a, &b);
  const int64_t a_outer = (a_row ? cs.k : cs.n) + 2, b_outer = (b_row ? cs.m : cs.k) + 1;
  const double tol = sizeof(T) == 4 ? 2e-6 : 1e-14;
  int bad = 0;
  for (int64_t i = 0; i < cs.n; ++i) {
    for (int64_t j = 0; j < cs.m; ++j) {
      long double s = accumulate ? c0[i * c_outer + j] : 0, scale = std::fabs(static_cast<double>(s));
      for (int64_t p = 0; p < cs.k; ++p) {
        const long double x = a_row ? a[i * a_outer + p] : a[p * a_outer + i];
        const long double y = b_row ? b[p * b_outer + j] : b[j * b_outer + p];
        s += x * y;
        scale += std::fabs(static_cast<double>(x * y));
      }
      if (std::fabs(static_cast<double>(c[i * c_outer + j] - s)) > tol * (scale + 1)) ++bad;
    }
    // The padding past m is c's own and stays untouched.
    for (int64_t j = cs.m; j < c_outer; ++j)
      if (c[i * c_outer + j] != c0[i * c_outer + j]) ++bad;
  }
  CHECK_MESSAGE(bad == 0, "n ", cs.n, " k ", cs.k, " m ", cs.m, " a_row ", a_row, " b_row ", b_row, " accumulate ",
                accumulate, " elements ", sizeof(T));
}

const Case kCases[] = {
    {1, 1, 16},    {7, 5, 16},    {13, 64, 128}, {6, 3, 33},   {50, 300, 48},
    {64, 1000, 64}, {5, 257, 80}, {37, 16, 200}, {12, 128, 64}, {2, 600, 24},
};

}  // namespace

TEST_CASE_TEMPLATE("gemm_direct: every layout against a naive product", T, float, double) {
  for (const Case& cs : kCases)
    for (bool a_row : {true, false})
      for (bool b_row : {true, false})
        for (bool acc : {false, true}) check_against_naive<T>(cs, a_row, b_row, acc);
}

TEST_CASE_TEMPLATE("gemm_direct: the same bits at one and two threads", T, float, double) {
  const int before = omp_get_max_threads();
  for (const Case& cs : {Case{300, 64, 128}, Case{64, 4000, 96}, Case{97, 40, 53}}) {
    for (bool a_row : {true, false}) {
      auto c0 = random_values<T>(static_cast<size_t>(cs.n * (cs.m + 3)), 5);
      omp_set_num_threads(1);
      auto one = run_case<T>(cs, a_row, true, false, c0);
      omp_set_num_threads(2);
      auto two = run_case<T>(cs, a_row, true, false, c0);
      CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(T)) == 0);
    }
  }
  omp_set_num_threads(before);
}

TEST_CASE("gemm_direct: which shapes take it") {
  CHECK(gemm_direct_suits(8192, 64, 128, 4, true));    // channel mixing, points first: forward
  CHECK(gemm_direct_suits(8192, 128, 64, 4, false));   // its input gradient (b: the weight, transposed)
  CHECK(gemm_direct_suits(64, 8192, 128, 4, true));    // its weight gradient
  CHECK(gemm_direct_suits(128, 64, 8192, 4, true));    // channels first: forward
  CHECK(gemm_direct_suits(8192, 64, 128, 8, true));
  CHECK_FALSE(gemm_direct_suits(128, 8192, 64, 4, false));  // channels-first weight gradient: b large, by columns
  CHECK_FALSE(gemm_direct_suits(8192, 64, 3, 4, true));      // a decoder to 3 channels: no whole vector
  CHECK_FALSE(gemm_direct_suits(3, 8192, 32, 4, false));     // that decoder's weight gradient: b copied for 3 rows
  CHECK_FALSE(gemm_direct_suits(8192, 64, 20, 4, true));     // mostly scalar tail
  CHECK_FALSE(gemm_direct_suits(1024, 1024, 1024, 4, true));  // large and square: Eigen's packed kernel
  CHECK_FALSE(gemm_direct_suits(0, 64, 128, 4, true));
  CHECK_FALSE(gemm_direct_suits(8192, 32, 64, 4, true));  // depth 32: Eigen was faster inside a training step
}
