// Writes the tape of a small computation as Graphviz DOT (render with `dot -Tpng`). Each box is a
// node: op name, output shape, and saved tensors with the version they were saved at and now.
#include <cstdio>
#include <fstream>

#include "ops/ops.h"

using namespace gs;

int main(int argc, char** argv) {
  Tensor w = randn({3, 2}, {5, 0}, DType::f32).set_requires_grad().set_name("weight");
  Tensor x = randn({4, 3}, {5, 1}, DType::f32).set_name("input");
  Tensor h = gelu(matmul(x, w));
  Tensor loss = mean(mul(h, h));
  std::string dot = graph_to_dot({loss});
  std::printf("%s", dot.c_str());
  if (argc > 1) {
    std::ofstream(argv[1]) << dot;
    std::printf("written to %s\n", argv[1]);
  }
  bool complete = dot.find("matmul") != std::string::npos && dot.find("gelu") != std::string::npos &&
                  dot.find("AccumulateGrad") != std::string::npos && dot.find("weight") != std::string::npos &&
                  dot.find("v0 (now v0)") != std::string::npos;
  return complete ? 0 : 1;
}
