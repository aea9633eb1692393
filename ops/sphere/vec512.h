// A 512-bit register of T for the ops/sphere kernels (lane_fft.cpp, legendre/table_kernels.cpp),
// as a GCC/Clang vector type: element-wise operators compile to whole-register instructions
// without depending on the auto-vectoriser, and the compiler splits them on narrower hardware.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

// Without AVX-512 GCC notes that passing or returning a 64-byte vector by value has a different ABI.
// Only kernel helpers do that: the includers' anonymous-namespace helpers and the inline load /
// store below, all compiled with the library's one -march; no interface of the library takes or
// returns a Vec.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace gs::sphere::simd {

template <typename T>
struct VecOf {
  typedef T type __attribute__((vector_size(64)));
};
template <typename T>
using Vec = typename VecOf<T>::type;

// Values of T per register: 8 doubles or 16 floats.
template <typename T>
constexpr int kLanes = static_cast<int>(64 / sizeof(T));

// The integer vector __builtin_shuffle takes as the index of a Vec<T> (GCC).
template <typename T>
struct IndexOf {
  using I = std::conditional_t<sizeof(T) == 8, int64_t, int32_t>;
  typedef I type __attribute__((vector_size(64)));
};
template <typename T>
using Index = typename IndexOf<T>::type;

// One register's worth of T from or to memory of any alignment.
template <typename T>
inline Vec<T> load(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
inline void store(T* p, const Vec<T>& v) {
  std::memcpy(p, &v, sizeof v);
}

}  // namespace gs::sphere::simd
