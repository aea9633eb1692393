// The seed scenario: a DDP-style buffer broadcast overwrote a constant table (think SHT Legendre
// weights) in place between forward and backward. The op saved the table for its backward, so
// backward would silently use the new values with the old graph. gradsphere's version counter
// catches it: backward throws an error naming the op, the tensor's shape and both versions.
#include <cstdio>

#include "ops/ops.h"

using namespace gs;

int main() {
  Tensor legendre_table = randn({4, 8}, {42, 0}, DType::f32).set_name("legendre_table");
  Tensor field = randn({8, 3}, {42, 1}, DType::f32).set_requires_grad();

  // Forward: the "transform" saves the table (its backward needs it).
  Tensor spectral = matmul(legendre_table, field);
  Tensor loss = sum(mul(spectral, spectral));
  std::printf("forward done; table version = %llu\n", static_cast<unsigned long long>(legendre_table.version()));

  // Between forward and backward, a buffer broadcast writes into the table in place.
  Tensor from_rank0 = randn({4, 8}, {7, 0}, DType::f32);
  copy_(legendre_table, from_rank0);
  std::printf("buffer broadcast wrote the table; version = %llu\n",
              static_cast<unsigned long long>(legendre_table.version()));

  try {
    loss.backward();
  } catch (const Error& e) {
    std::printf("backward refused, as it must:\n  %s\n", e.what());
    std::string msg = e.what();
    bool names_everything = msg.find("matmul") != std::string::npos && msg.find("(4, 8)") != std::string::npos &&
                            msg.find("version 0") != std::string::npos && msg.find("version 1") != std::string::npos;
    if (!names_everything) {
      std::printf("FAIL: the error should name the op, the shape and both versions\n");
      return 1;
    }
    std::printf("Fix: never broadcast constant tables; synchronise mutable buffers only at step boundaries.\n");
    return 0;
  }
  std::printf("FAIL: backward ran through a modified saved tensor\n");
  return 1;
}
