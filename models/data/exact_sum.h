// An exact, order-independent sum of doubles. The sum is kept as a fixed-point integer wide enough
// for any finite double (limbs of 32 bits from 2^-1074 up), so the partial sums of tiles read on
// different ranks, merged in any order, give the same bits as one pass over the whole data. That is
// what lets a normaliser fitted on a split grid equal the one-process normaliser exactly (and a
// checkpoint written on one grid resume on another). The limbs travel through an i64 all-reduce.
#pragma once
#include <cstdint>
#include <vector>

namespace gs::models {

class ExactSum {
 public:
  static constexpr int kLimbs = 70;  // 2098 bits of doubles plus headroom for 2^63 terms
  ExactSum();
  void add(double x);  // x must be finite
  void merge(const ExactSum& other);
  // The sum correctly rounded to a double (to nearest, ties to even): a function of the exact value
  // only, never of the order of the adds.
  double value() const;
  // Carry-propagated limbs (each in [0, 2^32) but the top one, which holds the sign): summing the
  // limbs of several ExactSums as int64 and calling from_limbs() merges them.
  std::vector<int64_t> limbs() const;
  static ExactSum from_limbs(const std::vector<int64_t>& limbs);

 private:
  void normalize();
  std::vector<int64_t> limb_;
  int64_t pending_ = 0;  // adds since the last carry propagation (each moves a limb by < 2^32)
};

}  // namespace gs::models
