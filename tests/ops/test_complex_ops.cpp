// Complex ops (ops/complex_ops.h): complex() from parts, real / imag write-through views, conj,
// view_as_real / view_as_complex, abs, and error messages.
#include "tests/ops/view_test_util.h"

TEST_CASE("complex: complex() builds from parts, with broadcasting and dtype promotion") {
  Tensor re = iota({2, 3}), im = gs::mul(iota({3}), -1.0);
  Tensor z = gs::complex(re, im);
  CHECK(z.dtype() == DType::c128);
  CHECK(z.sizes() == Shape{2, 3});
  auto v = z.to_vector<c128>();
  for (int64_t i = 0; i < 6; ++i) CHECK(v[i] == c128(static_cast<double>(i), -static_cast<double>(i % 3)));
  Tensor z32 = gs::complex(gs::to(re, DType::f32), gs::to(im, DType::f32));
  CHECK(z32.dtype() == DType::c64);
  CHECK(z32.to_vector<c128>() == v);
  // Non-contiguous parts.
  Tensor zt = gs::complex(gs::transpose(re, 0, 1), gs::transpose(re, 0, 1));
  CHECK(zt.to_vector<c128>()[1] == c128(3, 3));
  // Errors.
  std::string msg = error_of([&] { gs::complex(re, gs::to(im, DType::f32)); });
  CHECK(contains(msg, "complex"));
  CHECK(contains(msg, "same dtype"));
  msg = error_of([&] { gs::complex(z, z); });
  CHECK(contains(msg, "complex"));
  CHECK(contains(msg, "c128"));
  CHECK(contains(error_of([&] { gs::complex(iota({2}), iota({3})); }), "(2,)"));
  CHECK(contains(error_of([&] { gs::complex(gs::arange(3), gs::arange(3)); }), "i64"));
  CHECK(contains(error_of([&] { gs::complex(Tensor(), re); }), "undefined"));
}

TEST_CASE("complex: real() and imag() are write-through views") {
  for (DType dt : {DType::c128, DType::c64}) {
    INFO(gs::dtype_name(dt));
    Tensor z = gs::to(gs::complex(iota({2, 3}), gs::add(iota({2, 3}), 10.0)), dt);
    Tensor re = gs::real(z), im = gs::imag(z);
    CHECK(re.dtype() == gs::real_dtype(dt));
    CHECK(im.dtype() == gs::real_dtype(dt));
    CHECK(re.sizes() == z.sizes());
    CHECK(re.strides() == Shape{6, 2});
    check_shares(re, z);
    check_shares(im, z);
    CHECK(vals(re) == vals(iota({2, 3})));
    CHECK(vals(im) == std::vector<double>{10, 11, 12, 13, 14, 15});
    uint64_t v0 = z.version();
    write_through(gs::select(re, 1, 2), -1.0);  // Re z[:, 2] = -1
    write_through(gs::select(gs::select(im, 0, 0), 0, 0), -2.0);  // Im z[0, 0] = -2
    CHECK(z.version() == v0 + 2);
    auto zv = z.to_vector<c128>();
    CHECK(zv[0] == c128(0, -2));
    CHECK(zv[2] == c128(-1, 12));
    CHECK(zv[5] == c128(-1, 15));
    CHECK(zv[4] == c128(4, 14));
    // Views of a non-contiguous complex tensor.
    Tensor zt = gs::transpose(z, 0, 1);
    CHECK(vals(gs::imag(zt)) == std::vector<double>{-2, 13, 11, 14, 12, 15});
    check_shares(gs::real(zt), z);
  }
  Tensor r = iota({3});
  CHECK(gs::real(r).is_same(r));
  std::string msg = error_of([&] { gs::imag(r); });
  CHECK(contains(msg, "imag"));
  CHECK(contains(msg, "f64"));
  CHECK(contains(error_of([&] { gs::real(Tensor()); }), "undefined"));
}

TEST_CASE("complex: conj") {
  Tensor z = gs::complex(iota({2, 2}), gs::sub(1.0, iota({2, 2})));
  auto v = z.to_vector<c128>();
  auto c = gs::conj(z).to_vector<c128>();
  for (size_t i = 0; i < v.size(); ++i) CHECK(c[i] == std::conj(v[i]));
  CHECK(gs::conj(z).storage() != z.storage());
  Tensor r = iota({3});
  CHECK(gs::conj(r).is_same(r));
  // conj of a non-contiguous c64.
  Tensor zt = gs::transpose(gs::to(z, DType::c64), 0, 1);
  auto ct = gs::conj(zt).to_vector<c128>();
  CHECK(ct[1] == std::conj(v[2]));
}

TEST_CASE("complex: view_as_real / view_as_complex round trip") {
  Tensor z = gs::complex(iota({2, 3}), gs::add(iota({2, 3}), 0.5));
  Tensor r = gs::view_as_real(z);
  CHECK(r.sizes() == Shape{2, 3, 2});
  CHECK(r.strides() == Shape{6, 2, 1});
  CHECK(r.dtype() == DType::f64);
  check_shares(r, z);
  auto rv = vals(r);
  for (int64_t i = 0; i < 6; ++i) {
    CHECK(rv[2 * i] == static_cast<double>(i));
    CHECK(rv[2 * i + 1] == static_cast<double>(i) + 0.5);
  }
  Tensor back = gs::view_as_complex(r);
  CHECK(back.dtype() == DType::c128);
  CHECK(back.sizes() == z.sizes());
  CHECK(back.to_vector<c128>() == z.to_vector<c128>());
  check_shares(back, z);
  // Write through the real view shows up in the complex tensor.
  write_through(gs::select(gs::select(r, 0, 1), -1, 1), 42.0);  // Im z[1, :] = 42
  CHECK(z.to_vector<c128>() == std::vector<c128>{{0, 0.5}, {1, 1.5}, {2, 2.5}, {3, 42}, {4, 42}, {5, 42}});
  // From real data: (..., 2) contiguous-last becomes complex; round trip to the same values.
  Tensor x = gs::to(iota({4, 2}), DType::f32);
  Tensor xc = gs::view_as_complex(x);
  CHECK(xc.dtype() == DType::c64);
  CHECK(xc.sizes() == Shape{4});
  CHECK(xc.to_vector<c128>()[3] == c128(6, 7));
  CHECK(vals(gs::view_as_real(xc)) == vals(x));
  // Of a non-contiguous complex tensor, and of a selected row (even offset).
  Tensor zt = gs::transpose(z, 0, 1);
  CHECK(gs::view_as_real(zt).strides() == Shape{2, 6, 1});
  CHECK(gs::view_as_complex(gs::view_as_real(zt)).to_vector<c128>() == zt.to_vector<c128>());
  Tensor row = gs::select(iota({3, 4}), 0, 1);  // offset 4
  CHECK(gs::view_as_complex(gs::reshape(row, {2, 2})).to_vector<c128>() == std::vector<c128>{{4, 5}, {6, 7}});
}

TEST_CASE("complex: view_as_real / view_as_complex errors") {
  std::string msg = error_of([&] { gs::view_as_complex(iota({3, 3})); });
  CHECK(contains(msg, "view_as_complex"));
  CHECK(contains(msg, "size 2"));
  CHECK(contains(error_of([&] { gs::view_as_complex(gs::transpose(iota({2, 2}), 0, 1)); }), "stride"));
  CHECK(contains(error_of([&] { gs::view_as_complex(gs::arange(4)); }), "view_as_complex"));
  CHECK(contains(error_of([&] { gs::view_as_complex(iota({})); }), "view_as_complex"));
  // Odd storage offset: the pairs would straddle two complex numbers.
  msg = error_of([&] { gs::view_as_complex(gs::reshape(gs::slice(iota({5}), 0, 1, 5), {2, 2})); });
  CHECK(contains(msg, "offset"));
  // Odd leading stride.
  msg = error_of([&] { gs::view_as_complex(gs::slice(iota({3, 3}), 1, 0, 2)); });
  CHECK(contains(msg, "strides"));
  msg = error_of([&] { gs::view_as_real(iota({2})); });
  CHECK(contains(msg, "view_as_real"));
  CHECK(contains(msg, "f64"));
  CHECK(contains(error_of([&] { gs::view_as_real(Tensor()); }), "undefined"));
}

TEST_CASE("complex: abs is the modulus, in the real dtype") {
  Tensor z = gs::from_vector(std::vector<c128>{{3, 4}, {0, 0}, {-1, 0}, {0, -2}, {1e200, 1e200}});
  auto a = vals(gs::abs(z));
  CHECK(a[0] == 5.0);
  CHECK(a[1] == 0.0);
  CHECK(a[2] == 1.0);
  CHECK(a[3] == 2.0);
  CHECK(a[4] == doctest::Approx(std::sqrt(2.0) * 1e200));  // no overflow (hypot)
  Tensor z64 = gs::to(z, DType::c64);
  CHECK(gs::abs(gs::slice(z64, 0, 0, 4)).dtype() == DType::f32);
  CHECK(vals(gs::abs(gs::slice(z64, 0, 0, 4))) == std::vector<double>{5, 0, 1, 2});
  // The gradient of |z| at z = 0 is 0, not NaN.
  Tensor leaf = gs::from_vector(std::vector<c128>{{0, 0}, {3, 4}});
  leaf.set_requires_grad(true);
  auto g = gs::grad({gs::sum(gs::abs(leaf))}, {leaf})[0].to_vector<c128>();
  CHECK(g[0] == c128(0, 0));
  CHECK(g[1].real() == doctest::Approx(0.6));
  CHECK(g[1].imag() == doctest::Approx(0.8));
}
