// InlineDims: a vector of int64 that keeps up to kInlineDims elements inside the object and moves
// to the heap only beyond that. It has the parts of std::vector's interface that shape code uses
// (iterators, push_back, insert, erase, resize, comparisons) and converts to and from
// std::vector<int64_t> implicitly, so it stands in for the vector that Shape used to be.
#pragma once
#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <stdexcept>
#include <vector>

namespace gs {

class InlineDims {
 public:
  static constexpr size_t kInlineDims = 6;  // 64 bytes in all: one cache line
  using value_type = int64_t;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = int64_t&;
  using const_reference = const int64_t&;
  using pointer = int64_t*;
  using const_pointer = const int64_t*;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  InlineDims() = default;
  explicit InlineDims(size_t n) { resize(n); }
  InlineDims(size_t n, int64_t value) { assign(n, value); }
  InlineDims(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }
  template <std::input_iterator It>
  InlineDims(It first, It last) { assign(first, last); }
  InlineDims(const std::vector<int64_t>& v) { assign(v.begin(), v.end()); }  // NOLINT: implicit on purpose
  // Copies of shapes are on every op's path (a tensor's sizes and strides, a node's metadata): the
  // inline case copies the whole buffer, a fixed size the compiler does in a few moves, not a
  // memcpy call of the used part.
  InlineDims(const InlineDims& o) { copy_from(o); }
  InlineDims(InlineDims&& o) noexcept { take(o); }
  ~InlineDims() { release(); }

  InlineDims& operator=(const InlineDims& o) {
    if (this == &o) return *this;
    if (o.size_ <= kInlineDims) {  // cannot throw
      release();
      copy_from(o);
    } else {
      *this = InlineDims(o);  // allocates first: a failure leaves this object as it was
    }
    return *this;
  }
  InlineDims& operator=(InlineDims&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  InlineDims& operator=(std::initializer_list<int64_t> values) {
    assign(values.begin(), values.end());
    return *this;
  }
  operator std::vector<int64_t>() const { return std::vector<int64_t>(begin(), end()); }  // NOLINT

  // ---- access
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return capacity_; }
  int64_t* data() { return data_; }
  const int64_t* data() const { return data_; }
  iterator begin() { return data_; }
  iterator end() { return data_ + size_; }
  const_iterator begin() const { return data_; }
  const_iterator end() const { return data_ + size_; }
  const_iterator cbegin() const { return begin(); }
  const_iterator cend() const { return end(); }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }
  int64_t& operator[](size_t i) { return data_[i]; }
  const int64_t& operator[](size_t i) const { return data_[i]; }
  int64_t& at(size_t i) { return data_[checked(i)]; }
  const int64_t& at(size_t i) const { return data_[checked(i)]; }
  int64_t& front() { return data_[0]; }
  const int64_t& front() const { return data_[0]; }
  int64_t& back() { return data_[size_ - 1]; }
  const int64_t& back() const { return data_[size_ - 1]; }

  // ---- modification
  void reserve(size_t n) {
    if (n <= capacity_) return;
    auto* grown = new int64_t[n];
    std::copy(begin(), end(), grown);
    const uint32_t kept = size_;
    release();  // empties: the size is restored below
    data_ = grown;
    capacity_ = static_cast<uint32_t>(n);
    size_ = kept;
  }
  void resize(size_t n, int64_t value = 0) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data_[i] = value;
    size_ = static_cast<uint32_t>(n);
  }
  void clear() { size_ = 0; }
  void push_back(int64_t v) {
    if (size_ == capacity_) reserve(2 * capacity_);
    data_[size_++] = v;
  }
  int64_t& emplace_back(int64_t v) {
    push_back(v);
    return back();
  }
  void pop_back() { --size_; }
  void assign(size_t n, int64_t value) {
    clear();
    resize(n, value);
  }
  template <std::input_iterator It>
  void assign(It first, It last) {
    if constexpr (std::forward_iterator<It>) {
      // The range may point into this object (s.assign(s.rbegin(), s.rend())): read it all into a
      // new object first, then take that one's elements (a copy of at most kInlineDims values,
      // or a heap block handed over).
      InlineDims made;
      made.reserve(static_cast<size_t>(std::distance(first, last)));
      for (; first != last; ++first) made.data_[made.size_++] = static_cast<int64_t>(*first);
      *this = std::move(made);
    } else {
      clear();
      for (; first != last; ++first) push_back(static_cast<int64_t>(*first));
    }
  }
  void assign(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }
  iterator insert(const_iterator pos, int64_t v) { return insert(pos, size_t{1}, v); }
  iterator insert(const_iterator pos, size_t n, int64_t v) {
    const size_t at_index = open_gap(pos, n);
    std::fill_n(data_ + at_index, n, v);
    return data_ + at_index;
  }
  template <std::forward_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    const std::vector<int64_t> values(first, last);  // the range may alias this object
    const size_t at_index = open_gap(pos, values.size());
    std::copy(values.begin(), values.end(), data_ + at_index);
    return data_ + at_index;
  }
  iterator insert(const_iterator pos, std::initializer_list<int64_t> values) {
    return insert(pos, values.begin(), values.end());
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const size_t from = static_cast<size_t>(first - data_), to = static_cast<size_t>(last - data_);
    std::copy(data_ + to, data_ + size_, data_ + from);
    size_ -= static_cast<uint32_t>(to - from);
    return data_ + from;
  }
  void swap(InlineDims& o) noexcept {
    InlineDims t(std::move(o));
    o = std::move(*this);
    *this = std::move(t);
  }

  // A loop, not std::equal: that becomes a memcmp call, slower than a few compares for a shape.
  friend bool operator==(const InlineDims& a, const InlineDims& b) {
    if (a.size_ != b.size_) return false;
    for (uint32_t i = 0; i < a.size_; ++i)
      if (a.data_[i] != b.data_[i]) return false;
    return true;
  }
  friend std::strong_ordering operator<=>(const InlineDims& a, const InlineDims& b) {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  int64_t* data_ = inline_;
  uint32_t size_ = 0;
  uint32_t capacity_ = kInlineDims;
  int64_t inline_[kInlineDims];

  bool on_heap() const { return data_ != inline_; }
  void release() {
    if (on_heap()) delete[] data_;
    data_ = inline_;
    capacity_ = kInlineDims;
    size_ = 0;
  }
  // Takes o's elements (its heap block, or a copy of its inline ones); leaves o empty.
  void take(InlineDims& o) {
    if (o.on_heap()) {
      data_ = o.data_;
      capacity_ = o.capacity_;
      o.data_ = o.inline_;
      o.capacity_ = kInlineDims;
    } else {
      std::memcpy(inline_, o.inline_, sizeof(inline_));  // the whole buffer: a fixed-size copy
    }
    size_ = o.size_;
    o.size_ = 0;
  }
  // Into an empty object (inline buffer, size 0).
  void copy_from(const InlineDims& o) {
    if (o.size_ <= kInlineDims) {
      std::memcpy(inline_, o.data_, sizeof(inline_));  // o's elements may live on its heap block
      size_ = o.size_;
    } else {
      assign(o.begin(), o.end());
    }
  }
  size_t checked(size_t i) const {
    if (i >= size_) throw std::out_of_range("InlineDims::at: index out of range");
    return i;
  }
  // Moves the elements from pos on n places up; returns pos's index.
  size_t open_gap(const_iterator pos, size_t n) {
    const size_t at_index = static_cast<size_t>(pos - data_);
    if (size_ + n > capacity_) reserve(std::max<size_t>(size_ + n, 2 * capacity_));
    std::copy_backward(data_ + at_index, data_ + size_, data_ + size_ + n);
    size_ += static_cast<uint32_t>(n);
    return at_index;
  }
};

}  // namespace gs
