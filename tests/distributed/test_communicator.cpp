// The communicators: every operation, every dtype, uneven counts, every group of every grid;
// non-blocking forms; the errors for bad arguments; the version counter and read-only tensors.
// With a GPU, the same checks on GPU tensors: through the host communicators (staged) and through
// NCCL (at one rank per group; over the world when every rank has its own GPU).
#include <doctest/doctest.h>

#include <complex>
#include <cstdlib>
#include <functional>

#include "distributed/communicator.h"
#include "distributed/nccl_communicator.h"
#include "distributed/process_grid.h"
#include "engine/cuda_runtime.h"
#include "engine/factory.h"
#include "ops/view.h"
#include "tests/distributed/dist_test_util.h"
#include "tests/test_util.h"

using namespace gs;
using namespace gs::dist;

namespace {

// A value that names (rank, index), exactly representable in every dtype.
double tag(int rank, int64_t i) { return 100.0 * rank + static_cast<double>(i); }

Tensor tagged(int rank, int64_t n, DType dt, Device dev = Device::cpu()) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = tag(rank, i);
  Tensor t = cast_copy(from_vector(v), dt);
  if (is_complex(dt)) {
    // imaginary part -tag, so a mix-up of real and imaginary parts shows
    std::vector<c128> z(n);
    for (int64_t i = 0; i < n; ++i) z[i] = {tag(rank, i), -tag(rank, i)};
    t = cast_copy(from_vector(z), dt);
  }
  return to_device_copy(t, dev);
}

std::vector<c128> as_c128(const Tensor& t) { return cast_copy(t, DType::c128).to_vector<c128>(); }

const DType kDtypes[] = {DType::f32, DType::f64, DType::c64, DType::c128, DType::i64};
const Group kGroups[] = {Group::world,  Group::data,   Group::h,        Group::w,       Group::spatial,
                         Group::data_w, Group::data_h, Group::ensemble, Group::replicas};

}  // namespace

TEST_CASE("grid specs: parsing, every grid of a size, and the world-size check") {
  CHECK(parse_grid("2x1x2") == GridSpec{2, 1, 2});
  CHECK(parse_grid("3x2x1x2") == GridSpec{2, 1, 2, 3});
  CHECK(parse_grid("1x2x1x2") == GridSpec{2, 1, 2});
  CHECK(GridSpec{2, 1, 2, 3}.str() == "3x2x1x2");
  CHECK(GridSpec{2, 1, 2, 1}.str() == "2x1x2");
  for (const char* bad : {"2x2", "0x1x1", "1x2x2 ", "1x1x1x1x1", "2xx1x1", "x1x1", "1x1x1x", "-1x1x1", "1x1x1x0"})
    CHECK(gs_test::contains(gs_test::error_of([&] { parse_grid(bad); }),
                            fmt::format("expected DATAxHxW or ENSEMBLExDATAxHxW with positive integers (e.g. 1x2x2, or "
                                        "2x1x2x2 for two ensemble ranks), got '{}'",
                                        bad)));
  CHECK(all_grids(4).size() == 6);
  CHECK(all_grids(3).size() == 3);
  CHECK(all_grids(4, true).size() == 10);  // + 2x(1x1x2, 1x2x1, 2x1x1) and 4x1x1x1
  CHECK(all_grids(3, true).size() == 4);
  CHECK(all_grids(4, true).back() == GridSpec{1, 1, 1, 4});
  auto world = world_communicator();
  const int n = world->size();
  std::string err = gs_test::error_of([&] { ProcessGrid::create(world, {n + 1, 1, 1}); });
  CHECK(gs_test::contains(err, fmt::format("needs {} ranks, but the job has {}", n + 1, n)));
  // The ensemble axis: rank = ((e * D + d) * H + i) * W + j.
  const ProcessGrid g(2, 1, 2, 7, 2);  // ensemble 2 x data 2 x h 1 x w 2, rank 7
  CHECK(g.ensemble_rank() == 1);
  CHECK(g.data_rank() == 1);
  CHECK(g.w_rank() == 1);
  CHECK(g.group_rank(Group::replicas) == 3);
  CHECK(g.in_my_group(3, Group::ensemble));   // e 0, d 1, j 1
  CHECK_FALSE(g.in_my_group(5, Group::ensemble));  // e 1, d 0
  CHECK(g.in_my_group(5, Group::data));
  CHECK(g.str() == "ensemble 2 x data 2 x h 1 x w 2, rank 7");
}

TEST_CASE("group sizes, ranks and membership agree with the communicators") {
  gs::test::for_each_grid(
      [](const ProcessGrid& grid) {
    for (Group g : kGroups) {
      CAPTURE(group_name(g));
      CHECK(grid.comm(g)->size() == grid.group_size(g));
      CHECK(grid.comm(g)->rank() == grid.group_rank(g));
      int members = 0;
      for (int64_t q = 0; q < grid.world_size(); ++q) members += grid.in_my_group(q, g);
      CHECK(members == grid.group_size(g));
      // The world ranks of the group, gathered through it, are exactly the members.
      Tensor recv = empty({grid.group_size(g)}, DType::i64);
      grid.comm(g)->all_gather(from_vector(std::vector<int64_t>{grid.world_rank()}), recv,
                               std::vector<int64_t>(grid.group_size(g), 1));
      for (int64_t q : recv.to_vector<int64_t>()) CHECK(grid.in_my_group(q, g));
    }
      },
      /*with_ensemble=*/true);
}

namespace {

// sum / max / min in every dtype, on tensors on `dev`.
void check_all_reduce(Communicator& comm, Device dev) {
  const int n = comm.size();
  for (DType dt : kDtypes) {
    CAPTURE(dtype_name(dt));
    Tensor t = tagged(comm.rank(), 5, dt, dev);
    const uint64_t v0 = t.version();
    comm.all_reduce(t, ReduceOp::sum);
    CHECK(t.version() == v0 + 1);
    auto got = as_c128(t);
    for (int64_t i = 0; i < 5; ++i) {
      double want = 0;
      for (int r = 0; r < n; ++r) want += tag(r, i);
      CHECK(got[i].real() == want);
      if (is_complex(dt)) CHECK(got[i].imag() == -want);
    }
    if (is_complex(dt)) {
      CHECK(gs_test::contains(gs_test::error_of([&] { comm.all_reduce(t, ReduceOp::max); }), "not defined for"));
      continue;
    }
    Tensor mx = tagged(comm.rank(), 5, dt, dev), mn = tagged(comm.rank(), 5, dt, dev);
    comm.all_reduce(mx, ReduceOp::max);
    comm.all_reduce(mn, ReduceOp::min);
    for (int64_t i = 0; i < 5; ++i) {
      CHECK(as_c128(mx)[i].real() == tag(n - 1, i));
      CHECK(as_c128(mn)[i].real() == tag(0, i));
    }
  }
  // bool: max is 'any', min is 'all'
  Tensor b = to_device_copy(from_vector(std::vector<bool>{comm.rank() == 0, true}), dev);
  Tensor b2 = to_device_copy(from_vector(std::vector<bool>{comm.rank() == 0, true}), dev);
  comm.all_reduce(b, ReduceOp::max);
  comm.all_reduce(b2, ReduceOp::min);
  CHECK(b.to_vector<bool>() == std::vector<bool>{true, true});
  CHECK(b2.to_vector<bool>() == std::vector<bool>{n == 1, true});
}

// all_gather, reduce_scatter and all_to_all with uneven counts (including empty ones), on `dev`.
void check_uneven_collectives(Communicator& comm, Device dev) {
  const int n = comm.size(), me = comm.rank();
  for (DType dt : kDtypes) {
    CAPTURE(dtype_name(dt));
    // rank r holds r % 3 + (r == 1 ? 0 : 1) elements: uneven, and rank 1 holds none
    auto count = [](int r) -> int64_t { return r == 1 ? 0 : r % 3 + 1; };
    std::vector<int64_t> counts(n);
    int64_t total = 0;
    for (int r = 0; r < n; ++r) total += counts[r] = count(r);
    Tensor recv = empty({total}, dt, dev);
    comm.all_gather(tagged(me, count(me), dt, dev), recv, counts);
    auto got = as_c128(recv);
    int64_t k = 0;
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < count(r); ++i, ++k) CHECK(got[k].real() == tag(r, i));

    // reduce_scatter: every rank sends 0..total-1 tagged by rank; rank r keeps its slice of the sum
    Tensor rs = empty({count(me)}, dt, dev);
    comm.reduce_scatter(tagged(me, total, dt, dev), rs, counts, ReduceOp::sum);
    int64_t off = 0;
    for (int r = 0; r < me; ++r) off += count(r);
    auto rs_v = as_c128(rs);
    for (int64_t i = 0; i < count(me); ++i) {
      double want = 0;
      for (int r = 0; r < n; ++r) want += tag(r, off + i);
      CHECK(rs_v[i].real() == want);
    }

    // all_to_all: rank s sends (s + d) % 3 elements to rank d, valued 1000 * d + tag(s, i)
    auto a2a = [](int s, int d) -> int64_t { return (s + d) % 3; };
    std::vector<int64_t> sc(n), rc(n);
    std::vector<double> send_v;
    for (int d = 0; d < n; ++d) {
      sc[d] = a2a(me, d);
      rc[d] = a2a(d, me);
      for (int64_t i = 0; i < sc[d]; ++i) send_v.push_back(1000.0 * d + tag(me, i));
    }
    int64_t rtotal = 0;
    for (auto c : rc) rtotal += c;
    Tensor a_recv = empty({rtotal}, dt, dev);
    comm.all_to_all(to_device_copy(cast_copy(from_vector(send_v, {static_cast<int64_t>(send_v.size())}), dt), dev), sc, a_recv, rc);
    auto av = as_c128(a_recv);
    k = 0;
    for (int s = 0; s < n; ++s)
      for (int64_t i = 0; i < rc[s]; ++i, ++k) CHECK(av[k].real() == 1000.0 * me + tag(s, i));
  }
}

// broadcast, non-blocking forms, point-to-point exchange and barrier, on `dev`.
void check_broadcast_async_exchange(Communicator& comm, Device dev) {
  const int n = comm.size(), me = comm.rank();
  const int root = n - 1;
  Tensor t = tagged(me, 4, DType::c128, dev);
  comm.broadcast(t, root);
  CHECK(as_c128(t)[3] == c128(tag(root, 3), -tag(root, 3)));

  // Two all-reduces in flight at once, waited for in reverse order.
  Tensor a = full({3}, 1.0, DType::f64, dev), b = full({2}, 2.0, DType::f32, dev);
  auto wa = comm.all_reduce_async(a, ReduceOp::sum);
  auto wb = comm.all_reduce_async(b, ReduceOp::sum);
  wb->wait();
  wa->wait();
  CHECK(a.to_vector<double>() == std::vector<double>(3, double(n)));
  CHECK(b.to_vector<float>() == std::vector<float>(2, 2.0f * n));
  CHECK(wa->test());

  // A ring: send my tag to the next rank, receive from the previous one.
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  Tensor to_next = tagged(me, 3, DType::f64, dev), from_prev = empty({3}, DType::f64, dev);
  Tensor to_prev = tagged(me, 2, DType::i64, dev), from_next = empty({2}, DType::i64, dev);
  if (n == 1) {
    comm.exchange({{0, to_next, from_prev}});
  } else if (n == 2) {
    comm.exchange({{next, to_next, from_prev}});
  } else {
    comm.exchange({{next, to_next, Tensor()}, {prev, Tensor(), from_prev}});
    comm.exchange({{prev, to_prev, Tensor()}, {next, Tensor(), from_next}}, 1);
    CHECK(from_next.to_vector<int64_t>()[1] == static_cast<int64_t>(tag(next, 1)));
  }
  CHECK(from_prev.to_vector<double>()[2] == tag(prev, 2));
  comm.barrier();
}

// bf16 storage moves bit for bit (16-bit words over MPI, byte pairs over NCCL) and is not reduced.
uint16_t bf16_tag(int rank, int64_t i) { return static_cast<uint16_t>(0x4000 + 64 * rank + i); }
Tensor bf16_tagged(int rank, int64_t n, Device dev) {
  std::vector<bfloat16> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = bfloat16::from_bits(bf16_tag(rank, i));
  return to_device_copy(from_vector(v, {n}), dev);
}
std::vector<uint16_t> bf16_bits_of(const Tensor& t) {
  const Tensor c = to_device_copy(t, Device::cpu());
  std::vector<uint16_t> out;
  for (int64_t i = 0; i < c.numel(); ++i) out.push_back(c.data<bfloat16>()[i].bits);
  return out;
}

void check_bf16_moves(Communicator& comm, Device dev) {
  const int n = comm.size(), me = comm.rank();
  Tensor t = bf16_tagged(me, 3, dev);
  comm.broadcast(t, n - 1);
  CHECK(bf16_bits_of(t) == std::vector<uint16_t>{bf16_tag(n - 1, 0), bf16_tag(n - 1, 1), bf16_tag(n - 1, 2)});
  std::vector<int64_t> counts(n);
  int64_t total = 0;
  for (int r = 0; r < n; ++r) total += counts[r] = r % 2 + 1;
  Tensor all = empty({total}, DType::bf16, dev);
  comm.all_gather(bf16_tagged(me, counts[me], dev), all, counts);
  std::vector<uint16_t> want;
  for (int r = 0; r < n; ++r)
    for (int64_t i = 0; i < counts[r]; ++i) want.push_back(bf16_tag(r, i));
  CHECK(bf16_bits_of(all) == want);
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  Tensor from_prev = empty({2}, DType::bf16, dev);
  if (n <= 2) comm.exchange({{next, bf16_tagged(me, 2, dev), from_prev}});
  else comm.exchange({{next, bf16_tagged(me, 2, dev), Tensor()}, {prev, Tensor(), from_prev}});
  CHECK(bf16_bits_of(from_prev) == std::vector<uint16_t>{bf16_tag(prev, 0), bf16_tag(prev, 1)});
  const std::string msg = gs_test::error_of([&] { comm.all_reduce(t, ReduceOp::sum); });
  CHECK(gs_test::contains(msg, "bf16 is a storage dtype and is not reduced; cast to f32"));
}

// Every group of every grid of the world.
void for_each_group(const std::function<void(Communicator&)>& body) {
  gs::test::for_each_grid([&](const ProcessGrid& grid) {
    for (Group g : kGroups) {
      CAPTURE(group_name(g));
      body(*grid.comm(g));
    }
  });
}

}  // namespace

TEST_CASE("all_reduce sum / max / min in every dtype over every group") {
  for_each_group([](Communicator& comm) { check_all_reduce(comm, Device::cpu()); });
}

TEST_CASE("all_gather, reduce_scatter and all_to_all with uneven counts (including empty ones)") {
  for_each_group([](Communicator& comm) { check_uneven_collectives(comm, Device::cpu()); });
}

TEST_CASE("broadcast, non-blocking forms, point-to-point exchange and barrier; bf16 moves bit for bit") {
  for_each_group([](Communicator& comm) {
    check_broadcast_async_exchange(comm, Device::cpu());
    check_bf16_moves(comm, Device::cpu());
  });
}

TEST_CASE("communicator errors say what was expected and what was received") {
  auto world = world_communicator();
  auto& comm = *world;
  const int n = comm.size();
  std::vector<int64_t> ones(n, 1);
  CHECK(gs_test::contains(gs_test::error_of([&] { comm.all_gather(full({2}, 1.0, DType::f64), empty({n}, DType::f64), ones); }),
                       "this rank sends 2 elements but counts[" + std::to_string(comm.rank()) + "] is 1"));
  CHECK(gs_test::contains(gs_test::error_of([&] { comm.all_gather(full({1}, 1.0, DType::f64), empty({n}, DType::f32), ones); }),
                       "both must have one dtype"));
  CHECK(gs_test::contains(gs_test::error_of([&] { comm.all_gather(full({1}, 1.0), empty({n}), {1}); }),
                       n == 1 ? "" : "expected " + std::to_string(n) + " counts"));
  Tensor tr = full({2, 3}, 1.0, DType::f64);
  CHECK(gs_test::contains(gs_test::error_of([&] { comm.all_reduce(transpose(tr, 0, 1), ReduceOp::sum); }), "must be contiguous"));
  CHECK(gs_test::contains(gs_test::error_of([&] { comm.broadcast(tr, n); }), "is not a rank of the group"));
  CHECK(gs_test::contains(gs_test::error_of([&] { comm.all_reduce(from_vector(std::vector<bool>{true}), ReduceOp::sum); }),
                       "sum is not defined for bool"));
  // A read-only tensor (a cached constant table) is never written by a collective.
  Tensor table = full({4}, 1.0, DType::f64);
  table.storage()->set_read_only("the Legendre table cache");
  CHECK(gs_test::contains(gs_test::error_of([&] { comm.all_reduce(table, ReduceOp::sum); }), "Legendre table cache"));
  if (n > 1 && comm.rank() != 0)
    CHECK(gs_test::contains(gs_test::error_of([&] { comm.broadcast(table, 0); }), "Legendre table cache"));
  CHECK(gs_test::contains(gs_test::error_of([&] { comm.set_timeout(std::chrono::duration<double>(0)); }),
                       "expected a positive timeout"));
}

// ---- GPU tensors

namespace {

void check_every_operation(Communicator& comm, Device dev) {
  CAPTURE(dev.str());
  check_all_reduce(comm, dev);
  check_uneven_collectives(comm, dev);
  check_broadcast_async_exchange(comm, dev);
  check_bf16_moves(comm, dev);
}

// Whether this rank can run the GPU cases; says why not once.
bool gpu_cases_run() {
  if (cuda::device_count() > 0) return true;
  MESSAGE("GPU cases skipped: " << cuda::unavailable_reason());
  return false;
}

}  // namespace

TEST_CASE("GPU tensors through the host communicators (MPI or one process): every operation on every group") {
  if (!gpu_cases_run()) return;
  const Device dev = local_rank_device();
  for_each_group([&](Communicator& comm) { check_every_operation(comm, dev); });
  // A tensor's results arrive in place, counted once, and a read-only one is refused as on the CPU.
  auto world = world_communicator();
  Tensor t = full({3}, 2.0, DType::f64, dev);
  const uint64_t v0 = t.version();
  world->all_reduce(t, ReduceOp::sum);
  CHECK(t.version() == v0 + 1);
  CHECK(t.to_vector<double>() == std::vector<double>(3, 2.0 * world->size()));
  t.storage()->set_read_only("a cached device table");
  CHECK(gs_test::contains(gs_test::error_of([&] { world->all_reduce(t, ReduceOp::sum); }), "a cached device table"));
  CHECK(gs_test::contains(gs_test::error_of([&] {
                            world->all_gather(full({1}, 1.0, DType::f64, dev), empty({world->size()}, DType::f64),
                                              std::vector<int64_t>(world->size(), 1));
                          }),
                          "both must be on one device"));
}

TEST_CASE("the NCCL communicator: every operation at one rank, and over the world with one GPU per rank") {
  if (!gpu_cases_run()) return;
  if (!built_with_nccl()) {
    MESSAGE("NCCL cases skipped: " << nccl_version());
    return;
  }
  auto world = world_communicator();
  const Device dev = local_rank_device();
  // A group of one rank works also where the ranks share one GPU.
  CommPtr self = nccl_communicator(world->split(world->rank(), 0, "self"), dev);
  REQUIRE(self->size() == 1);
  CHECK(self->accepts(dev));
  CHECK_FALSE(self->accepts(Device::cpu()));
  check_every_operation(*self, dev);
  check_every_operation(*self, Device::cpu());  // CPU tensors staged through the GPU
  // The same answer on every rank (gathered device UUIDs), so every rank takes the same branch.
  const auto [a, b] = ranks_sharing_a_gpu(*world, dev);
  if (a < 0) {
    CommPtr nccl_world = nccl_communicator(world, dev);
    for (const GridSpec& spec : all_grids(world->size())) {
      CAPTURE(spec.str());
      ProcessGrid grid = ProcessGrid::create(nccl_world, spec);
      for (Group g : kGroups) {
        CAPTURE(group_name(g));
        check_every_operation(*grid.comm(g), dev);
      }
    }
  } else {
    // NCCL cannot run two ranks of one group on one GPU: every rank refuses, none hangs.
    CHECK(gs_test::contains(gs_test::error_of([&] { nccl_communicator(world, dev); }), "use the same GPU"));
    MESSAGE("NCCL over the world skipped: ranks " << a << " and " << b << " share a GPU");
  }
}

TEST_CASE("the NCCL communicator refuses what it cannot do, saying why") {
  auto world = world_communicator();
  CHECK(gs_test::contains(gs_test::error_of([&] { nccl_communicator(world, Device::cpu()); }),
                          built_with_nccl() ? "expected a cuda device, got cpu" : "built without NCCL"));
  CHECK(gs_test::contains(gs_test::error_of([&] { nccl_communicator(nullptr, Device::cuda(0)); }),
                          built_with_nccl() ? "expected a bootstrap communicator" : "built without NCCL"));
  // GS_COMM names the GPU job's communicator; a typo is refused before any GPU or collective is touched.
  setenv("GS_COMM", "nccll", 1);
  const std::string bad_choice = gs_test::error_of([] { gpu_world_communicator(Device::cuda(0)); });
  unsetenv("GS_COMM");
  CHECK(gs_test::contains(bad_choice, "GS_COMM: expected auto, nccl or mpi, got 'nccll'"));
  if (world->size() == 1) {  // one process needs no communicator between GPUs, whatever GS_COMM says
    setenv("GS_COMM", "nccl", 1);
    const GpuWorld one = gpu_world_communicator(Device::cuda(0));
    unsetenv("GS_COMM");
    CHECK(one.comm == world);
    CHECK(one.how == "one process");
  }
  const std::string version = nccl_version();
  const bool loads = version.rfind("2.", 0) == 0;
  CHECK((loads || gs_test::contains(version, "could not be loaded") || gs_test::contains(version, "without NCCL")));
  if (cuda::device_count() == 0) {
    const std::string e = gs_test::error_of([&] { nccl_communicator(world, Device::cuda(0)); });
    CHECK((gs_test::contains(e, "cuda:0 is not available") || !loads));
    CHECK(gs_test::contains(gs_test::error_of([] { local_rank_device(); }), "needs a GPU, but none is usable"));
  }
}
