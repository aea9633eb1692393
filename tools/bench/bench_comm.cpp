// `mpiexec -n N gradsphere bench comm`: each collective tape op at message sizes 1 KB to 64 MB,
// next to the raw MPI call on the same buffers in the same run (the difference is the tape op's
// own cost: copies, packing, the node), and the gradient reducer's overlap with backward.
// Times are the slowest rank's median; bandwidths follow NCCL's conventions (algorithm bandwidth
// = bytes / time; bus bandwidth x 2(n-1)/n for all-reduce, x (n-1)/n for all-gather and all-to-all).
#include <fmt/core.h>

#include <vector>

#include "distributed/collectives.h"
#include "distributed/reducer.h"
#include "distributed/world.h"
#include "engine/autograd/engine.h"
#include "engine/factory.h"
#include "gradsphere_config.h"
#include "ops/ops.h"
#include "tools/bench/benches.h"
#include "tools/bench/timing.h"

#if GS_HAVE_MPI
#include <mpi.h>
#endif

namespace gs::tools {
namespace {

// The slowest rank's median seconds of body (every rank runs it in lock-step, barrier first).
template <typename F>
double timed(dist::Communicator& world, F&& body, int repeats) {
  double t = median_seconds(
      [&] {
        world.barrier();
        body();
      },
      repeats);
  Tensor v = from_vector(std::vector<double>{t});
  world.all_reduce(v, dist::ReduceOp::max);
  return v.item<double>();
}

std::string size_str(int64_t bytes) {
  if (bytes >= (1 << 20)) return fmt::format("{} MB", bytes >> 20);
  if (bytes >= (1 << 10)) return fmt::format("{} KB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

void print_row(bool root, const std::string& op, int64_t bytes, double t_op, double t_raw, double bus_factor) {
  if (!root) return;
  const double gbs = bytes / t_op / 1e9;
  fmt::print("| {:<18} | {:>6} | {:>10.1f} | {:>10.1f} | {:>9.2f} | {:>9.2f} | {:>6.2f}x |\n", op, size_str(bytes),
             t_op * 1e6, t_raw * 1e6, gbs, gbs * bus_factor, t_op / t_raw);
}

#if GS_HAVE_MPI
// The raw MPI baselines, on the communicator's own buffers.
double raw_allreduce(dist::Communicator& world, Tensor& buf, int repeats) {
  return timed(world, [&] { MPI_Allreduce(MPI_IN_PLACE, buf.raw_data(), int(buf.numel()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }, repeats);
}
double raw_allgather(dist::Communicator& world, const Tensor& send, Tensor& recv, int repeats) {
  return timed(world, [&] {
    MPI_Allgather(send.raw_data(), int(send.numel()), MPI_FLOAT, recv.raw_data(), int(send.numel()), MPI_FLOAT, MPI_COMM_WORLD);
  }, repeats);
}
double raw_alltoall(dist::Communicator& world, const Tensor& send, Tensor& recv, int n, int repeats) {
  return timed(world, [&] {
    MPI_Alltoall(send.raw_data(), int(send.numel() / n), MPI_FLOAT, recv.raw_data(), int(send.numel() / n), MPI_FLOAT,
                 MPI_COMM_WORLD);
  }, repeats);
}
#endif

void bench_collectives(dist::Communicator& world, const dist::CommPtr& comm, bool quick) {
  const bool root = world.rank() == 0;
  const int n = world.size();
  const double nn = n;
  if (root) {
    fmt::print("| {:<18} | {:>6} | {:>10} | {:>10} | {:>9} | {:>9} | {:>7} |\n", "op (f32)", "bytes", "op us",
               "raw MPI us", "alg GB/s", "bus GB/s", "op/raw");
    fmt::print("|--------------------|--------|------------|------------|-----------|-----------|---------|\n");
  }
  const int64_t max_bytes = quick ? (64 << 10) : (64 << 20);
  for (int64_t bytes = 1 << 10; bytes <= max_bytes; bytes *= 4) {
    const int repeats = bytes >= (16 << 20) ? 3 : bytes >= (1 << 20) ? 5 : 15;
    const int64_t elems = bytes / 4;
    const int64_t rows = std::max<int64_t>(n, (elems / 64) / n * n);  // divisible by n, 64 floats a row
    Tensor x = randn({rows, 64}, {5, 1}, DType::f32);
    const int64_t b = x.numel() * 4;
    NoGradGuard ng;
    double t_red = timed(world, [&] { dist::reduce_replicated(x, comm); }, repeats);
    double t_raw = t_red;
#if GS_HAVE_MPI
    Tensor buf = contiguous_copy(x, true);
    t_raw = raw_allreduce(world, buf, repeats);
#endif
    print_row(root, "reduce_replicated", b, t_red, t_raw, 2 * (nn - 1) / nn);
    // gather_along: each rank holds rows / n rows; the result is the whole.
    Tensor part = contiguous(narrow(x, 0, 0, rows / n));
    double t_gat = timed(world, [&] { dist::gather_along(part, 0, rows, comm); }, repeats);
    double t_graw = t_gat;
#if GS_HAVE_MPI
    Tensor recv = empty({rows, 64}, DType::f32);
    t_graw = raw_allgather(world, part, recv, repeats);
#endif
    print_row(root, "gather_along", b, t_gat, t_graw, (nn - 1) / nn);
    // transpose: (rows/n, 64) split along dim 0 -> split along dim 1; the whole moves once.
    Tensor tile = contiguous(narrow(x, 0, 0, rows / n));
    double t_tr = timed(world, [&] { dist::transpose(tile, 0, 1, rows, comm); }, repeats);
    double t_traw = t_tr;
#if GS_HAVE_MPI
    Tensor recv2 = empty({tile.numel()}, DType::f32);
    t_traw = raw_alltoall(world, tile, recv2, n, repeats);
#endif
    print_row(root, "transpose", tile.numel() * 4, t_tr, t_traw, (nn - 1) / nn);
  }
}

// Backward of a chain of linear layers, with and without the reducer (one bucket of 25 MB or
// many small ones): the reducer's cost on top of backward, and how much it launched before
// backward ended.
void bench_reducer(dist::Communicator& world, bool quick) {
  const bool root = world.rank() == 0;
  const int64_t width = quick ? 64 : 512, layers = 8, batch = quick ? 8 : 256;
  std::vector<Tensor> ws;
  for (int64_t k = 0; k < layers; ++k)
    ws.push_back(mul(randn({width, width}, {6, uint64_t(k)}, DType::f32), 1.0 / std::sqrt(double(width))).detach().set_requires_grad());
  Tensor x = randn({batch, width}, {7, uint64_t(world.rank())}, DType::f32);
  auto loss = [&] {
    Tensor h = x;
    for (auto& w : ws) h = tanh(matmul(h, w));
    return sum(mul(h, h));
  };
  auto zero = [&] {
    for (auto& w : ws) w.set_grad(Tensor());
  };
  auto grid = dist::ProcessGrid::create(dist::world_communicator(), {1, 1, world.size()});
  std::vector<dist::ReducedParameter> params;
  for (int64_t k = 0; k < layers; ++k) params.push_back({fmt::format("w{}", k), ws[k], dist::Distribution::replicated()});
  const int repeats = quick ? 3 : 7;
  double plain = timed(world, [&] { zero(); loss().backward(); }, repeats);
  struct Run {
    const char* label;
    dist::ReducerMode mode;
    size_t bucket_bytes;
  };
  const Run runs[] = {{"hook reducer, one 25 MB bucket", dist::ReducerMode::hooks, 25u << 20},
                      {"tape reducer, one 25 MB bucket", dist::ReducerMode::tape, 25u << 20},
                      {"hook reducer, a bucket per layer", dist::ReducerMode::hooks, size_t(width * width * 4)},
                      {"tape reducer, a bucket per layer", dist::ReducerMode::tape, size_t(width * width * 4)}};
  if (root) {
    const double mb = layers * width * width * 4 / 1e6;
    fmt::print("\nreducer: forward + backward of {} tanh(x W) layers, W {}x{} f32 ({:.1f} MB of gradients), batch {}\n",
               layers, width, width, mb, batch);
    fmt::print("| {:<34} | {:>10} | {:>10} | {:>22} |\n", "run", "ms / step", "vs plain", "buckets in backward");
    fmt::print("|------------------------------------|------------|------------|------------------------|\n");
    fmt::print("| {:<34} | {:>10.2f} | {:>10} | {:>22} |\n", "no reducer", plain * 1e3, "1.00x", "-");
  }
  for (const Run& run : runs) {
    dist::GradientReducer reducer(grid, params, {.bucket_bytes = run.bucket_bytes, .mode = run.mode});
    const double t = timed(world, [&] {
      zero();
      dist::ReducedForward scope = reducer.forward_scope();  // inert for the hook reducer
      Tensor l = loss();
      (reducer.loss_scale() == 1.0 ? l : mul(l, reducer.loss_scale())).backward();
    }, repeats);
    const auto& st = reducer.stats();
    if (root)
      fmt::print("| {:<34} | {:>10.2f} | {:>9.2f}x | {:>10} of {:<11} |\n", run.label, t * 1e3, t / plain,
                 st.launched_in_backward, st.buckets_launched);
  }
}

}  // namespace

int bench_comm(const BenchOptions& opt) {
  auto world = dist::world_communicator();
  if (world->rank() == 0)
    fmt::print("gradsphere bench comm  ({} ranks{})\n\n", world->size(),
               GS_HAVE_MPI ? ", MPI" : ", single process: no MPI in this build");
  bench_collectives(*world, world, opt.quick);
  bench_reducer(*world, opt.quick);
  return 0;
}

}  // namespace gs::tools
