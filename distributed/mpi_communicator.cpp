// The MPI communicator (MPICH; any MPI-3 library). Every operation is started non-blocking and
// waited for by polling with a deadline, so a collective that never completes aborts the job with a
// message instead of hanging. Errors come back as codes (MPI_ERRORS_RETURN) and become gs::Error
// naming the call, the group and the rank.
#include <mpi.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "distributed/communicator.h"
#include "distributed/world.h"
#include "engine/error.h"

namespace gs::dist {
namespace {

MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::c64: return MPI_C_FLOAT_COMPLEX;
    case DType::c128: return MPI_C_DOUBLE_COMPLEX;
    case DType::i64: return MPI_INT64_T;
    case DType::b8: return MPI_C_BOOL;
    case DType::bf16: return MPI_UINT16_T;  // moved as 16-bit words, never reduced (check_reduce)
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(ReduceOp op, DType d) {
  if (d == DType::b8) return op == ReduceOp::max ? MPI_LOR : MPI_LAND;
  switch (op) {
    case ReduceOp::sum: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
  }
  return MPI_SUM;
}

std::string mpi_error_string(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return fmt::format("MPI error code {}", rc);
  return std::string(buf, len);
}

int world_rank_now() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (!init || fin) return 0;
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// MPI counts and displacements are ints.
int to_int(int64_t v, const std::string& call, const std::string& group) {
  GS_CHECK(v >= 0 && v <= INT_MAX, "{} on {}: {} elements exceed MPI's int count ({}); split the message", call, group,
           v, INT_MAX);
  return static_cast<int>(v);
}

struct Counts {
  std::vector<int> counts, displs;
};
Counts to_counts(const std::vector<int64_t>& c, const std::string& call, const std::string& group) {
  Counts r;
  int64_t off = 0;
  for (int64_t v : c) {
    r.counts.push_back(to_int(v, call, group));
    r.displs.push_back(to_int(off, call, group));
    off += v;
  }
  to_int(off, call, group);
  return r;
}

// Polls `requests` until all completed. MPI moves a large message only while it is called, so the
// first 20 ms poll without pause (yielding the core between polls: the ranks of a small job often
// share cores, and a waiter that spins steals the core of the rank it waits for); after that a
// slow wait sleeps between polls. Past the deadline the job is aborted: the other ranks never
// reached this call, and waiting longer would be a silent hang.
void wait_all(std::vector<MPI_Request>& requests, const std::string& call, const std::string& group,
              std::chrono::duration<double> timeout) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  for (int64_t polls = 0;; ++polls) {
    int done = 0;
    int rc = MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS)
      fail("MPI error in {} on {}: {}", call, group, mpi_error_string(rc));
    if (done) return;
    if (polls < 100) continue;
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    if (waited > timeout.count())
      abort_job(fmt::format("collective timeout: rank {} waited {:.0f} s in {} on {} and the other ranks never "
                            "completed it (a rank failed, hangs, or took another path; GS_COMM_TIMEOUT sets the "
                            "limit, GS_CHECK_REPLICAS=1 names mismatched calls)",
                            world_rank_now(), waited, call, group),
                2);
    if (waited < 0.02) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(waited < 1.0 ? 20 : 500));
  }
}

class MpiWork : public Work {
 public:
  // `keep` and the counts must outlive the operation (MPI reads and writes them until it completes).
  MpiWork(MPI_Request req, std::string call, std::string group, std::chrono::duration<double> timeout,
          std::vector<Tensor> keep, Counts a, Counts b)
      : requests_{req}, call_(std::move(call)), group_(std::move(group)), timeout_(timeout), keep_(std::move(keep)),
        a_(std::move(a)), b_(std::move(b)) {}
  ~MpiWork() override { complete_unwaited(done_); }
  void wait() override {
    if (done_) return;
    wait_all(requests_, call_, group_, timeout_);
    done_ = true;
  }
  bool test() override {
    if (done_) return true;
    int flag = 0;
    int rc = MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) fail("MPI error in {} on {}: {}", call_, group_, mpi_error_string(rc));
    done_ = flag != 0;
    return done_;
  }

 private:
  std::vector<MPI_Request> requests_;
  std::string call_, group_;
  std::chrono::duration<double> timeout_;
  std::vector<Tensor> keep_;
  Counts a_, b_;
  bool done_ = false;
};

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, std::string name, bool owned) : Communicator(std::move(name)), comm_(comm), owned_(owned) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    world_rank_ = world_rank_now();
  }
  ~MpiCommunicator() override {
    int fin = 0;
    MPI_Finalized(&fin);
    if (owned_ && !fin) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int world_rank() const override { return world_rank_; }

  CommPtr split(int color, int key, std::string name) override {
    MPI_Comm sub = MPI_COMM_NULL;
    check(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split");
    return std::make_shared<MpiCommunicator>(sub, std::move(name), true);
  }

 protected:
  WorkHandle start_all_reduce(const Call& c, const Tensor& t, ReduceOp op) override {
    MPI_Request req;
    check(MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), count(t.numel(), c), mpi_type(t.dtype()), mpi_op(op, t.dtype()),
                         comm_, &req),
          c.what);
    return work(req, c, {t});
  }
  WorkHandle start_all_gather(const Call& c, const Tensor& send, const Tensor& recv,
                              const std::vector<int64_t>& counts) override {
    auto k = to_counts(counts, c.what, describe());
    MPI_Request req;
    auto dt = mpi_type(send.dtype());
    check(MPI_Iallgatherv(send.raw_data(), count(send.numel(), c), dt, recv.raw_data(), k.counts.data(),
                          k.displs.data(), dt, comm_, &req),
          c.what);
    return work(req, c, {send, recv}, std::move(k));
  }
  WorkHandle start_reduce_scatter(const Call& c, const Tensor& send, const Tensor& recv,
                                  const std::vector<int64_t>& counts, ReduceOp op) override {
    auto k = to_counts(counts, c.what, describe());
    MPI_Request req;
    check(MPI_Ireduce_scatter(send.raw_data(), recv.raw_data(), k.counts.data(), mpi_type(send.dtype()),
                              mpi_op(op, send.dtype()), comm_, &req),
          c.what);
    return work(req, c, {send, recv}, std::move(k));
  }
  WorkHandle start_all_to_all(const Call& c, const Tensor& send, const std::vector<int64_t>& send_counts,
                              const Tensor& recv, const std::vector<int64_t>& recv_counts) override {
    auto ks = to_counts(send_counts, c.what, describe()), kr = to_counts(recv_counts, c.what, describe());
    MPI_Request req;
    auto dt = mpi_type(send.dtype());
    check(MPI_Ialltoallv(send.raw_data(), ks.counts.data(), ks.displs.data(), dt, recv.raw_data(), kr.counts.data(),
                         kr.displs.data(), dt, comm_, &req),
          c.what);
    return work(req, c, {send, recv}, std::move(ks), std::move(kr));
  }
  WorkHandle start_broadcast(const Call& c, const Tensor& t, int root) override {
    MPI_Request req;
    check(MPI_Ibcast(t.raw_data(), count(t.numel(), c), mpi_type(t.dtype()), root, comm_, &req), c.what);
    return work(req, c, {t});
  }
  void run_exchange(const Call& c, const std::vector<PeerTransfer>& legs, int tag) override {
    std::vector<MPI_Request> reqs;
    for (const auto& leg : legs) {
      if (leg.recv.defined()) {
        reqs.emplace_back();
        check(MPI_Irecv(leg.recv.raw_data(), count(leg.recv.numel(), c), mpi_type(leg.recv.dtype()), leg.peer, tag,
                        comm_, &reqs.back()),
              c.what);
      }
    }
    for (const auto& leg : legs) {
      if (leg.send.defined()) {
        reqs.emplace_back();
        check(MPI_Isend(leg.send.raw_data(), count(leg.send.numel(), c), mpi_type(leg.send.dtype()), leg.peer, tag,
                        comm_, &reqs.back()),
              c.what);
      }
    }
    wait_all(reqs, c.what, describe(), timeout_);
  }
  WorkHandle start_barrier(const Call& c) override {
    MPI_Request req;
    check(MPI_Ibarrier(comm_, &req), c.what);
    return work(req, c, {});
  }

  // Every rank contributes (sequence number, call text); a mismatch is an error on every rank,
  // naming the first two ranks that disagree and what each was about to run.
  void check_same_call(const Call& c) override {
    struct Record {
      uint64_t seq;
      char what[120];
    };
    Record mine{};
    mine.seq = c.seq;
    std::snprintf(mine.what, sizeof(mine.what), "%s", c.key.c_str());
    std::vector<Record> all(size_);
    MPI_Request req;
    check(MPI_Iallgather(&mine, sizeof(Record), MPI_BYTE, all.data(), sizeof(Record), MPI_BYTE, comm_, &req),
          "replica checker: call check before " + c.what);
    std::vector<MPI_Request> reqs{req};
    wait_all(reqs, "replica checker: call check before " + c.what, describe(), timeout_);
    std::vector<std::pair<uint64_t, std::string>> records;
    for (const Record& r : all) records.emplace_back(r.seq, std::string(r.what, strnlen(r.what, sizeof(r.what))));
    check_records_agree(records);
  }

 private:
  void check(int rc, const std::string& call) const {
    if (rc != MPI_SUCCESS) fail("MPI error in {} on {}: {}", call, describe(), mpi_error_string(rc));
  }
  int count(int64_t n, const Call& c) const { return to_int(n, c.what, describe()); }

  WorkHandle work(MPI_Request req, const Call& c, std::vector<Tensor> keep, Counts a = {}, Counts b = {}) {
    return std::make_unique<MpiWork>(req, fmt::format("{} (call #{})", c.what, c.seq), describe(), timeout_,
                                     std::move(keep), std::move(a), std::move(b));
  }

  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0, size_ = 1, world_rank_ = 0;
};

std::once_flag g_world_once;
CommPtr g_world;
bool g_we_initialised = false;

void finalize_at_exit() {
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) MPI_Finalize();
}

// Ranks that share a machine share its cores: unless OMP_NUM_THREADS says otherwise, each gets its
// share of the cores this process may run on (as torchrun's default of one thread), so OpenMP
// teams of several ranks do not oversubscribe the machine and starve MPI's progress.
void share_cores_between_local_ranks() {
  if (std::getenv("OMP_NUM_THREADS")) return;
  MPI_Comm local = MPI_COMM_NULL;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) != MPI_SUCCESS) return;
  int local_size = 1;
  MPI_Comm_size(local, &local_size);
  MPI_Comm_free(&local);
  cpu_set_t set;
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = CPU_COUNT(&set);
  if (local_size > 1) omp_set_num_threads(std::max(1, cores / local_size));
}

}  // namespace

CommPtr world_communicator() {
  std::call_once(g_world_once, [] {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      g_we_initialised = true;
      std::atexit(finalize_at_exit);
    }
    g_world = std::make_shared<MpiCommunicator>(MPI_COMM_WORLD, "world", false);
    share_cores_between_local_ranks();
  });
  return g_world;
}

void abort_job(const std::string& message, int code) {
  int init = 0, fin = 0, size = 1;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  const bool live = init && !fin;
  if (live) MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Before MPI starts (a bad configuration) the launcher's variables say which rank this is.
  std::fprintf(stderr, "[rank %d] error: %s\n", live ? world_rank_now() : launcher_rank(), message.c_str());
  std::fflush(stderr);
  if (live && size > 1) {
    // Give the launcher a moment to forward this rank's message before it tears the job down.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    MPI_Abort(MPI_COMM_WORLD, code);
  }
  std::exit(code);
}

}  // namespace gs::dist
