// Tensors: metadata, views sharing storage and the version counter, copies, casts, factories,
// printing, and the errors bad input gets.
#include <sstream>
#include <cstdint>
#include <cstring>
#include <thread>

#include "engine/cuda_runtime.h"
#include "engine/object_pool.h"
#include "tests/engine/engine_test_util.h"

using namespace gs;
using namespace gs_test;

namespace {

// `v` is a view of `base`: same storage, same version counter (both ways), base recorded.
void check_shares_storage_and_version(const Tensor& base, const Tensor& v) {
  CHECK(v.storage() == base.storage());
  CHECK(v.is_view());
  CHECK(v.view_base().is_same(base.is_view() ? base.view_base() : base));
  uint64_t before = base.version();
  CHECK(v.version() == before);
  bump_version(v);
  CHECK(base.version() == before + 1);
  bump_version(base);
  CHECK(v.version() == before + 2);
}

}  // namespace

TEST_CASE("tensor: dtypes, sizes, strides, offsets of fresh tensors") {
  struct Case {
    DType dtype;
    size_t bytes;
  };
  for (auto [dtype, bytes] : {Case{DType::f32, 4}, Case{DType::f64, 8}, Case{DType::c64, 8}, Case{DType::c128, 16},
                              Case{DType::i64, 8}, Case{DType::b8, 1}}) {
    CAPTURE(dtype_name(dtype));
    Tensor t = zeros({2, 3, 4}, dtype);
    CHECK(t.dtype() == dtype);
    CHECK(t.sizes() == Shape{2, 3, 4});
    CHECK(t.strides() == Shape{12, 4, 1});
    CHECK(t.offset() == 0);
    CHECK(t.dim() == 3);
    CHECK(t.numel() == 24);
    CHECK(t.size(-1) == 4);
    CHECK(t.stride(0) == 12);
    CHECK(t.is_contiguous());
    CHECK_FALSE(t.is_view());
    CHECK(t.version() == 0);
    CHECK(t.device() == Device::cpu());
    CHECK(t.storage()->nbytes() == 24 * bytes);
    CHECK(dtype_size(dtype) == bytes);
  }
  Tensor s = scalar_tensor(2.5, DType::f64);
  CHECK(s.dim() == 0);
  CHECK(s.numel() == 1);
  CHECK(s.strides().empty());
  CHECK(s.item<double>() == 2.5);
  CHECK(zeros({3, 0}).numel() == 0);
  CHECK(zeros({2, 3}).meta_str() == "f32 (2, 3) on cpu");
  CHECK(zeros({5}, DType::c128).meta_str() == "c128 (5,) on cpu");
}

TEST_CASE("tensor: factories fill the values they promise") {
  check_values(ones({2, 2}, DType::f32), {1, 1, 1, 1});
  check_values(full({3}, -1.5, DType::f64), {-1.5, -1.5, -1.5});
  CHECK(full({2}, 7, DType::i64).to_vector<int64_t>() == std::vector<int64_t>{7, 7});
  CHECK(full({2}, 1, DType::b8).to_vector<bool>() == std::vector<bool>{true, true});
  auto z = full_complex({2}, c128(1, -2), DType::c128).to_vector<c128>();
  CHECK(z[1] == c128(1, -2));
  CHECK(full_complex({1}, c128(0.5, 0.25), DType::c64).item<c64>() == c64(0.5f, 0.25f));
  Tensor like = zeros_like(full({2, 3}, 4.0, DType::c64));
  CHECK(like.dtype() == DType::c64);
  CHECK(like.sizes() == Shape{2, 3});
  check_values(ones_like(zeros({2}, DType::f64)), {1, 1});

  SUBCASE("arange") {
    Tensor a = arange(5);
    CHECK(a.dtype() == DType::i64);
    CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
    check_values(arange(1.0, 2.5, 0.5, DType::f64), {1.0, 1.5, 2.0});
    check_values(arange(3.0, 0.0, -1.0, DType::f64), {3, 2, 1});
    CHECK(arange(0.0, 1.0, 0.25).numel() == 4);
    CHECK(arange(2.0, 2.0).numel() == 0);
    CHECK(has(error_of([] { arange(0.0, 1.0, 0.0); }), "step must be non-zero"));
    CHECK(has(error_of([] { arange(0.0, 1.0, -1.0); }), "does not move from 0 towards 1"));
    CHECK(has(error_of([] { arange(0.0, 3.0, 1.0, DType::c64); }), "expected a real dtype"));
  }
  SUBCASE("linspace") {
    check_values(linspace(0.0, 1.0, 5, DType::f64), {0, 0.25, 0.5, 0.75, 1.0}, 0);
    // Both ends are exact even where start + (n-1) * h would round.
    auto v = vals(linspace(0.1, 0.7, 7, DType::f64));
    CHECK(v.front() == 0.1);
    CHECK(v.back() == 0.7);
    CHECK(linspace(-1.0, 1.0, 4, DType::f32).to_vector<float>().back() == 1.0f);
    // One step gives the start (as numpy and torch do), not the end.
    check_values(linspace(2.0, 5.0, 1, DType::f64), {2.0}, 0);
    CHECK(linspace(0.0, 1.0, 0).numel() == 0);
    CHECK(has(error_of([] { linspace(0.0, 1.0, -1); }), "steps must be non-negative, got -1"));
  }
  SUBCASE("from_vector") {
    Tensor t = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
    CHECK(t.sizes() == Shape{2, 3});
    CHECK(t.data<double>()[5] == 6);
    CHECK(from_vector(std::vector<float>{1, 2, 3}).sizes() == Shape{3});
    CHECK(from_vector(std::vector<double>{4}).dim() == 0);  // a single value is a 0-dim tensor
    CHECK(from_vector(std::vector<c64>{{1, 2}}, {1}).item<c64>() == c64(1, 2));
    CHECK(from_vector(std::vector<int64_t>{3, 4}).dtype() == DType::i64);
    CHECK(from_vector(std::vector<bool>{true, false}).to_vector<bool>() == std::vector<bool>{true, false});
    std::string msg = error_of([] { from_vector(std::vector<double>{1, 2, 3, 4, 5}, {2, 3}); });
    CHECK(has(msg, "5 values do not fill shape (2, 3) (6 elements)"));
  }
}

TEST_CASE("tensor: views share storage and the version counter with their base") {
  Tensor t = from_vector(std::vector<double>(24, 0.0), {2, 3, 4});
  double* p = t.data<double>();
  for (int i = 0; i < 24; ++i) p[i] = i;

  SUBCASE("reshape and view of a contiguous tensor") {
    Tensor r = reshape(t, {4, -1});
    CHECK(r.sizes() == Shape{4, 6});
    CHECK(r.strides() == Shape{6, 1});
    check_shares_storage_and_version(t, r);
    check_shares_storage_and_version(t, view(t, {24}));
    check_shares_storage_and_version(t, flatten(t, 1));
    CHECK(flatten(t, 1).sizes() == Shape{2, 12});
  }
  SUBCASE("permute and transpose") {
    Tensor q = permute(t, {2, 0, 1});
    CHECK(q.sizes() == Shape{4, 2, 3});
    CHECK(q.strides() == Shape{1, 12, 4});
    CHECK_FALSE(q.is_contiguous());
    CHECK(vals(q)[1] == 4);   // q[0, 0, 1] = t[0, 1, 0]
    CHECK(vals(q)[3] == 12);  // q[0, 1, 0] = t[1, 0, 0]
    check_shares_storage_and_version(t, q);
    Tensor tr = transpose(t, 0, -1);
    CHECK(tr.sizes() == Shape{4, 3, 2});
    CHECK(tr.strides() == Shape{1, 4, 12});
    check_shares_storage_and_version(t, tr);
  }
  SUBCASE("slice, narrow and select") {
    Tensor s = slice(t, 2, 1, 4, 2);  // columns 1 and 3
    CHECK(s.sizes() == Shape{2, 3, 2});
    CHECK(s.strides() == Shape{12, 4, 2});
    CHECK(s.offset() == 1);
    CHECK(vals(s) == std::vector<double>{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23});
    check_shares_storage_and_version(t, s);
    Tensor n = narrow(t, 1, 1, 2);
    CHECK(n.offset() == 4);
    CHECK(n.sizes() == Shape{2, 2, 4});
    check_shares_storage_and_version(t, n);
    Tensor sel = select(t, 1, -1);  // t[:, 2, :]
    CHECK(sel.sizes() == Shape{2, 4});
    CHECK(sel.offset() == 8);
    CHECK(vals(sel) == std::vector<double>{8, 9, 10, 11, 20, 21, 22, 23});
    check_shares_storage_and_version(t, sel);
    // A view of a view records the root tensor as its base.
    Tensor sel2 = select(sel, 0, 1);
    CHECK(sel2.view_base().is_same(t));
    CHECK(sel2.offset() == 20);
    check_shares_storage_and_version(sel, sel2);
    // Python-style bounds clamp.
    CHECK(slice(t, 0, -1, 100).sizes() == Shape{1, 3, 4});
  }
  SUBCASE("expand, squeeze and unsqueeze") {
    Tensor col = from_vector(std::vector<double>{1, 2, 3}, {3, 1});
    Tensor e = expand(col, {2, 3, 4});
    CHECK(e.sizes() == Shape{2, 3, 4});
    CHECK(e.strides() == Shape{0, 1, 0});
    CHECK(vals(e)[4] == 2);
    check_shares_storage_and_version(col, e);
    CHECK(expand(col, {-1, 5}).sizes() == Shape{3, 5});
    Tensor sq = squeeze(col, 1);
    CHECK(sq.sizes() == Shape{3});
    check_shares_storage_and_version(col, sq);
    CHECK(squeeze(col, 0).sizes() == Shape{3, 1});  // not size 1: unchanged
    Tensor u = unsqueeze(t, 1);
    CHECK(u.sizes() == Shape{2, 1, 3, 4});
    check_shares_storage_and_version(t, u);
    CHECK(squeeze(u).sizes() == Shape{2, 3, 4});
  }
  SUBCASE("real and imaginary views of complex tensors") {
    Tensor z = from_vector(std::vector<c128>{{1, -1}, {2, -2}, {3, -3}, {4, -4}, {5, -5}, {6, -6}}, {2, 3});
    Tensor re = real(z), im = imag(z);
    CHECK(re.dtype() == DType::f64);
    CHECK(re.strides() == Shape{6, 2});
    CHECK(re.offset() == 0);
    CHECK(im.offset() == 1);
    CHECK(vals(re) == std::vector<double>{1, 2, 3, 4, 5, 6});
    CHECK(vals(im) == std::vector<double>{-1, -2, -3, -4, -5, -6});
    check_shares_storage_and_version(z, re);
    check_shares_storage_and_version(z, im);
    // A write through the imaginary view is visible in the complex tensor.
    copy_values(im, full({}, 9.0, DType::f64));
    CHECK(z.to_vector<c128>()[4] == c128(5, 9));
    // Parts of a view of a complex tensor.
    Tensor row = select(z, 0, 1);
    CHECK(vals(real(row)) == std::vector<double>{4, 5, 6});
    CHECK(real(row).offset() == 6);
    check_shares_storage_and_version(z, imag(row));
    Tensor vr = view_as_real(z);
    CHECK(vr.sizes() == Shape{2, 3, 2});
    CHECK(vals(vr)[3] == 9);
    check_shares_storage_and_version(z, vr);
    // real() of a real tensor is the tensor itself.
    CHECK(real(t).is_same(t));
    Tensor zc = from_vector(std::vector<c64>{{1.5f, 2.5f}});
    CHECK(imag(zc).dtype() == DType::f32);
    CHECK(imag(zc).item<float>() == 2.5f);
  }
  SUBCASE("reshape of a non-viewable tensor copies") {
    Tensor tr = transpose(t, 1, 2);
    Tensor r = reshape(tr, {2, 12});
    CHECK(r.storage() != t.storage());
    CHECK_FALSE(r.is_view());
    CHECK(r.is_contiguous());
    CHECK(vals(r)[1] == 4);  // tr[0, 0, 1] = t[0, 1, 0]
    CHECK(has(error_of([&] { view(tr, {24}); }), "cannot be viewed as (24,) without copying; use reshape()"));
  }
}

TEST_CASE("tensor: contiguous, clone, detach, item, casts") {
  Tensor t = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  SUBCASE("contiguous returns the tensor itself when it already is") {
    CHECK(contiguous(t).is_same(t));
    Tensor tr = transpose(t, 0, 1);
    Tensor c = contiguous(tr);
    CHECK(c.is_contiguous());
    CHECK(c.strides() == Shape{2, 1});
    CHECK(c.storage() != t.storage());
    CHECK(vals(c) == std::vector<double>{1, 4, 2, 5, 3, 6});
  }
  SUBCASE("clone has its own storage and version counter") {
    Tensor c = clone(t);
    CHECK(c.storage() != t.storage());
    CHECK_FALSE(c.is_view());
    CHECK(vals(c) == vals(t));
    bump_version(c);
    CHECK(t.version() == 0);
    c.data<double>()[0] = 100;
    CHECK(t.data<double>()[0] == 1);
  }
  SUBCASE("detach shares storage and version, drops history") {
    Tensor x = leaf({1, 2});
    Tensor y = mul(x, 2.0);
    Tensor d = y.detach();
    CHECK(d.storage() == y.storage());
    CHECK(d.is_leaf());
    CHECK_FALSE(d.requires_grad());
    CHECK(d.grad_fn() == nullptr);
    bump_version(d);
    CHECK(y.version() == 1);
  }
  SUBCASE("item") {
    CHECK(scalar_tensor(3.0, DType::f64).item<double>() == 3.0);
    CHECK(from_vector(std::vector<double>{2.7}, {1, 1}).item<int64_t>() == 2);
    CHECK(from_vector(std::vector<c128>{{1, 2}}, {1}).item<double>() == 1.0);  // real part
    CHECK(has(error_of([&] { t.item<double>(); }), "item(): expected a tensor with one element, got shape (2, 3)"));
    CHECK(has(error_of([] { Tensor().item<double>(); }), "undefined"));
  }
  SUBCASE("to(dtype)") {
    Tensor f = to(t, DType::f32);
    CHECK(f.dtype() == DType::f32);
    CHECK(f.to_vector<float>()[5] == 6.0f);
    CHECK(to(t, DType::f64).is_same(t));
    Tensor z = to(t, DType::c128);
    CHECK(z.to_vector<c128>()[2] == c128(3, 0));
    Tensor back = to(from_vector(std::vector<c128>{{1.5, 7}, {-2, 3}}), DType::f64);
    CHECK(vals(back) == std::vector<double>{1.5, -2});
    CHECK(to(from_vector(std::vector<double>{2.9, -2.9}), DType::i64).to_vector<int64_t>() ==
          std::vector<int64_t>{2, -2});
    // Casting a non-contiguous view keeps the logical order.
    CHECK(to(transpose(t, 0, 1), DType::f32).to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
  }
  SUBCASE("to(device cpu) is the identity on a cpu tensor") {
    CHECK(to(t, Device::cpu()).is_same(t));
    Tensor moved = to_device_copy(t, Device::cpu());
    CHECK(moved.storage() != t.storage());
    CHECK(vals(moved) == vals(t));
  }
}

TEST_CASE("tensor: printing") {
  CHECK(from_vector(std::vector<float>{1, 2, 3}).str() == "tensor([1, 2, 3], dtype=f32, shape=(3,))");
  CHECK(from_vector(std::vector<double>{1, 2.5, -3, 4}, {2, 2}).str() ==
        "tensor([[1, 2.5],\n        [-3, 4]], dtype=f64, shape=(2, 2))");
  CHECK(arange(10).str() == "tensor([0, 1, 2, ..., 7, 8, 9], dtype=i64, shape=(10,))");
  CHECK(scalar_tensor(0.125, DType::f64).str() == "tensor(0.125, dtype=f64, shape=())");
  CHECK(from_vector(std::vector<c128>{{1, -2}}, {1}).str() == "tensor([1-2j], dtype=c128, shape=(1,))");
  CHECK(from_vector(std::vector<bool>{true, false}).str() == "tensor([true, false], dtype=bool, shape=(2,))");
  CHECK(Tensor().str() == "tensor(undefined)");
  // A transposed view prints in its logical order.
  Tensor m = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(transpose(m, 0, 1).str() == "tensor([[1, 4],\n        [2, 5],\n        [3, 6]], dtype=f64, shape=(3, 2))");
  // Three dims: the inner rows align under the second bracket.
  CHECK(zeros({2, 1, 2}, DType::f64).str() ==
        "tensor([[[0, 0]],\n        [[0, 0]]], dtype=f64, shape=(2, 1, 2))");
  Tensor x = leaf({1, 2});
  CHECK(x.str() == "tensor([1, 2], dtype=f64, shape=(2,), requires_grad=true)");
  CHECK(mul(x, x).str() == "tensor([1, 4], dtype=f64, shape=(2,), grad_fn=mul)");
  std::ostringstream os;
  os << x;
  CHECK(os.str() == x.str());
}

TEST_CASE("tensor: bad input gets an error that says what was expected and what came") {
  Tensor t = zeros({2, 3}, DType::f64);
  CHECK(has(error_of([&] { t.data<float>(); }), "data<f32>() called on a f64 tensor"));
  CHECK(has(error_of([&] { t.size(2); }), "dim 2 out of range for a tensor with 2 dims (expected -2..1)"));
  CHECK(has(error_of([] { empty({2, -1}); }), "sizes must be non-negative, got (2, -1)"));
  CHECK(has(error_of([] { zeros({2}, DType::i64).set_requires_grad(); }),
            "only floating and complex tensors can require gradients, got i64"));
  CHECK(has(error_of([] { full({2}, 1.0, DType::b8).set_requires_grad(); }), "got bool"));
  CHECK(has(error_of([] { full_complex({2}, c128(1, 1), DType::f64); }), "a complex value needs a complex dtype, got f64"));
  Tensor x = leaf({1, 2, 3});
  Tensor y = mul(x, 2.0);
  std::string msg = error_of([&] { y.set_requires_grad(false); });
  CHECK(has(msg, "only leaf tensors can be changed"));
  CHECK(has(msg, "computed by 'mul'"));
  msg = error_of([&] { x.set_grad(zeros({2}, DType::f64)); });
  CHECK(has(msg, "expected f64 (3,) on cpu, got f64 (2,) on cpu"));
  CHECK(has(error_of([&] { x.set_grad(zeros({3}, DType::f32)); }), "got f32 (3,) on cpu"));
  // Op errors (ops/ validates; the engine's shape helpers phrase broadcasting errors).
  CHECK(has(error_of([&] { add(t, zeros({2, 3}, DType::f32)); }),
            "add: expected both inputs to have the same dtype, got f64 and f32"));
  msg = error_of([&] { mul(t, zeros({4}, DType::f64)); });
  CHECK(has(msg, "shapes (2, 3) and (4,) cannot be broadcast together"));
  CHECK(has(msg, "3 vs 4"));
  CHECK(has(error_of([&] { reshape(t, {4, 2}); }), "shape (4, 2) has 8 elements, but the input (2, 3) has 6"));
  CHECK(has(error_of([&] { reshape(t, {-1, -1}); }), "only one dimension can be -1"));
  CHECK(has(error_of([&] { permute(t, {0, 0}); }), "dim 0 appears twice"));
  CHECK(has(error_of([&] { permute(t, {0}); }), "expected 2 dims"));
  CHECK(has(error_of([&] { select(t, 1, 3); }), "index 3 out of range for dim 1 of size 3"));
  CHECK(has(error_of([&] { expand(t, {2, 4}); }), "cannot expand (2, 3) to (2, 4)"));
  CHECK(has(error_of([&] { imag(t); }), "expected a complex tensor"));
  CHECK(has(error_of([&] { narrow(t, 1, 2, 2); }), "start 2 and length 2 do not fit in dim 1 of size 3"));
  CHECK(has(error_of([&] { add(t, Tensor()); }), "undefined"));
  CHECK(has(error_of([&] { copy_values(t, zeros({4}, DType::f64)); }), "source (4,) cannot be broadcast to destination (2, 3)"));
}

TEST_CASE("CPU allocator: large blocks are reused and counted only while live") {
  gs::Allocator& a = gs::allocator_for(gs::DeviceType::cpu);
  const size_t before = a.bytes_in_use();
  const size_t n = 3 * 1024 * 1024 + 17;  // a large, odd size
  void* p = a.allocate(n, 0);
  CHECK(a.bytes_in_use() == before + n);
  CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
  std::memset(p, 1, n);
  a.deallocate(p, n, 0);
  CHECK(a.bytes_in_use() == before);
  void* q = a.allocate(n - 5, 0);  // same size class
#if !defined(__SANITIZE_ADDRESS__)
  CHECK(q == p);  // the freed block came back instead of a fresh mapping
#endif
  a.deallocate(q, n - 5, 0);
  CHECK(a.bytes_in_use() == before);
#if !defined(__SANITIZE_ADDRESS__)
  CHECK(gs::memory_stats(gs::Device::cpu()).reserved >= before + n);  // the freed block is cached
#endif
  gs::empty_cache(gs::Device::cpu());
  CHECK(gs::memory_stats(gs::Device::cpu()).reserved == gs::memory_stats(gs::Device::cpu()).in_use);
}

TEST_CASE("CPU allocator: blocks of 4 MiB and more are their own 2 MiB aligned mappings, reused and released") {
  gs::Allocator& a = gs::allocator_for(gs::DeviceType::cpu);
  const size_t before = a.bytes_in_use();
  const size_t n = 5 * 1024 * 1024 + 3;  // an odd size past the threshold
  auto* p = static_cast<unsigned char*>(a.allocate(n, 0));
  CHECK(a.bytes_in_use() == before + n);
#if !defined(__SANITIZE_ADDRESS__)
  CHECK(reinterpret_cast<uintptr_t>(p) % (2u << 20) == 0);  // a huge page needs an aligned range
#endif
  std::memset(p, 7, n);  // every byte is writable, the last included
  CHECK(p[0] == 7);
  CHECK(p[n - 1] == 7);
  a.deallocate(p, n, 0);
  auto* q = static_cast<unsigned char*>(a.allocate(n, 0));
#if !defined(__SANITIZE_ADDRESS__)
  CHECK(q == p);  // cached, not mapped again
#endif
  a.deallocate(q, n, 0);
  gs::empty_cache(gs::Device::cpu());  // unmaps it
  CHECK(gs::memory_stats(gs::Device::cpu()).reserved == gs::memory_stats(gs::Device::cpu()).in_use);
  auto* r = static_cast<unsigned char*>(a.allocate(n, 0));  // a fresh mapping works after the release
  r[n - 1] = 1;
  CHECK(r[n - 1] == 1);
  a.deallocate(r, n, 0);
  CHECK(a.bytes_in_use() == before);
}

TEST_CASE("CPU allocator: small blocks are reused from the freeing thread's stack, counted, and handed back at its end") {
  gs::Allocator& a = gs::allocator_for(gs::DeviceType::cpu);
  const size_t before = a.bytes_in_use();
  void* p = a.allocate(40, 0);  // the 64-byte class
  CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
  a.deallocate(p, 40, 0);
  CHECK(a.bytes_in_use() == before);
#if !defined(__SANITIZE_ADDRESS__)
  CHECK(gs::memory_stats(gs::Device::cpu()).reserved >= before + 64);  // this thread's stack holds it
  void* q = a.allocate(60, 0);
  CHECK(q == p);  // the same class, from this thread's stack
  a.deallocate(q, 60, 0);
#endif
  // Blocks made on one thread and freed on another, and a thread that ends holding freed blocks:
  // every block is still counted exactly while it lives, and the ended thread's blocks are reusable.
  std::vector<void*> made;
  for (int i = 0; i < 100; ++i) made.push_back(a.allocate(1000, 0));
  CHECK(a.bytes_in_use() == before + 100 * 1000);
  std::thread([&] {
    for (void* b : made) a.deallocate(b, 1000, 0);
    void* own = a.allocate(3000, 0);
    static_cast<char*>(own)[2999] = 1;
    a.deallocate(own, 3000, 0);
  }).join();
  CHECK(a.bytes_in_use() == before);
  void* again = a.allocate(1000, 0);
  static_cast<char*>(again)[999] = 2;
  a.deallocate(again, 1000, 0);
  CHECK(a.bytes_in_use() == before);
  gs::empty_cache(gs::Device::cpu());  // this thread's stack and the shared lists
  CHECK(gs::memory_stats(gs::Device::cpu()).reserved == gs::memory_stats(gs::Device::cpu()).in_use);
}

TEST_CASE("object pool: a freed object's block is the next one of its size class, on the same thread") {
  void* p = gs::detail::pool_allocate(200);
  std::memset(p, 3, 200);
  gs::detail::pool_free(p, 200);
  void* q = gs::detail::pool_allocate(250);  // the same 64-byte class (193-256 bytes)
#if !defined(__SANITIZE_ADDRESS__)
  CHECK(q == p);
#endif
  gs::detail::pool_free(q, 250);
  // Objects made on one thread and freed on another (a tape built on one thread, released on
  // another), and objects too large to pool, go back without error.
  std::vector<void*> made;
  for (int i = 0; i < 50; ++i) made.push_back(gs::detail::pool_allocate(800));
  std::thread([&] {
    for (void* b : made) gs::detail::pool_free(b, 800);
  }).join();
  void* none = gs::detail::pool_allocate(0);  // a zero-size request is a block of the first class
  gs::detail::pool_free(none, 0);
  void* big = gs::detail::pool_allocate(5000);
  static_cast<char*>(big)[4999] = 1;
  gs::detail::pool_free(big, 5000);
  // A graph recorded on one thread and run and freed on another.
  gs::Tensor x = gs::full({4}, 2.0, gs::DType::f64);
  x.set_requires_grad(true);
  gs::Tensor y;
  std::thread([&] { y = gs::sum(gs::mul(x, x)); }).join();
  std::thread([&] { y.backward(); y = gs::Tensor(); }).join();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{4, 4, 4, 4});
}

TEST_CASE("device seam: a CUDA tensor without a usable GPU is a clear error; data<T>() refuses device memory") {
  if (gs::cuda::device_count() > 0) {
    gs::Tensor t = gs::zeros({3}, gs::DType::f32, gs::Device::cuda());
    CHECK(has(error_of([&] { t.data<float>(); }), "not addressable from the host"));
    CHECK(t.to_vector<float>() == std::vector<float>{0, 0, 0});
    return;
  }
  MESSAGE("no usable CUDA device (" << gs::cuda::unavailable_reason() << "): checking the errors only");
  std::string e = error_of([] { gs::zeros({3}, gs::DType::f32, gs::Device::cuda()); });
  CHECK(has(e, "cuda:0 is not available"));
  CHECK(has(e, gs::cuda::unavailable_reason()));
}

TEST_CASE("tensor: a name given with set_name shows in the errors that describe the tensor") {
  Tensor w = f64({1, 2, 3}, {3});
  w.set_name("weights");
  CHECK(w.meta_str() == "'weights' f64 (3,) on cpu");
  Tensor x = leaf({1, 2, 3}, {3});
  Tensor y = sum(mul(x, x));
  // w does not require grad: the error names it.
  std::string e = error_of([&] { grad({y}, {w}); });
  CHECK_MESSAGE(has(e, "'weights' f64 (3,) on cpu"), e);
  // An unnamed tensor is described as before.
  CHECK(x.meta_str() == "f64 (3,) on cpu");
}
