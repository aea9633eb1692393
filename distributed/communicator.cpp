#include "distributed/communicator.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <numeric>

#include "engine/error.h"
#include "engine/storage.h"

namespace gs::dist {
namespace {

std::atomic<int> g_check_replicas{-1};  // -1: not read from the environment yet

double timeout_from_env() {
  const char* v = std::getenv("GS_COMM_TIMEOUT");
  if (!v || !*v) return 600.0;
  char* end = nullptr;
  double s = std::strtod(v, &end);
  GS_CHECK(end && *end == '\0' && s > 0, "GS_COMM_TIMEOUT: expected a positive number of seconds, got '{}'", v);
  return s;
}

int64_t total(const std::vector<int64_t>& counts) { return std::accumulate(counts.begin(), counts.end(), int64_t{0}); }

}  // namespace

void Work::complete_unwaited(bool done) noexcept {
  if (done || std::uncaught_exceptions()) return;
  try {
    wait();
  } catch (...) {
  }
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
  }
  return "?";
}

bool check_replicas_enabled() {
  int v = g_check_replicas.load();
  if (v < 0) {
    const char* e = std::getenv("GS_CHECK_REPLICAS");
    v = (e && std::strcmp(e, "1") == 0) ? 1 : 0;
    g_check_replicas.store(v);
  }
  return v == 1;
}
void set_check_replicas(bool on) { g_check_replicas.store(on ? 1 : 0); }

Communicator::Communicator(std::string name) : timeout_(timeout_from_env()), name_(std::move(name)) {}

std::string Communicator::describe() const {
  return fmt::format("group '{}' (rank {} of {}, world rank {})", name_, rank(), size(), world_rank());
}

void Communicator::set_timeout(std::chrono::duration<double> t) {
  GS_CHECK(t.count() > 0, "Communicator::set_timeout: expected a positive timeout, got {} s", t.count());
  timeout_ = t;
}

Communicator::Call Communicator::begin(std::string what, std::string key) {
  Call c{std::move(what), calls_++, std::move(key)};
  if (c.key.empty()) c.key = c.what;
  if (check_replicas_enabled() && size() > 1) check_same_call(c);
  return c;
}

namespace {

// The checks every operation shares: a defined, contiguous tensor of a communicable dtype (on any
// device: one the backend does not accept is staged).
void check_buffer(const Tensor& t, const char* op, const char* role, const Communicator& comm) {
  GS_CHECK(t.defined(), "{} on {}: the {} tensor is undefined", op, comm.describe(), role);
  GS_CHECK(t.is_contiguous(), "{} on {}: the {} tensor ({}) must be contiguous", op, comm.describe(), role,
           t.meta_str());
}

void check_counts(const std::vector<int64_t>& counts, const char* op, const char* what, const Communicator& comm) {
  GS_CHECK(static_cast<int>(counts.size()) == comm.size(), "{} on {}: expected {} {} (one per rank), got {}", op,
           comm.describe(), comm.size(), what, counts.size());
  for (size_t r = 0; r < counts.size(); ++r)
    GS_CHECK(counts[r] >= 0, "{} on {}: {}[{}] is {}; counts must be >= 0", op, comm.describe(), what, r, counts[r]);
}

void check_reduce(DType d, ReduceOp op, const char* name, const Communicator& comm) {
  // A bf16 sum would round every partial sum to 8 bits, and max/min would be the only exact ones:
  // reductions run on the compute dtype, which the caller casts to (moving bf16 is fine).
  GS_CHECK(!is_storage_only(d),
           "{} on {}: {} is a storage dtype and is not reduced; cast to f32 (to(t, DType::f32)) and reduce that",
           name, comm.describe(), dtype_name(d));
  if (is_complex(d))
    GS_CHECK(op == ReduceOp::sum, "{} on {}: {} is not defined for {} tensors (complex numbers are not ordered)",
             name, comm.describe(), reduce_op_name(op), dtype_name(d));
  if (d == DType::b8)
    GS_CHECK(op != ReduceOp::sum, "{} on {}: sum is not defined for bool tensors (use max for 'any', min for 'all')",
             name, comm.describe());
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op, const Communicator& comm) {
  GS_CHECK(a.dtype() == b.dtype(), "{} on {}: send is {} but recv is {}; both must have one dtype", op,
           comm.describe(), a.meta_str(), b.meta_str());
  GS_CHECK(a.device() == b.device(), "{} on {}: send is on {} but recv is on {}; both must be on one device", op,
           comm.describe(), a.device(), b.device());
}

// A started operation on staged copies: when it completes, the staged results are copied back into
// the caller's tensors (which the operation already counted as written).
class StagedWork : public Work {
 public:
  struct CopyBack {
    Tensor dst, staged;
  };
  StagedWork(WorkHandle inner, std::vector<CopyBack> back) : inner_(std::move(inner)), back_(std::move(back)) {}
  ~StagedWork() override { complete_unwaited(finished_); }
  void wait() override {
    inner_->wait();
    finish();
  }
  bool test() override {
    if (!finished_ && inner_->test()) finish();
    return finished_;
  }

 private:
  void finish() {
    if (finished_) return;
    for (const auto& b : back_)
      copy_bytes(b.dst.raw_data(), b.dst.device(), b.staged.raw_data(), b.staged.device(),
                 b.dst.numel() * dtype_size(b.dst.dtype()));
    finished_ = true;  // only once the results arrived: a failed copy fails the next wait() again
  }
  WorkHandle inner_;
  std::vector<CopyBack> back_;
  bool finished_ = false;
};

}  // namespace

WorkHandle Communicator::all_reduce_async(const Tensor& t, ReduceOp op) {
  check_buffer(t, "all_reduce", "reduced", *this);
  check_reduce(t.dtype(), op, "all_reduce", *this);
  check_writable(t, "all_reduce");
  if (!accepts(t.device())) {
    Tensor s = to_device_copy(t, staging_device());
    auto w = all_reduce_async(s, op);
    bump_version(t);
    return staged(std::move(w), {{t, s}});
  }
  auto c = begin(fmt::format("all_reduce({}) {} x {}", reduce_op_name(op), dtype_name(t.dtype()), t.numel()));
  auto w = start_all_reduce(c, t, op);
  bump_version(t);
  return w;
}

WorkHandle Communicator::all_gather_async(const Tensor& send, const Tensor& recv, const std::vector<int64_t>& counts) {
  check_buffer(send, "all_gather", "send", *this);
  check_buffer(recv, "all_gather", "recv", *this);
  check_same_dtype(send, recv, "all_gather", *this);
  check_counts(counts, "all_gather", "counts", *this);
  GS_CHECK(send.numel() == counts[rank()], "all_gather on {}: this rank sends {} elements but counts[{}] is {}",
           describe(), send.numel(), rank(), counts[rank()]);
  GS_CHECK(recv.numel() == total(counts), "all_gather on {}: recv holds {} elements but the counts add up to {}",
           describe(), recv.numel(), total(counts));
  check_writable(recv, "all_gather");
  if (!accepts(send.device())) {
    Tensor s = to_device_copy(send, staging_device()), r = empty(recv.sizes(), recv.dtype(), staging_device());
    auto w = all_gather_async(s, r, counts);
    bump_version(recv);
    return staged(std::move(w), {{recv, r}});
  }
  auto c = begin(fmt::format("all_gather {} x {}", dtype_name(send.dtype()), total(counts)));
  auto w = start_all_gather(c, send, recv, counts);
  bump_version(recv);
  return w;
}

WorkHandle Communicator::reduce_scatter_async(const Tensor& send, const Tensor& recv,
                                              const std::vector<int64_t>& counts, ReduceOp op) {
  check_buffer(send, "reduce_scatter", "send", *this);
  check_buffer(recv, "reduce_scatter", "recv", *this);
  check_same_dtype(send, recv, "reduce_scatter", *this);
  check_reduce(send.dtype(), op, "reduce_scatter", *this);
  check_counts(counts, "reduce_scatter", "counts", *this);
  GS_CHECK(send.numel() == total(counts), "reduce_scatter on {}: send holds {} elements but the counts add up to {}",
           describe(), send.numel(), total(counts));
  GS_CHECK(recv.numel() == counts[rank()], "reduce_scatter on {}: recv holds {} elements but counts[{}] is {}",
           describe(), recv.numel(), rank(), counts[rank()]);
  check_writable(recv, "reduce_scatter");
  if (!accepts(send.device())) {
    Tensor s = to_device_copy(send, staging_device()), r = empty(recv.sizes(), recv.dtype(), staging_device());
    auto w = reduce_scatter_async(s, r, counts, op);
    bump_version(recv);
    return staged(std::move(w), {{recv, r}});
  }
  auto c = begin(fmt::format("reduce_scatter({}) {} x {}", reduce_op_name(op), dtype_name(send.dtype()), total(counts)));
  auto w = start_reduce_scatter(c, send, recv, counts, op);
  bump_version(recv);
  return w;
}

WorkHandle Communicator::all_to_all_async(const Tensor& send, const std::vector<int64_t>& send_counts,
                                          const Tensor& recv, const std::vector<int64_t>& recv_counts) {
  check_buffer(send, "all_to_all", "send", *this);
  check_buffer(recv, "all_to_all", "recv", *this);
  check_same_dtype(send, recv, "all_to_all", *this);
  check_counts(send_counts, "all_to_all", "send_counts", *this);
  check_counts(recv_counts, "all_to_all", "recv_counts", *this);
  GS_CHECK(send.numel() == total(send_counts),
           "all_to_all on {}: send holds {} elements but send_counts add up to {}", describe(), send.numel(),
           total(send_counts));
  GS_CHECK(recv.numel() == total(recv_counts),
           "all_to_all on {}: recv holds {} elements but recv_counts add up to {}", describe(), recv.numel(),
           total(recv_counts));
  GS_CHECK(send_counts[rank()] == recv_counts[rank()],
           "all_to_all on {}: this rank sends itself {} elements but receives {} from itself", describe(),
           send_counts[rank()], recv_counts[rank()]);
  check_writable(recv, "all_to_all");
  if (!accepts(send.device())) {
    Tensor s = to_device_copy(send, staging_device()), r = empty(recv.sizes(), recv.dtype(), staging_device());
    auto w = all_to_all_async(s, send_counts, r, recv_counts);
    bump_version(recv);
    return staged(std::move(w), {{recv, r}});
  }
  auto c = begin(fmt::format("all_to_all {} (this rank sends {})", dtype_name(send.dtype()), total(send_counts)),
                 fmt::format("all_to_all {}", dtype_name(send.dtype())));
  auto w = start_all_to_all(c, send, send_counts, recv, recv_counts);
  bump_version(recv);
  return w;
}

WorkHandle Communicator::broadcast_async(const Tensor& t, int root) {
  check_buffer(t, "broadcast", "broadcast", *this);
  GS_CHECK(root >= 0 && root < size(), "broadcast on {}: root {} is not a rank of the group (0..{})", describe(), root,
           size() - 1);
  if (rank() != root) check_writable(t, "broadcast");
  if (!accepts(t.device())) {
    Tensor s = to_device_copy(t, staging_device());
    auto w = broadcast_async(s, root);
    if (rank() == root) return w;  // the root's tensor is only read
    bump_version(t);
    return staged(std::move(w), {{t, s}});
  }
  auto c = begin(fmt::format("broadcast(root {}) {} x {}", root, dtype_name(t.dtype()), t.numel()));
  auto w = start_broadcast(c, t, root);
  if (rank() != root) bump_version(t);
  return w;
}

void Communicator::exchange(const std::vector<PeerTransfer>& legs, int tag) {
  for (const auto& leg : legs) {
    GS_CHECK(leg.peer >= 0 && leg.peer < size(), "exchange on {}: peer {} is not a rank of the group (0..{})",
             describe(), leg.peer, size() - 1);
    if (leg.send.defined()) check_buffer(leg.send, "exchange", "send", *this);
    if (leg.recv.defined()) {
      check_buffer(leg.recv, "exchange", "recv", *this);
      check_writable(leg.recv, "exchange");
    }
    if (leg.peer == rank()) {
      const int64_t sent = leg.send.defined() ? leg.send.numel() : 0, received = leg.recv.defined() ? leg.recv.numel() : 0;
      GS_CHECK(sent == received, "exchange on {}: this rank sends itself {} elements but receives {} from itself",
               describe(), sent, received);
    }
  }
  bool stage = false;
  for (const auto& leg : legs)
    stage = stage || (leg.send.defined() && !accepts(leg.send.device())) ||
            (leg.recv.defined() && !accepts(leg.recv.device()));
  if (stage) {
    std::vector<PeerTransfer> staged_legs;
    for (const auto& leg : legs) {
      PeerTransfer s{leg.peer, leg.send, leg.recv};
      if (s.send.defined() && !accepts(s.send.device())) s.send = to_device_copy(s.send, staging_device());
      if (s.recv.defined() && !accepts(s.recv.device())) s.recv = empty(s.recv.sizes(), s.recv.dtype(), staging_device());
      staged_legs.push_back(std::move(s));
    }
    exchange(staged_legs, tag);
    for (size_t k = 0; k < legs.size(); ++k) {
      const Tensor &dst = legs[k].recv, &src = staged_legs[k].recv;
      if (dst.defined() && !dst.is_same(src)) {
        copy_bytes(dst.raw_data(), dst.device(), src.raw_data(), src.device(), dst.numel() * dtype_size(dst.dtype()));
        bump_version(dst);
      }
    }
    return;
  }
  Call c{fmt::format("exchange (tag {}, {} peers)", tag, legs.size()), calls_, {}};
  run_exchange(c, legs, tag);
  for (const auto& leg : legs)
    if (leg.recv.defined()) bump_version(leg.recv);
}

void Communicator::barrier() { start_barrier(begin("barrier"))->wait(); }

WorkHandle Communicator::staged(WorkHandle inner, std::vector<std::pair<Tensor, Tensor>> copy_back) {
  std::vector<StagedWork::CopyBack> back;
  for (auto& [dst, s] : copy_back) back.push_back({std::move(dst), std::move(s)});
  return std::make_unique<StagedWork>(std::move(inner), std::move(back));
}

void Communicator::check_records_agree(const std::vector<std::pair<uint64_t, std::string>>& records) const {
  for (size_t r = 1; r < records.size(); ++r) {
    if (records[r] != records[0])
      fail("replica checker: ranks reached different collectives on group '{}': rank 0 is at call #{} '{}' while "
           "rank {} is at call #{} '{}' (every rank must issue the same collectives in the same order)",
           name(), records[0].first, records[0].second, r, records[r].first, records[r].second);
  }
}

// ---- one process

namespace {

class DoneWork : public Work {
 public:
  void wait() override {}
  bool test() override { return true; }
};

// dst[dst_offset:] = src[src_offset:], `count` elements, on the tensors' devices.
void copy_elements(const Tensor& dst, const Tensor& src, int64_t dst_offset, int64_t src_offset, int64_t count) {
  const size_t es = dtype_size(src.dtype());
  copy_bytes(static_cast<char*>(dst.raw_data()) + dst_offset * es, dst.device(),
             static_cast<const char*>(src.raw_data()) + src_offset * es, src.device(), count * es);
}

class SingleProcessCommunicator : public Communicator {
 public:
  explicit SingleProcessCommunicator(std::string name) : Communicator(std::move(name)) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  CommPtr split(int, int, std::string name) override { return std::make_shared<SingleProcessCommunicator>(name); }
  // Every operation is a copy within one device, so tensors of any device are moved as they are.
  bool accepts(Device) const override { return true; }

 protected:
  WorkHandle start_all_reduce(const Call&, const Tensor&, ReduceOp) override { return done(); }
  WorkHandle start_all_gather(const Call&, const Tensor& send, const Tensor& recv,
                              const std::vector<int64_t>& counts) override {
    copy_elements(recv, send, 0, 0, counts[0]);
    return done();
  }
  WorkHandle start_reduce_scatter(const Call&, const Tensor& send, const Tensor& recv,
                                  const std::vector<int64_t>& counts, ReduceOp) override {
    copy_elements(recv, send, 0, 0, counts[0]);
    return done();
  }
  WorkHandle start_all_to_all(const Call&, const Tensor& send, const std::vector<int64_t>& send_counts,
                              const Tensor& recv, const std::vector<int64_t>&) override {
    copy_elements(recv, send, 0, 0, send_counts[0]);
    return done();
  }
  WorkHandle start_broadcast(const Call&, const Tensor&, int) override { return done(); }
  void run_exchange(const Call&, const std::vector<PeerTransfer>& legs, int) override {
    for (const auto& leg : legs) {
      GS_CHECK(leg.send.defined() && leg.recv.defined() && leg.send.numel() == leg.recv.numel() &&
                   leg.send.dtype() == leg.recv.dtype() && leg.send.device() == leg.recv.device(),
               "exchange on {}: a leg with itself must send and receive the same number of elements of one dtype on "
               "one device",
               describe());
      copy_elements(leg.recv, leg.send, 0, 0, leg.send.numel());
    }
  }
  WorkHandle start_barrier(const Call&) override { return done(); }
  void check_same_call(const Call&) override {}

 private:
  static WorkHandle done() { return std::make_unique<DoneWork>(); }
};

}  // namespace

CommPtr single_process_communicator(std::string name) {
  return std::make_shared<SingleProcessCommunicator>(std::move(name));
}

}  // namespace gs::dist
