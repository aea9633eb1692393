// InlineVector<T, N>: a vector that keeps its first N elements inside the object and moves to the
// heap only beyond that. A recorded op has one or two inputs and one output in nearly every case,
// so a node's edge and metadata lists live in the node instead of in three heap blocks
// (engine/BENCHMARKS.md, "The tape chain's profile"). It has the parts of std::vector's interface
// the engine uses, and converts to and from std::vector<T>.
#pragma once
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

namespace gs {

template <typename T, size_t N>
class InlineVector {
 public:
  using value_type = T;
  using size_type = size_t;
  using iterator = T*;
  using const_iterator = const T*;

  InlineVector() = default;
  InlineVector(const InlineVector& o) { append_copies(o.begin(), o.end()); }
  InlineVector(InlineVector&& o) noexcept(std::is_nothrow_move_constructible_v<T>) { take(o); }
  InlineVector(const std::vector<T>& v) { append_copies(v.begin(), v.end()); }  // NOLINT: implicit on purpose
  InlineVector(std::vector<T>&& v) {                                           // NOLINT
    reserve(v.size());
    for (auto& x : v) push_back(std::move(x));
  }
  ~InlineVector() { release(); }

  InlineVector& operator=(const InlineVector& o) {
    if (this != &o) {
      clear();
      append_copies(o.begin(), o.end());
    }
    return *this;
  }
  InlineVector& operator=(InlineVector&& o) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  operator std::vector<T>() const { return std::vector<T>(begin(), end()); }  // NOLINT

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& at(size_t i) { return data_[checked(i)]; }
  const T& at(size_t i) const { return data_[checked(i)]; }
  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }

  void reserve(size_t n) {
    if (n <= capacity_) return;
    T* grown = std::allocator<T>().allocate(n);
    for (size_t i = 0; i < size_; ++i) {
      ::new (grown + i) T(std::move(data_[i]));
      data_[i].~T();
    }
    free_heap();
    data_ = grown;
    capacity_ = n;
  }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    if (size_ == capacity_) {
      // The arguments may be one of this vector's elements (v.push_back(v[0])): make the new
      // element before growing moves and destroys them.
      T made(std::forward<Args>(args)...);
      reserve(2 * capacity_);
      return *::new (data_ + size_++) T(std::move(made));
    }
    T* slot = ::new (data_ + size_) T(std::forward<Args>(args)...);
    ++size_;
    return *slot;
  }
  void push_back(const T& v) { emplace_back(v); }
  void push_back(T&& v) { emplace_back(std::move(v)); }
  void clear() {
    for (size_t i = 0; i < size_; ++i) data_[i].~T();
    size_ = 0;
  }

 private:
  alignas(T) unsigned char inline_[N * sizeof(T)];
  T* data_ = reinterpret_cast<T*>(inline_);
  size_t size_ = 0;
  size_t capacity_ = N;

  bool on_heap() const { return data_ != reinterpret_cast<const T*>(inline_); }
  void free_heap() {
    if (on_heap()) std::allocator<T>().deallocate(data_, capacity_);
  }
  void release() {
    clear();
    free_heap();
    data_ = reinterpret_cast<T*>(inline_);
    capacity_ = N;
  }
  template <typename It>
  void append_copies(It first, It last) {
    reserve(size_ + static_cast<size_t>(std::distance(first, last)));
    for (; first != last; ++first) emplace_back(*first);
  }
  // Takes o's elements (its heap block, or moves of its inline ones); leaves o empty.
  void take(InlineVector& o) {
    if (o.on_heap()) {
      data_ = o.data_;
      capacity_ = o.capacity_;
      size_ = o.size_;
      o.data_ = reinterpret_cast<T*>(o.inline_);
      o.capacity_ = N;
      o.size_ = 0;
      return;
    }
    for (size_t i = 0; i < o.size_; ++i) emplace_back(std::move(o.data_[i]));
    o.clear();
  }
  size_t checked(size_t i) const {
    if (i >= size_) throw std::out_of_range("InlineVector::at: index out of range");
    return i;
  }
};

}  // namespace gs
