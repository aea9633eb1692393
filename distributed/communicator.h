// Communicators: one interface for moving tensors between the ranks of a group: one process, MPI
// and NCCL (distributed/nccl_communicator.h). Operations take tensors, not pointers: each backend
// moves the tensors of the devices it accepts() itself (MPI: CPU; NCCL: its GPU, no host staging;
// one process: any) and any other tensor is staged through staging_device() (MPI moves GPU tensors
// through the host, NCCL moves a CPU tensor through its GPU). The non-blocking forms return a
// handle to wait on. Every operation:
//   - checks dtype, contiguity, device and counts, and names what it expected and received;
//   - writes results through the version counter (an in-place write: the received tensor's version
//     bumps, and a read-only tensor such as a cached Legendre table is refused);
//   - carries a sequence number and a name, so the replica checker (GS_CHECK_REPLICAS=1) can tell
//     ranks that reached different collectives apart instead of letting them deadlock;
//   - waits with a timeout (GS_COMM_TIMEOUT seconds, default 600): a collective that never completes
//     aborts the job with a message naming the call, the group and the waiting rank.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace gs::dist {

enum class ReduceOp { sum, max, min };
const char* reduce_op_name(ReduceOp op);

// A started non-blocking operation. wait() blocks (with the communicator's timeout) until it has
// completed; test() reports completion without blocking. The handle keeps its tensors alive.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;

 protected:
  // For the destructors of handles: one dropped unwaited still owns buffers the transfer writes (or
  // results to copy back), so it completes first. Not while an exception unwinds, and errors are
  // dropped: a destructor must not throw.
  void complete_unwaited(bool done) noexcept;
};
using WorkHandle = std::unique_ptr<Work>;

// One leg of a point-to-point exchange: send `send` to `peer` and receive `recv` from it (either
// may be undefined). All legs of one exchange() run concurrently.
struct PeerTransfer {
  int peer = 0;
  Tensor send;
  Tensor recv;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // This process's rank in the whole job (for messages).
  virtual int world_rank() const { return rank(); }
  // A sub-communicator of the ranks that pass the same `color`, ordered by `key` (collective over
  // this group, like MPI_Comm_split).
  virtual std::shared_ptr<Communicator> split(int color, int key, std::string name) = 0;
  // The group this communicator spans ("world", "data", "h", "w", "spatial", ...), for messages.
  const std::string& name() const { return name_; }
  // "group 'h' (rank 1 of 2, world rank 3)"
  std::string describe() const;

  // In place: t becomes the reduction over the group. max/min are refused for complex dtypes.
  void all_reduce(const Tensor& t, ReduceOp op) { all_reduce_async(t, op)->wait(); }
  WorkHandle all_reduce_async(const Tensor& t, ReduceOp op);
  // recv (sum of counts elements) = the concatenation of every rank's send (counts[r] elements on rank r).
  void all_gather(const Tensor& send, const Tensor& recv, const std::vector<int64_t>& counts) {
    all_gather_async(send, recv, counts)->wait();
  }
  WorkHandle all_gather_async(const Tensor& send, const Tensor& recv, const std::vector<int64_t>& counts);
  // send (sum of counts) is reduced over the group; rank r receives its counts[r] elements.
  void reduce_scatter(const Tensor& send, const Tensor& recv, const std::vector<int64_t>& counts, ReduceOp op) {
    reduce_scatter_async(send, recv, counts, op)->wait();
  }
  WorkHandle reduce_scatter_async(const Tensor& send, const Tensor& recv, const std::vector<int64_t>& counts,
                                  ReduceOp op);
  // send holds send_counts[r] elements for each rank r in order; recv gets recv_counts[r] from each r.
  void all_to_all(const Tensor& send, const std::vector<int64_t>& send_counts, const Tensor& recv,
                  const std::vector<int64_t>& recv_counts) {
    all_to_all_async(send, send_counts, recv, recv_counts)->wait();
  }
  WorkHandle all_to_all_async(const Tensor& send, const std::vector<int64_t>& send_counts, const Tensor& recv,
                              const std::vector<int64_t>& recv_counts);
  // In place: every rank's t becomes root's t.
  void broadcast(const Tensor& t, int root) { broadcast_async(t, root)->wait(); }
  WorkHandle broadcast_async(const Tensor& t, int root);
  // Point-to-point (halo exchange): both sides of a leg must list each other. Not a collective of the
  // whole group, so it carries no sequence check. `tag` separates concurrent exchanges over MPI;
  // NCCL pairs transfers by order instead, so ranks issue their exchanges, and the legs to one peer,
  // in the same order.
  void exchange(const std::vector<PeerTransfer>& legs, int tag = 0);
  void barrier();

  // Whether this backend moves tensors on `d` itself. A tensor elsewhere is copied to
  // staging_device() for the operation, and its results are copied back when the operation
  // completes (on wait(), or on a test() that reports completion).
  virtual bool accepts(Device d) const { return d.is_cpu(); }
  virtual Device staging_device() const { return Device::cpu(); }

  // How long a blocking wait may take before the job is aborted (GS_COMM_TIMEOUT, default 600 s).
  std::chrono::duration<double> timeout() const { return timeout_; }
  void set_timeout(std::chrono::duration<double> t);
  // Collectives issued on this communicator so far (the sequence number of the next one).
  uint64_t calls() const { return calls_; }

 protected:
  explicit Communicator(std::string name);

  // Backend hooks, called after validation with contiguous buffers on a device the backend
  // accepts(). `call` names the collective for timeouts and errors.
  struct Call {
    std::string what;  // "all_reduce(sum) f64 x 24": for messages
    uint64_t seq = 0;
    // What every rank of the group must agree on (the replica checker compares it): `what`, less
    // the parts that may differ between ranks (an all-to-all's per-rank counts).
    std::string key;
  };
  virtual WorkHandle start_all_reduce(const Call& c, const Tensor& t, ReduceOp op) = 0;
  virtual WorkHandle start_all_gather(const Call& c, const Tensor& send, const Tensor& recv,
                                      const std::vector<int64_t>& counts) = 0;
  virtual WorkHandle start_reduce_scatter(const Call& c, const Tensor& send, const Tensor& recv,
                                          const std::vector<int64_t>& counts, ReduceOp op) = 0;
  virtual WorkHandle start_all_to_all(const Call& c, const Tensor& send, const std::vector<int64_t>& send_counts,
                                      const Tensor& recv, const std::vector<int64_t>& recv_counts) = 0;
  virtual WorkHandle start_broadcast(const Call& c, const Tensor& t, int root) = 0;
  virtual void run_exchange(const Call& c, const std::vector<PeerTransfer>& legs, int tag) = 0;
  virtual WorkHandle start_barrier(const Call& c) = 0;
  // Replica checker: every rank of the group states which collective it is about to run; the backend
  // throws (on every rank) when they differ.
  virtual void check_same_call(const Call& c) = 0;
  // The replica checker's verdict on what every rank stated: records[r] = (sequence number, key)
  // of rank r. Throws, naming the first rank that differs from rank 0 and both calls.
  void check_records_agree(const std::vector<std::pair<uint64_t, std::string>>& records) const;

  std::chrono::duration<double> timeout_;

 private:
  Call begin(std::string what, std::string key = {});
  // The handle of an operation started on staged copies: pairs of (caller's tensor, staged copy)
  // whose staged values are copied back when it completes.
  static WorkHandle staged(WorkHandle inner, std::vector<std::pair<Tensor, Tensor>> copy_back);
  std::string name_;
  uint64_t calls_ = 0;
};

using CommPtr = std::shared_ptr<Communicator>;

// The communicator of one process: every operation is a local copy (group of size 1).
CommPtr single_process_communicator(std::string name = "world");

// Whether the replica checker is on: GS_CHECK_REPLICAS=1 in the environment, or set_check_replicas.
bool check_replicas_enabled();
void set_check_replicas(bool on);

}  // namespace gs::dist
