// InlineDims (Shape) and InlineVector: the vector operations the engine and ops use, on both sides
// of the inline capacity, with ranges and elements that alias the container itself.
#include <doctest/doctest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/inline_dims.h"
#include "engine/inline_vector.h"

using gs::InlineDims;
using gs::InlineVector;

namespace {

std::vector<int64_t> as_vector(const InlineDims& d) { return d; }

InlineDims iota(int64_t n) {
  InlineDims d;
  for (int64_t i = 0; i < n; ++i) d.push_back(i + 1);
  return d;
}

}  // namespace

TEST_CASE("InlineDims: the vector operations, inline and on the heap") {
  for (int64_t n : {0, 3, 6, 7, 13}) {
    CAPTURE(n);
    InlineDims d = iota(n);
    std::vector<int64_t> v(d.begin(), d.end());
    CHECK(d.size() == static_cast<size_t>(n));
    CHECK(as_vector(d) == v);
    InlineDims copy = d, moved = std::move(copy);
    CHECK(moved == d);
    CHECK(copy.empty());  // a moved-from shape is empty and usable
    copy.push_back(9);
    CHECK(copy == InlineDims{9});
    d.insert(d.begin(), 100);
    v.insert(v.begin(), 100);
    d.insert(d.end(), {7, 8});
    v.insert(v.end(), {7, 8});
    d.insert(d.begin() + 1, size_t{2}, int64_t{-1});
    v.insert(v.begin() + 1, size_t{2}, int64_t{-1});
    CHECK(as_vector(d) == v);
    d.erase(d.begin() + 1, d.begin() + 3);
    v.erase(v.begin() + 1, v.begin() + 3);
    d.erase(d.begin());
    v.erase(v.begin());
    CHECK(as_vector(d) == v);
    d.resize(static_cast<size_t>(n) + 4, 5);
    v.resize(static_cast<size_t>(n) + 4, 5);
    CHECK(as_vector(d) == v);
    InlineDims from_vector = v;
    CHECK(from_vector == d);
    CHECK(d == v);  // compared with a vector through the conversion
    d = d;          // self-assignment
    CHECK(as_vector(d) == v);
  }
}

TEST_CASE("InlineDims: ranges from the shape itself") {
  for (int64_t n : {4, 6, 9}) {
    CAPTURE(n);
    InlineDims d = iota(n);
    std::vector<int64_t> v(d.begin(), d.end());
    d.assign(d.rbegin(), d.rend());
    CHECK(as_vector(d) == std::vector<int64_t>(v.rbegin(), v.rend()));
    d.insert(d.begin() + 1, d.begin(), d.end());  // grows past the inline capacity for n >= 4
    std::vector<int64_t> w(v.rbegin(), v.rend());
    const std::vector<int64_t> reversed = w;
    w.insert(w.begin() + 1, reversed.begin(), reversed.end());
    CHECK(as_vector(d) == w);
  }
}

TEST_CASE("InlineDims: order, constructors, at()") {
  CHECK(InlineDims{1, 2} < InlineDims{1, 3});
  CHECK(InlineDims{1, 2} < InlineDims{1, 2, 0});
  CHECK(InlineDims(3, 7) == InlineDims{7, 7, 7});
  CHECK(InlineDims(size_t{2}) == InlineDims{0, 0});
  const InlineDims d{4, 5};
  CHECK(d.at(1) == 5);
  CHECK_THROWS_AS(d.at(2), std::out_of_range);
  CHECK(d.front() == 4);
  CHECK(d.back() == 5);
}

TEST_CASE("InlineVector: elements with owners, inline and on the heap") {
  for (int n : {0, 2, 3, 9}) {
    CAPTURE(n);
    InlineVector<std::shared_ptr<std::string>, 2> v;
    auto keep = std::make_shared<std::string>("kept");
    for (int i = 0; i < n; ++i) v.push_back(i % 2 ? keep : std::make_shared<std::string>(std::to_string(i)));
    CHECK(v.size() == static_cast<size_t>(n));
    if (n > 1) CHECK(keep.use_count() == 1 + n / 2);
    InlineVector<std::shared_ptr<std::string>, 2> copy = v;
    if (n > 1) CHECK(keep.use_count() == 1 + 2 * (n / 2));
    InlineVector<std::shared_ptr<std::string>, 2> moved = std::move(copy);
    CHECK(copy.empty());
    if (n > 1) CHECK(keep.use_count() == 1 + 2 * (n / 2));
    std::vector<std::shared_ptr<std::string>> as_std = moved;
    CHECK(as_std.size() == static_cast<size_t>(n));
    moved = v;  // copy-assign over elements
    moved.clear();
    as_std.clear();
    if (n > 1) CHECK(keep.use_count() == 1 + n / 2);
    v = std::vector<std::shared_ptr<std::string>>{};
    CHECK(keep.use_count() == 1);
  }
}

TEST_CASE("InlineVector: pushing one of its own elements while full") {
  InlineVector<std::shared_ptr<std::string>, 2> v;
  v.push_back(std::make_shared<std::string>("a"));
  v.push_back(std::make_shared<std::string>("b"));
  v.push_back(v[0]);  // grows: the argument must be read before the elements move
  v.push_back(v[3 - 1]);
  REQUIRE(v.size() == 4);
  CHECK(*v[2] == "a");
  CHECK(*v[3] == "a");
  CHECK(v[0].use_count() == 3);
  CHECK_THROWS_AS(v.at(4), std::out_of_range);
}
