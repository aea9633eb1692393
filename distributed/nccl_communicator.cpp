// The NCCL communicator (nccl_communicator.h). NCCL is loaded at run time (dlopen), not linked:
// the library is large and not everywhere the build runs, and a gradsphere built with its header
// must still start without it and say why when a NCCL communicator is asked for.
#include "distributed/nccl_communicator.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "distributed/world.h"
#include "engine/cuda_runtime.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "engine/storage.h"
#include "gradsphere_config.h"

#if GS_HAVE_NCCL
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>
#endif

namespace gs::dist {

Device local_rank_device() {
  int local = 0;
  for (const char* var : {"MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}) {
    const char* v = std::getenv(var);
    if (v && *v) {
      local = std::atoi(v);
      break;
    }
  }
  const int n = cuda::device_count();
  GS_CHECK(n > 0, "this rank (local rank {}) needs a GPU, but none is usable: {}", local, cuda::unavailable_reason());
  return Device::cuda(local % n);
}

GpuWorld gpu_world_communicator(Device device) {
  CommPtr world = world_communicator();
  const char* env = std::getenv("GS_COMM");
  const std::string choice = env && *env ? env : "auto";
  GS_CHECK(choice == "auto" || choice == "nccl" || choice == "mpi",
           "GS_COMM: expected auto, nccl or mpi, got '{}'", choice);
  if (world->size() == 1 || choice == "mpi")
    return {world, world->size() == 1 ? "one process" : "MPI, GPU tensors staged through the host (GS_COMM=mpi)"};
  if (choice == "nccl") return {nccl_communicator(world, device), "NCCL " + nccl_version() + " (GS_COMM=nccl)"};
  // auto: the same answer on every rank (the build and the gathered device UUIDs are the same
  // everywhere), so every rank takes the same path. A library that loads on some ranks only would
  // split them; the communicator's timeout ends such a job with a message.
  if (!built_with_nccl()) return {world, "MPI, GPU tensors staged through the host (built without NCCL)"};
  if (nccl_version().rfind("2.", 0) != 0) return {world, "MPI, GPU tensors staged through the host (" + nccl_version() + ")"};
  const auto [a, b] = ranks_sharing_a_gpu(*world, device);
  if (a >= 0)
    return {world, fmt::format("MPI, GPU tensors staged through the host (ranks {} and {} share a GPU, which NCCL "
                               "cannot run)",
                               a, b)};
  return {nccl_communicator(world, device), "NCCL " + nccl_version()};
}

#if GS_HAVE_NCCL

namespace {

// The NCCL entry points gradsphere calls, resolved from the library once.
struct Nccl {
  std::string error;  // why the library is not usable; empty when it is
  std::string path;
  decltype(&ncclGetVersion) GetVersion = nullptr;
  decltype(&ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&ncclCommInitRankConfig) CommInitRankConfig = nullptr;
  decltype(&ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&ncclCommAbort) CommAbort = nullptr;
  decltype(&ncclCommDestroy) CommDestroy = nullptr;
  decltype(&ncclCommFinalize) CommFinalize = nullptr;
  decltype(&ncclGetErrorString) GetErrorString = nullptr;
  decltype(&ncclGetLastError) GetLastError = nullptr;
  decltype(&ncclAllReduce) AllReduce = nullptr;
  decltype(&ncclAllGather) AllGather = nullptr;
  decltype(&ncclReduceScatter) ReduceScatter = nullptr;
  decltype(&ncclBroadcast) Broadcast = nullptr;
  decltype(&ncclReduce) Reduce = nullptr;
  decltype(&ncclSend) Send = nullptr;
  decltype(&ncclRecv) Recv = nullptr;
  decltype(&ncclGroupStart) GroupStart = nullptr;
  decltype(&ncclGroupEnd) GroupEnd = nullptr;
};

template <class F>
bool resolve(void* lib, const char* name, F& fn, std::string& error) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn && error.empty()) error = fmt::format("the NCCL library has no symbol {}", name);
  return fn != nullptr;
}

// GS_NCCL_LIBRARY names the library; else the loader's search path (LD_LIBRARY_PATH, the CUDA
// toolkit's lib64 when it is registered) is asked for libnccl.so.2.
const Nccl& nccl() {
  static const Nccl api = [] {
    Nccl a;
    const char* env = std::getenv("GS_NCCL_LIBRARY");
    std::vector<std::string> tries;
    if (env && *env) tries.push_back(env);
    else tries = {"libnccl.so.2", "libnccl.so", "/usr/local/cuda/lib64/libnccl.so.2"};
    void* lib = nullptr;
    std::string reasons;
    for (const auto& t : tries) {
      lib = dlopen(t.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib) {
        a.path = t;
        break;
      }
      const char* why = dlerror();
      reasons += fmt::format("{}{}", reasons.empty() ? "" : "; ", why ? why : t);
    }
    if (!lib) {
      a.error = fmt::format("the NCCL library could not be loaded ({}); set GS_NCCL_LIBRARY to libnccl.so.2", reasons);
      return a;
    }
    std::string& e = a.error;
    resolve(lib, "ncclGetVersion", a.GetVersion, e);
    resolve(lib, "ncclGetUniqueId", a.GetUniqueId, e);
    resolve(lib, "ncclCommInitRankConfig", a.CommInitRankConfig, e);
    resolve(lib, "ncclCommGetAsyncError", a.CommGetAsyncError, e);
    resolve(lib, "ncclCommAbort", a.CommAbort, e);
    resolve(lib, "ncclCommDestroy", a.CommDestroy, e);
    resolve(lib, "ncclCommFinalize", a.CommFinalize, e);
    resolve(lib, "ncclGetErrorString", a.GetErrorString, e);
    resolve(lib, "ncclGetLastError", a.GetLastError, e);
    resolve(lib, "ncclAllReduce", a.AllReduce, e);
    resolve(lib, "ncclAllGather", a.AllGather, e);
    resolve(lib, "ncclReduceScatter", a.ReduceScatter, e);
    resolve(lib, "ncclBroadcast", a.Broadcast, e);
    resolve(lib, "ncclReduce", a.Reduce, e);
    resolve(lib, "ncclSend", a.Send, e);
    resolve(lib, "ncclRecv", a.Recv, e);
    resolve(lib, "ncclGroupStart", a.GroupStart, e);
    resolve(lib, "ncclGroupEnd", a.GroupEnd, e);
    // ncclCommInitRankConfig with a non-blocking config needs NCCL 2.14.
    int v = 0;
    if (e.empty() && a.GetVersion(&v) == ncclSuccess && v < 21400)
      e = fmt::format("{} is NCCL {}; gradsphere needs 2.14 or later", a.path, v);
    return a;
  }();
  return api;
}

const Nccl& require_nccl(const char* op) {
  const Nccl& a = nccl();
  GS_CHECK(a.error.empty(), "{}: {}", op, a.error);
  return a;
}

// Complex tensors travel as pairs of reals (only sum is defined for them, element by element);
// bools as bytes, where max is 'any' and min is 'all'.
ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::f32: case DType::c64: return ncclFloat32;
    case DType::f64: case DType::c128: return ncclFloat64;
    case DType::i64: return ncclInt64;
    case DType::b8: return ncclUint8;
    case DType::bf16: return ncclUint8;  // moved as byte pairs (nccl_count), never reduced (check_reduce)
  }
  return ncclUint8;
}
size_t nccl_count(DType d, int64_t n) { return static_cast<size_t>(is_complex(d) || d == DType::bf16 ? 2 * n : n); }

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
  }
  return ncclSum;
}

char* bytes_at(const Tensor& t, int64_t element) {
  return static_cast<char*>(t.raw_data()) + element * static_cast<int64_t>(dtype_size(t.dtype()));
}

// Every rank's exclusive prefix sums of counts.
std::vector<int64_t> offsets_of(const std::vector<int64_t>& counts) {
  std::vector<int64_t> o(counts.size(), 0);
  for (size_t r = 1; r < counts.size(); ++r) o[r] = o[r - 1] + counts[r - 1];
  return o;
}

bool all_equal(const std::vector<int64_t>& v) {
  for (int64_t x : v)
    if (x != v[0]) return false;
  return true;
}

// Every rank's GPU (its UUID: unique across machines, unlike a device index), gathered over the
// bootstrap. A rank that cannot take part (no usable device, no NCCL library) still joins the
// gather with a status word and throws only after it, so no rank waits for one that gave up:
// the failing rank throws its own reason, the others name it.
struct RankGpus {
  std::vector<std::array<int64_t, 2>> uuid;

  std::pair<int, int> sharing_pair() const {
    for (size_t a = 0; a < uuid.size(); ++a)
      for (size_t b = a + 1; b < uuid.size(); ++b)
        if (uuid[a] == uuid[b]) return {static_cast<int>(a), static_cast<int>(b)};
    return {-1, -1};
  }
};

RankGpus gather_rank_gpus(Communicator& bootstrap, Device device, bool need_nccl, const char* op) {
  std::string error;
  Tensor mine = zeros({3}, DType::i64);
  try {
    if (need_nccl) require_nccl(op);
    cuda::require_device(device, op);
    cudaDeviceProp prop{};
    GS_CUDA_CHECK(cudaGetDeviceProperties(&prop, device.index), op);
    std::memcpy(mine.data<int64_t>() + 1, prop.uuid.bytes, 16);
    mine.data<int64_t>()[0] = 1;
  } catch (const std::exception& e) {
    error = e.what();
  }
  const int n = bootstrap.size();
  Tensor all = zeros({3 * n}, DType::i64);
  bootstrap.all_gather(mine, all, std::vector<int64_t>(n, 3));
  if (!error.empty()) fail("{}", error);
  const int64_t* v = all.data<int64_t>();
  RankGpus r;
  for (int k = 0; k < n; ++k) {
    GS_CHECK(v[3 * k] == 1, "{} on group '{}': rank {} cannot use its GPU or NCCL (its own message says why)", op,
             bootstrap.name(), k);
    r.uuid.push_back({v[3 * k + 1], v[3 * k + 2]});
  }
  return r;
}

// One stream per GPU for every NCCL communicator of the process: NCCL kernels of two communicators
// running at once on one GPU can deadlock when ranks issue them in different orders; on one stream
// they run in issue order, which every rank shares (the collectives' contract).
cuda::Stream nccl_stream(int device) {
  static std::mutex mutex;
  static std::vector<cuda::Stream> streams;
  std::lock_guard<std::mutex> lock(mutex);
  for (const auto& s : streams)
    if (s.device == device) return s;
  streams.push_back(cuda::new_stream(device));
  return streams.back();
}

// The NCCL communicator of one rank, shared by the communicator and the handles of its operations
// in flight (a handle may outlive the communicator object).
struct CommState {
  ncclComm_t comm = nullptr;
  int device = 0;
  cuda::Stream stream;
  std::string group;  // describe(), for messages
  bool aborted = false;
  // A clean end flushes what was issued (finalize, polled for a while), then frees; a communicator
  // in error, or one that does not finish flushing, is aborted instead (never a wait without end).
  ~CommState() {
    if (!comm || aborted) return;
    const Nccl& a = nccl();
    ncclResult_t r = a.CommFinalize(comm);
    const auto start = std::chrono::steady_clock::now();
    while (r == ncclInProgress && std::chrono::steady_clock::now() - start < std::chrono::seconds(30)) {
      std::this_thread::yield();
      a.CommGetAsyncError(comm, &r);
    }
    if (r == ncclSuccess) a.CommDestroy(comm);
    else a.CommAbort(comm);
  }

  std::string error_text(ncclResult_t r) const {
    const Nccl& a = nccl();
    std::string last = comm && a.GetLastError ? a.GetLastError(comm) : "";
    return last.empty() ? a.GetErrorString(r) : fmt::format("{} ({})", a.GetErrorString(r), last);
  }

  // An error of NCCL's: the communicator is aborted first (its peers then see a remote error
  // instead of waiting for this rank), then the error is thrown.
  [[noreturn]] void fail_with(ncclResult_t r, const std::string& call) {
    const std::string text = error_text(r);
    abort_comm();
    fail("NCCL error in {} on {}: {}", call, group, text);
  }
  void abort_comm() {
    if (comm && !aborted) {
      aborted = true;
      nccl().CommAbort(comm);
    }
  }

  // The result of a call, or of the communicator's asynchronous state: ncclInProgress is polled
  // until it settles (non-blocking communicator), with the deadline of `timeout`.
  void settle(ncclResult_t r, const std::string& call, std::chrono::duration<double> timeout) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    while (r == ncclInProgress) {
      const double waited = std::chrono::duration<double>(clock::now() - start).count();
      if (waited > timeout.count()) time_out(call, waited);
      std::this_thread::yield();
      nccl().CommGetAsyncError(comm, &r);
    }
    if (r != ncclSuccess) fail_with(r, call);
  }

  [[noreturn]] void time_out(const std::string& call, double waited) {
    abort_comm();
    abort_job(fmt::format("collective timeout: {} waited {:.0f} s in {} and the other ranks never completed it (a "
                          "rank failed, hangs, or took another path; GS_COMM_TIMEOUT sets the limit, "
                          "GS_CHECK_REPLICAS=1 names mismatched calls)",
                          group, waited, call),
              2);
  }
};

class NcclWork : public Work {
 public:
  NcclWork(std::shared_ptr<CommState> state, std::unique_ptr<cuda::Event> done, std::string call,
           std::chrono::duration<double> timeout, std::vector<Tensor> keep)
      : state_(std::move(state)), done_(std::move(done)), call_(std::move(call)), timeout_(timeout),
        keep_(std::move(keep)) {}
  ~NcclWork() override { complete_unwaited(finished_); }
  // Polls the completion event and NCCL's asynchronous error: a remote failure or a hang ends in
  // an error or an abort, never in a wait without end.
  void wait() override {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    for (int64_t polls = 0; !test(); ++polls) {
      const double waited = std::chrono::duration<double>(clock::now() - start).count();
      if (waited > timeout_.count()) state_->time_out(call_, waited);
      if (polls < 1000) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(waited < 1.0 ? 20 : 500));
    }
  }
  bool test() override {
    if (finished_) return true;
    ncclResult_t r = ncclSuccess;
    nccl().CommGetAsyncError(state_->comm, &r);
    if (r != ncclSuccess && r != ncclInProgress) state_->fail_with(r, call_);
    finished_ = done_->query();
    if (finished_) keep_.clear();
    return finished_;
  }

 private:
  std::shared_ptr<CommState> state_;
  std::unique_ptr<cuda::Event> done_;
  std::string call_;
  std::chrono::duration<double> timeout_;
  std::vector<Tensor> keep_;
  bool finished_ = false;
};

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(CommPtr bootstrap, Device device)
      : Communicator(bootstrap->name()), bootstrap_(std::move(bootstrap)), device_(device) {
    check_one_gpu_per_rank();  // collective; also refuses on every rank when one cannot start NCCL
    const Nccl& api = nccl();
    state_ = std::make_shared<CommState>();
    state_->device = device.index;
    state_->stream = nccl_stream(device.index);
    state_->group = describe();
    // Rank 0 makes the id and sends it with a status word, so a failure there is an error on every
    // rank instead of a wait for an id that never comes.
    Tensor id = zeros({1 + static_cast<int64_t>(sizeof(ncclUniqueId) / sizeof(int64_t))}, DType::i64);
    static_assert(sizeof(ncclUniqueId) % sizeof(int64_t) == 0);
    std::string root_error;
    if (bootstrap_->rank() == 0) {
      ncclUniqueId uid;
      ncclResult_t r = api.GetUniqueId(&uid);
      if (r == ncclSuccess) std::memcpy(id.data<int64_t>() + 1, &uid, sizeof(uid));
      else root_error = api.GetErrorString(r);
      id.data<int64_t>()[0] = r == ncclSuccess ? 1 : 0;
    }
    bootstrap_->broadcast(id, 0);
    GS_CHECK(id.data<int64_t>()[0] == 1, "nccl_communicator on {}: rank 0 could not create NCCL's unique id{}",
             describe(), root_error.empty() ? "" : ": " + root_error);
    ncclUniqueId uid;
    std::memcpy(&uid, id.data<int64_t>() + 1, sizeof(uid));
    cuda::DeviceGuard on(device.index);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // every call returns at once; settle() polls with the deadline
    ncclResult_t r = api.CommInitRankConfig(&state_->comm, bootstrap_->size(), uid, bootstrap_->rank(), &config);
    state_->settle(r, "ncclCommInitRankConfig", timeout_);
    // Every rank's result before the first operation: a rank that failed has thrown above, and the
    // others learn it here (the bootstrap's timeout bounds the wait) rather than in a transfer.
    bootstrap_->barrier();
  }

  int rank() const override { return bootstrap_->rank(); }
  int size() const override { return bootstrap_->size(); }
  int world_rank() const override { return bootstrap_->world_rank(); }
  bool accepts(Device d) const override { return d == device_; }
  Device staging_device() const override { return device_; }

  CommPtr split(int color, int key, std::string name) override {
    return std::make_shared<NcclCommunicator>(bootstrap_->split(color, key, std::move(name)), device_);
  }

 protected:
  WorkHandle start_all_reduce(const Call& c, const Tensor& t, ReduceOp op) override {
    return launch(c, {t}, [&](ncclComm_t comm, cudaStream_t s) {
      return nccl().AllReduce(t.raw_data(), t.raw_data(), nccl_count(t.dtype(), t.numel()), nccl_type(t.dtype()),
                              nccl_op(op), comm, s);
    });
  }
  WorkHandle start_all_gather(const Call& c, const Tensor& send, const Tensor& recv,
                              const std::vector<int64_t>& counts) override {
    const DType d = send.dtype();
    if (all_equal(counts))
      return launch(c, {send, recv}, [&](ncclComm_t comm, cudaStream_t s) {
        return nccl().AllGather(send.raw_data(), recv.raw_data(), nccl_count(d, counts[0]), nccl_type(d), comm, s);
      });
    // Uneven blocks: one broadcast per rank into its block, in one group.
    const auto off = offsets_of(counts);
    return launch_group(c, {send, recv}, [&](ncclComm_t comm, cudaStream_t s) {
      for (int r = 0; r < size(); ++r) {
        if (counts[r] == 0) continue;
        ncclResult_t e = nccl().Broadcast(r == rank() ? send.raw_data() : nullptr, bytes_at(recv, off[r]),
                                          nccl_count(d, counts[r]), nccl_type(d), r, comm, s);
        if (!accepted(e)) return e;
      }
      return ncclSuccess;
    });
  }
  WorkHandle start_reduce_scatter(const Call& c, const Tensor& send, const Tensor& recv,
                                  const std::vector<int64_t>& counts, ReduceOp op) override {
    const DType d = send.dtype();
    if (all_equal(counts))
      return launch(c, {send, recv}, [&](ncclComm_t comm, cudaStream_t s) {
        return nccl().ReduceScatter(send.raw_data(), recv.raw_data(), nccl_count(d, counts[0]), nccl_type(d),
                                    nccl_op(op), comm, s);
      });
    // Uneven blocks: one reduce per rank onto its block, in one group.
    const auto off = offsets_of(counts);
    return launch_group(c, {send, recv}, [&](ncclComm_t comm, cudaStream_t s) {
      for (int r = 0; r < size(); ++r) {
        if (counts[r] == 0) continue;
        ncclResult_t e = nccl().Reduce(bytes_at(send, off[r]), r == rank() ? recv.raw_data() : nullptr,
                                       nccl_count(d, counts[r]), nccl_type(d), nccl_op(op), r, comm, s);
        if (!accepted(e)) return e;
      }
      return ncclSuccess;
    });
  }
  WorkHandle start_all_to_all(const Call& c, const Tensor& send, const std::vector<int64_t>& send_counts,
                              const Tensor& recv, const std::vector<int64_t>& recv_counts) override {
    const auto so = offsets_of(send_counts), ro = offsets_of(recv_counts);
    std::vector<Leg> legs;
    for (int p = 0; p < size(); ++p) legs.push_back({p, send, so[p], send_counts[p], recv, ro[p], recv_counts[p]});
    return launch_point_to_point(c, {send, recv}, legs);
  }
  WorkHandle start_broadcast(const Call& c, const Tensor& t, int root) override {
    return launch(c, {t}, [&](ncclComm_t comm, cudaStream_t s) {
      return nccl().Broadcast(t.raw_data(), t.raw_data(), nccl_count(t.dtype(), t.numel()), nccl_type(t.dtype()), root,
                              comm, s);
    });
  }
  void run_exchange(const Call& c, const std::vector<PeerTransfer>& legs, int) override {
    // NCCL pairs point-to-point transfers by their order on the communicator, not by tag: every
    // rank must issue its exchanges (and legs to one peer) in the same order (communicator.h).
    std::vector<Tensor> keep;
    std::vector<Leg> p2p;
    for (const auto& l : legs) {
      if (l.send.defined()) keep.push_back(l.send);
      if (l.recv.defined()) keep.push_back(l.recv);
      p2p.push_back({l.peer, l.send, 0, l.send.defined() ? l.send.numel() : 0, l.recv, 0,
                     l.recv.defined() ? l.recv.numel() : 0});
    }
    launch_point_to_point(c, std::move(keep), p2p)->wait();
  }
  WorkHandle start_barrier(const Call& c) override {
    if (!barrier_word_.defined()) barrier_word_ = zeros({1}, DType::f32, device_);
    return start_all_reduce(c, barrier_word_, ReduceOp::sum);
  }
  // The records travel over the bootstrap (host memory), packed in i64 words.
  void check_same_call(const Call& c) override {
    constexpr int64_t kWords = 16, kChars = (kWords - 1) * 8;
    Tensor mine = zeros({kWords}, DType::i64), all = zeros({kWords * size()}, DType::i64);
    mine.data<int64_t>()[0] = static_cast<int64_t>(c.seq);
    std::memcpy(mine.data<int64_t>() + 1, c.key.data(), std::min<size_t>(c.key.size(), kChars));
    bootstrap_->all_gather(mine, all, std::vector<int64_t>(size(), kWords));
    std::vector<std::pair<uint64_t, std::string>> records;
    for (int r = 0; r < size(); ++r) {
      const int64_t* w = all.data<int64_t>() + r * kWords;
      const char* text = reinterpret_cast<const char*>(w + 1);
      records.emplace_back(static_cast<uint64_t>(w[0]), std::string(text, strnlen(text, kChars)));
    }
    check_records_agree(records);
  }

 private:
  // Two ranks of one group on one GPU cannot run NCCL: every rank gets the same answer, so all
  // refuse alike.
  void check_one_gpu_per_rank() {
    const RankGpus gpus = gather_rank_gpus(*bootstrap_, device_, /*need_nccl=*/true, "nccl_communicator");
    const auto [a, b] = gpus.sharing_pair();
    GS_CHECK(a < 0,
             "nccl_communicator on {}: ranks {} and {} use the same GPU; NCCL needs one GPU per rank (this job "
             "has {} ranks in the group on fewer GPUs). Use the MPI communicator (GS_COMM=mpi), which stages GPU "
             "tensors through the host, or one rank per GPU",
             describe(), a, b, size());
  }

  // Enqueues `enqueue(comm, stream)` on the NCCL stream after the work queued so far on the
  // current stream, and returns a handle on its completion. Later work on the current stream is not
  // held back (it overlaps the transfer); the results are read after wait() or a test() that
  // reported completion.
  template <class F>
  WorkHandle launch(const Call& c, std::vector<Tensor> keep, F&& enqueue) {
    cuda::DeviceGuard on(device_.index);
    cuda::Event ready(device_.index);
    ready.record(cuda::current_stream(device_.index));
    ready.block(state_->stream);
    const std::string call = fmt::format("{} (call #{})", c.what, c.seq);
    state_->settle(enqueue(state_->comm, static_cast<cudaStream_t>(state_->stream.handle)), call, timeout_);
    for (const Tensor& t : keep) record_stream(t.storage(), reinterpret_cast<uintptr_t>(state_->stream.handle));
    auto done = std::make_unique<cuda::Event>(device_.index);
    done->record(state_->stream);
    return std::make_unique<NcclWork>(state_, std::move(done), call, timeout_, std::move(keep));
  }
  // A non-blocking communicator may answer "in progress" inside a group; the group's end settles it.
  static bool accepted(ncclResult_t r) { return r == ncclSuccess || r == ncclInProgress; }
  // Several NCCL calls as one group. Nothing between its start and end may throw: an open group
  // would swallow every later NCCL call of this thread.
  template <class F>
  WorkHandle launch_group(const Call& c, std::vector<Tensor> keep, F&& enqueue_all) {
    return launch(c, std::move(keep), [&](ncclComm_t comm, cudaStream_t s) {
      ncclResult_t r = nccl().GroupStart();
      if (r != ncclSuccess) return r;
      ncclResult_t e = enqueue_all(comm, s);
      r = nccl().GroupEnd();
      return accepted(e) ? r : e;
    });
  }
  // One pair of transfers with `peer`: `send_count` elements of `send` from `send_offset` and
  // `recv_count` into `recv` at `recv_offset`.
  struct Leg {
    int peer;
    Tensor send;
    int64_t send_offset, send_count;
    Tensor recv;
    int64_t recv_offset, recv_count;
  };
  // The legs with this rank itself are device copies on the NCCL stream, made before the group
  // (the base class checked that they send and receive alike); the others one group of sends and
  // receives.
  WorkHandle launch_point_to_point(const Call& c, std::vector<Tensor> keep, const std::vector<Leg>& legs) {
    return launch(c, std::move(keep), [&](ncclComm_t comm, cudaStream_t s) {
      for (const Leg& l : legs)
        if (l.peer == rank() && l.send_count > 0)
          GS_CUDA_CHECK(cudaMemcpyAsync(bytes_at(l.recv, l.recv_offset), bytes_at(l.send, l.send_offset),
                                        l.send_count * dtype_size(l.send.dtype()), cudaMemcpyDeviceToDevice, s),
                        "communicator copy to this rank");
      ncclResult_t r = nccl().GroupStart();
      if (r != ncclSuccess) return r;
      ncclResult_t e = ncclSuccess;
      for (const Leg& l : legs) {
        if (l.peer == rank() || !accepted(e)) continue;
        if (l.send_count > 0)
          e = nccl().Send(bytes_at(l.send, l.send_offset), nccl_count(l.send.dtype(), l.send_count),
                          nccl_type(l.send.dtype()), l.peer, comm, s);
        if (accepted(e) && l.recv_count > 0)
          e = nccl().Recv(bytes_at(l.recv, l.recv_offset), nccl_count(l.recv.dtype(), l.recv_count),
                          nccl_type(l.recv.dtype()), l.peer, comm, s);
      }
      r = nccl().GroupEnd();
      return accepted(e) ? r : e;
    });
  }

  CommPtr bootstrap_;
  Device device_;
  std::shared_ptr<CommState> state_;
  Tensor barrier_word_;
};

}  // namespace

bool built_with_nccl() { return true; }

std::pair<int, int> ranks_sharing_a_gpu(Communicator& bootstrap, Device device) {
  return gather_rank_gpus(bootstrap, device, /*need_nccl=*/false, "ranks_sharing_a_gpu").sharing_pair();
}

std::string nccl_version() {
  const Nccl& a = nccl();
  if (!a.error.empty()) return a.error;
  int v = 0;
  a.GetVersion(&v);
  // NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch (2.9 and later)
  return fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

CommPtr nccl_communicator(const CommPtr& bootstrap, Device device) {
  GS_CHECK(bootstrap, "nccl_communicator: expected a bootstrap communicator, got none");
  GS_CHECK(!device.is_cpu(), "nccl_communicator: NCCL moves GPU tensors; expected a cuda device, got {}", device);
  return std::make_shared<NcclCommunicator>(bootstrap, device);
}

#else

namespace {
constexpr const char* kNoNccl =
    "this gradsphere was built without NCCL (it needs CUDA and nccl.h at configure time); the MPI communicator "
    "moves GPU tensors through the host";
}

bool built_with_nccl() { return false; }
std::string nccl_version() { return kNoNccl; }
CommPtr nccl_communicator(const CommPtr&, Device device) { fail("nccl_communicator on {}: {}", device, kNoNccl); }
std::pair<int, int> ranks_sharing_a_gpu(Communicator&, Device device) {
  fail("ranks_sharing_a_gpu on {}: {}", device, kNoNccl);
}

#endif

}  // namespace gs::dist
