// The registry walk on every backend present (as ggml's test-backend-ops): each op, on each
// (device, precision) pair its entry supports, against the CPU f64 run; on CUDA also gradcheck and
// gradgradcheck in f64. The ops come from the registry itself. Without a usable GPU the CUDA pairs
// are skipped with a line that says so and how many were not run.
#include <doctest/doctest.h>

#include "engine/cuda_runtime.h"
#include "ops/ops.h"

namespace {

const gs::RandomKey kKey{1234, 1};

}  // namespace

TEST_CASE("registry backends: every op supports cpu and cuda, f64 and f32") {
  // An entry may declare itself CPU-only (OpInfo::cuda_missing); none may today: the CUDA backend
  // covers the whole registry.
  for (const auto& op : gs::OpRegistry::all()) {
    CAPTURE(op.name);
    CHECK_MESSAGE(op.cuda_missing.empty(), "no CUDA kernels: " << op.cuda_missing);
    const auto b = gs::supported_backends(op);
    REQUIRE(b.size() == 4);
    CHECK(b[0].str() == "cpu f64");
    CHECK(b[1].str() == "cpu f32");
    CHECK(b[2].str() == "cuda f64");
    CHECK(b[3].str() == "cuda f32");
  }
  CHECK(gs::OpRegistry::all().size() >= 90);
}

TEST_CASE("registry backends: every op's samples in single precision agree with f64 on the CPU") {
  int checked = 0;
  for (const auto& op : gs::OpRegistry::all()) {
    for (const auto& smp : op.samples(kKey)) {
      INFO("op '" << op.name << "', sample '" << smp.label << "'");
      gs::BackendCheck c;
      try {
        c = gs::compare_with_cpu(op, smp, {gs::DeviceType::cpu, true});
      } catch (const std::exception& e) {
        c.ok = false;
        c.failure = std::string("threw: ") + e.what();
      }
      CHECK_MESSAGE(c.ok, "cpu f32: " << c.failure);
      ++checked;
    }
  }
  CHECK(checked >= static_cast<int>(gs::OpRegistry::all().size()));
}

TEST_CASE("registry backends: the comparison catches a wrong single-precision result") {
  // An op whose f32 path is off by 1e-3 relative: the walk must report it, not pass it.
  gs::OpInfo bad{"bad_f32", [](gs::RandomKey k) {
                   return std::vector<gs::OpSample>{{"plain", {gs::sample_leaf({4}, k)}}};
                 },
                 [](const std::vector<gs::Tensor>& x) {
                   return std::vector<gs::Tensor>{x[0].dtype() == gs::DType::f32 ? gs::mul(x[0], 1.001) : x[0]};
                 }};
  auto c = gs::compare_with_cpu(bad, bad.samples(kKey)[0], {gs::DeviceType::cpu, true});
  CHECK_FALSE(c.ok);
  CHECK(c.failure.find("output 0 differs") != std::string::npos);
  CHECK(c.max_error > 5e-4);
}

TEST_CASE("registry backends: every op with CUDA kernels on CUDA (f64 and f32 against the CPU, gradcheck in f64)") {
  if (gs::cuda::device_count() == 0) {
    int pairs = 0;
    for (const auto& op : gs::OpRegistry::all())
      for (const auto& b : gs::supported_backends(op)) pairs += b.device == gs::DeviceType::cuda;
    MESSAGE("CUDA suite skipped: no usable CUDA device (" << gs::cuda::unavailable_reason() << "); " << pairs
                                                         << " (op, cuda dtype) pairs not run");
    return;
  }
  for (const auto& op : gs::OpRegistry::all()) {
    if (!op.cuda_missing.empty()) continue;
    for (const auto& smp : op.samples(kKey)) {
      INFO("op '" << op.name << "', sample '" << smp.label << "'");
      for (bool single : {false, true}) {
        gs::BackendCheck c;
        try {
          c = gs::compare_with_cpu(op, smp, {gs::DeviceType::cuda, single});
        } catch (const std::exception& e) {
          c.ok = false;
          c.failure = std::string("threw: ") + e.what();
        }
        CHECK_MESSAGE(c.ok, (single ? "cuda f32: " : "cuda f64: ") << c.failure);
      }
      const auto fn = gs::on_device(op.fn, gs::Device::cuda(0));
      gs::GradcheckReport first, second;
      try {
        first = gs::gradcheck(fn, smp.inputs, op.tolerances);
        if (op.second_order) second = gs::gradgradcheck(fn, smp.inputs, op.tolerances);
      } catch (const std::exception& e) {
        first.ok = false;
        first.failure = std::string("threw: ") + e.what();
      }
      CHECK_MESSAGE(first.ok, "cuda gradcheck: " << first.failure);
      CHECK_MESSAGE(second.ok, "cuda gradgradcheck: " << second.failure);
    }
  }
}
