// The register-tile GEMM (ops/gemm_direct.h) against a naive long-double product: every layout of a and
// b, accumulation, a strided c, depths longer than one chunk, partial row and column tiles and a
// column tail past the last whole vector; results independent of the thread count; which shapes take it.
// The dot-product kernel (gemm_dots, a by rows and b by columns) the same way, and the depth split
// of the long products left to Eigen (through gemm_cpu::gemm).
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <iterator>
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
enum class Kernel { direct, dots, gemm };  // gemm: the public entry, gemm_cpu::gemm

template <typename T>
std::vector<T> run_case(const Case& cs, bool a_row, bool b_row, bool accumulate, const std::vector<T>& c0,
                        std::vector<T>* a_out = nullptr, std::vector<T>* b_out = nullptr,
                        Kernel kernel = Kernel::direct) {
  const int64_t a_outer = (a_row ? cs.k : cs.n) + 2, b_outer = (b_row ? cs.m : cs.k) + 1;
  auto a = random_values<T>(static_cast<size_t>((a_row ? cs.n : cs.k) * a_outer), 11);
  auto b = random_values<T>(static_cast<size_t>((b_row ? cs.k : cs.m) * b_outer), 12);
  std::vector<T> c = c0;
  const Operand<T> oa{a.data(), a_row, a_outer}, ob{b.data(), b_row, b_outer};
  if (kernel == Kernel::gemm) gemm<T>(c.data(), cs.m + 3, oa, ob, cs.n, cs.k, cs.m, accumulate);
  else (kernel == Kernel::dots ? gemm_dots<T> : gemm_direct<T>)(c.data(), cs.m + 3, oa, ob, cs.n, cs.k, cs.m, accumulate);
  if (a_out) *a_out = a;
  if (b_out) *b_out = b;
  return c;
}

template <typename T>
void check_against_naive(const Case& cs, bool a_row, bool b_row, bool accumulate, Kernel kernel = Kernel::direct) {
  const int64_t c_outer = cs.m + 3;
  auto c0 = random_values<T>(static_cast<size_t>(cs.n * c_outer), 13);
  std::vector<T> a, b;
  auto c = run_case<T>(cs, a_row, b_row, accumulate, c0, &a, &b, kernel);
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
                accumulate, " elements ", sizeof(T), " kernel ", static_cast<int>(kernel));
}

// a by rows, b by columns, accumulating into c: the bits at one and at two threads are the same.
template <typename T>
void check_thread_independent(const std::vector<Case>& cases, Kernel kernel) {
  const int before = omp_get_max_threads();
  for (const Case& cs : cases) {
    auto c0 = random_values<T>(static_cast<size_t>(cs.n * (cs.m + 3)), 6);
    omp_set_num_threads(1);
    auto one = run_case<T>(cs, true, false, true, c0, nullptr, nullptr, kernel);
    omp_set_num_threads(2);
    auto two = run_case<T>(cs, true, false, true, c0, nullptr, nullptr, kernel);
    CHECK_MESSAGE(std::memcmp(one.data(), two.data(), one.size() * sizeof(T)) == 0, "n ", cs.n, " k ", cs.k,
                  " m ", cs.m, " kernel ", static_cast<int>(kernel));
  }
  omp_set_num_threads(before);
}

const Case kCases[] = {
    {1, 1, 16},    {7, 5, 16},    {13, 64, 128}, {6, 3, 33},   {50, 300, 48},
    {64, 1000, 64}, {5, 257, 80}, {37, 16, 200}, {12, 128, 64}, {2, 600, 24},
    {13, 70, 1100}, {7, 300, 1030},  // more than one panel of column blocks, the last one partial
    {16, 1100, 80}, {32, 1500, 40},  // a by rows, b by columns, m > n: run as the transposed product
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
  for (const Case& cs : {Case{300, 64, 128}, Case{64, 4000, 96}, Case{97, 40, 53}, Case{20, 64, 1100}}) {
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

// The weight-gradient layout (a by rows, b by columns, transposed into the panels), accumulating:
// as the transposed product (m > n, n whole vectors: the first three) and directly (m < n; n not
// whole vectors, with a column tail), several depth chunks with a partial last vector.
TEST_CASE_TEMPLATE("gemm_direct: a weight gradient's bits at one and two threads", T, float, double) {
  check_thread_independent<T>({Case{64, 4000, 96}, Case{32, 3000, 128}, Case{48, 2100, 70}, Case{96, 4000, 64},
                               Case{40, 2100, 70}},
                              Kernel::direct);
}

TEST_CASE("gemm_direct: which shapes take it") {
  CHECK(gemm_direct_suits(8192, 64, 128, 4, true));    // channel mixing, points first: forward
  CHECK(gemm_direct_suits(8192, 128, 64, 4, false));   // its input gradient (b: the weight, transposed)
  CHECK(gemm_direct_suits(64, 8192, 128, 4, true));    // its weight gradient
  CHECK(gemm_direct_suits(128, 64, 8192, 4, true));    // channels first: forward
  CHECK(gemm_direct_suits(8192, 64, 128, 8, true));
  CHECK(gemm_direct_suits(128, 8192, 64, 4, false));   // channels-first weight gradient: b transposed by panels
  CHECK(gemm_direct_suits(64, 32768, 128, 4, false));  // the same with m > n: the transposed product
  CHECK_FALSE(gemm_direct_suits(8192, 64, 3, 4, true));      // a decoder to 3 channels: no whole vector
  CHECK_FALSE(gemm_direct_suits(3, 8192, 32, 4, false));     // that decoder's weight gradient: b copied for 3 rows
  CHECK_FALSE(gemm_direct_suits(8192, 64, 20, 4, true));     // mostly scalar tail
  CHECK_FALSE(gemm_direct_suits(1024, 1024, 1024, 4, true));  // large and square: Eigen's packed kernel
  CHECK_FALSE(gemm_direct_suits(0, 64, 128, 4, true));
  CHECK(gemm_direct_suits(8192, 32, 64, 4, true));        // depth 32 (64x128's MLP)
  CHECK_FALSE(gemm_direct_suits(8192, 8, 64, 4, true));   // depth under 16: Eigen
}

// Depths of one vector and less than one chunk, several chunks with a partial last vector; partial
// row and column tiles; one output; a 3-row decoder gradient.
const Case kDotCases[] = {
    {1, 256, 1}, {4, 512, 6}, {3, 300, 67}, {5, 2049, 7}, {13, 777, 29}, {64, 1000, 128}, {9, 4111, 2}, {2, 9, 3},
};

TEST_CASE_TEMPLATE("gemm_dots: against a naive product", T, float, double) {
  for (const Case& cs : kDotCases)
    for (bool acc : {false, true}) check_against_naive<T>(cs, true, false, acc, Kernel::dots);
}

TEST_CASE_TEMPLATE("gemm_dots: the same bits at one and two threads", T, float, double) {
  check_thread_independent<T>({Case{64, 3570, 128}, Case{3, 5000, 67}}, Kernel::dots);
}

TEST_CASE("gemm_dots: which shapes take it") {
  CHECK(gemm_dots_suits(3, 65536, 67, true, false));   // a 3-channel decoder's weight gradient, g @ x^T
  CHECK(gemm_dots_suits(64, 65536, 3, true, false));   // an encoder's from 3 channels
  CHECK(gemm_dots_suits(16, 2048, 64, true, false));  // (gemm_cpu::gemm gives it to gemm_direct, asked first)
  CHECK_FALSE(gemm_dots_suits(128, 65536, 64, true, false));  // balanced: Eigen is as fast
  CHECK_FALSE(gemm_dots_suits(16, 924, 64, true, false));     // a short depth: Eigen was faster
  CHECK_FALSE(gemm_dots_suits(3, 65536, 64, true, true));     // b by rows: gemm_direct
  CHECK_FALSE(gemm_dots_suits(3, 65536, 64, false, false));
  CHECK_FALSE(gemm_dots_suits(4, 65536, 100000, true, false));  // the scratch would be large
}

// Rows a multiple of 4 KiB apart (fields of 8192 or 65536 points, whose rows share cache sets),
// against the naive product, at one and two threads.
TEST_CASE_TEMPLATE("gemm_dots: rows 4 KiB apart", T, float, double) {
  const int before = omp_get_max_threads();
  for (const Case& cs : {Case{13, 3000, 29}, Case{64, 4100, 20}, Case{5, 2500, 70}}) {
    const int64_t outer = 8192 / static_cast<int64_t>(sizeof(T)) * ((cs.k * static_cast<int64_t>(sizeof(T)) + 8191) / 8192);
    auto a = random_values<T>(static_cast<size_t>(cs.n * outer), 21);
    auto b = random_values<T>(static_cast<size_t>(cs.m * outer), 22);
    auto c0 = random_values<T>(static_cast<size_t>(cs.n * cs.m), 23);
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      std::vector<T> c = c0;
      gemm_dots<T>(c.data(), cs.m, {a.data(), true, outer}, {b.data(), false, outer}, cs.n, cs.k, cs.m, true);
      int bad = 0;
      for (int64_t i = 0; i < cs.n; ++i)
        for (int64_t j = 0; j < cs.m; ++j) {
          long double s = c0[i * cs.m + j], scale = std::fabs(static_cast<double>(s));
          for (int64_t p = 0; p < cs.k; ++p) {
            s += static_cast<long double>(a[i * outer + p]) * b[j * outer + p];
            scale += std::fabs(static_cast<double>(a[i * outer + p] * b[j * outer + p]));
          }
          if (std::fabs(static_cast<double>(c[i * cs.m + j] - s)) > (sizeof(T) == 4 ? 2e-6 : 1e-14) * (scale + 1)) ++bad;
        }
      CHECK_MESSAGE(bad == 0, "n ", cs.n, " k ", cs.k, " m ", cs.m, " threads ", threads);
    }
  }
  omp_set_num_threads(before);
}

// Products that neither gemm_direct nor gemm_dots takes in f32, split into two or more chunks with a
// shorter last one, in each layout that reaches the split. (In f64, whose vectors are 8 wide,
// gemm_direct takes the 24- and 40-column ones; the last case, over 512 columns, is split in both.)
const Case kSplitCases[] = {{33, 8192 + 100, 9}, {40, 3 * 4096, 20}, {64, 9000, 24}, {40, 3528, 20},
                            {33, 5000, 40},  // n < m: partials of the transposed product
                            {33, 2048, 520}};  // the same in f64 too

TEST_CASE("depth split: which shapes take it") {
  // The split's own rule (gemm_cpu::gemm asks it after gemm_direct and gemm_dots, which now take
  // these three: the MLP weight gradients of 64x128 and 128x256, and 64x128's coarse grid).
  CHECK(gemm_depth_split_suits(64, 32768, 32));
  CHECK(gemm_depth_split_suits(128, 65536, 64));
  CHECK(gemm_depth_split_suits(32, 3528, 64));
  CHECK_FALSE(gemm_depth_split_suits(64, 2047, 32));   // a short depth: Eigen alone
  CHECK_FALSE(gemm_depth_split_suits(1, 100000, 1));   // a dot product: too little work to share
  CHECK_FALSE(gemm_depth_split_suits(512, 65536, 512));  // a large output: Eigen splits that well
  for (const Case& cs : kSplitCases) {
    CHECK_FALSE(gemm_dots_suits(cs.n, cs.k, cs.m, true, false));
    CHECK_FALSE(gemm_direct_suits(cs.n, cs.k, cs.m, 4, false));
    CHECK(gemm_depth_split_suits(cs.n, cs.k, cs.m));
  }
  const Case& both = std::end(kSplitCases)[-1];
  for (bool b_row : {false, true}) CHECK_FALSE(gemm_direct_suits(both.n, both.k, both.m, 8, b_row));
}

TEST_CASE_TEMPLATE("depth split: against a naive product", T, float, double) {
  for (const Case& cs : kSplitCases)
    for (bool a_row : {true, false})
      for (bool b_row : {true, false})  // b by rows reaches the split where gemm_direct refuses it
        for (bool acc : {false, true}) check_against_naive<T>(cs, a_row, b_row, acc, Kernel::gemm);
}

TEST_CASE_TEMPLATE("depth split: the same bits at one and two threads", T, float, double) {
  check_thread_independent<T>({std::begin(kSplitCases), std::end(kSplitCases)}, Kernel::gemm);
}

// Three chunks against a 128 x 128 f64 output (128 KiB a partial, so two partials): the second
// partial takes two chunks in turn.
const Case kGroupedSplit{128, 2 * 4096 + 16, 128};

TEST_CASE("depth split: chunks grouped into fewer partials, against a naive product") {
  check_against_naive<double>(kGroupedSplit, true, false, true, Kernel::gemm);
  check_thread_independent<double>({kGroupedSplit}, Kernel::gemm);
}
