// The pipelined distributed SHT (pipelined_sht.h): a transform is a list of steps (transposes
// into and out of the fields, and one-process kernels) that every chunk of the fields runs through,
// on a static schedule: at tick t, chunk c runs step t - c. Each tick first starts its transposes
// (in chunk order), then runs its kernels, polling the moving transposes between them. Every rank
// starts the same collectives in the same order, and every wait at tick t is for a transpose every
// rank started before tick t, so the schedule cannot deadlock.
#include "distributed/pipelined_sht.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/block_transpose.h"
#include "distributed/sphere_transforms.h"
#include "engine/autograd/forward_ad.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/record.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "ops/shape_ops.h"
#include "ops/sphere/fft.h"
#include "ops/sphere/legendre/path.h"
#include "ops/sphere/legendre/table.h"
#include "ops/sphere/vector_sht.h"
#include "ops/view.h"

namespace gs::dist {
namespace {

using sphere::ShtSpec;

// ---- the setting

int chunks_from_environment() {
  const char* v = std::getenv("GS_SHT_PIPELINE");
  if (v == nullptr || *v == '\0' || std::string(v) == "auto") return 0;
  char* end = nullptr;
  const long k = std::strtol(v, &end, 10);
  GS_CHECK(*end == '\0' && k >= 1 && k <= 1024, "GS_SHT_PIPELINE: expected auto or a chunk count 1..1024, got '{}'", v);
  return static_cast<int>(k);
}

std::atomic<int>& chunk_setting() {  // -1: not read from the environment yet
  static std::atomic<int> k{-1};
  return k;
}

// ---- fields: a chunk is a set of field indices, sorted disjoint intervals

using FieldSet = std::vector<Block>;

int64_t count_in(const FieldSet& s, Block b) {
  int64_t n = 0;
  for (const Block& i : s)
    n += std::max<int64_t>(0, std::min(i.start + i.count, b.start + b.count) - std::max(i.start, b.start));
  return n;
}

// Chunk c takes the c-th of k shares of every rank's block of the n fields over `parts` ranks, so
// each rank computes on its share of every chunk (and the first transpose sends each destination
// one contiguous run).
std::vector<FieldSet> chunk_fields(int64_t n, int parts, int64_t k) {
  std::vector<FieldSet> chunks;
  for (int64_t c = 0; c < k; ++c) {
    FieldSet s;
    for (int p = 0; p < parts; ++p) {
      const Block b = split_block(n, parts, p), share = split_block(b.count, k, c);
      if (share.count > 0) s.push_back({b.start + share.start, share.count});
    }
    if (!s.empty()) chunks.push_back(std::move(s));
  }
  return chunks;
}

Tensor take_fields(const Tensor& x, const FieldSet& s) {
  if (s.size() == 1) return narrow(x, 0, s[0].start, s[0].count);
  std::vector<Tensor> parts;
  for (const Block& b : s) parts.push_back(narrow(x, 0, b.start, b.count));
  return cat(parts, 0);
}

// ---- steps

using Kernel = std::function<Tensor(const Tensor&)>;

struct Step {
  enum class Kind { to_fields, from_fields, compute } kind;
  int64_t dim = 0;     // the spatial dim that is split (transposes) or transformed (kernels)
  int64_t global = 0;  // transposes: that dim's whole size
  CommPtr comm;        // transposes
  Kernel kernel;       // the one-process kernel (forward)
  int64_t in_size = 0, out_size = 0;  // kernels: the dim's size before and after
  DType in_dtype = DType::f64, out_dtype = DType::f64;  // kernels: what the kernel takes and gives
};

struct Pipeline {
  std::vector<Step> steps;
  std::vector<FieldSet> chunks;
  std::optional<sphere::LegendrePath> legendre_path;  // pinned for every chunk (see Pin)
};

// The Legendre contraction picks its CPU path by the batch (path.h): a chunk must take the path the
// whole batch takes, or its arithmetic would differ. Pinned while a pipeline runs.
struct Pin {
  explicit Pin(std::optional<sphere::LegendrePath> p) : active(p.has_value()) {
    if (active) previous = sphere::set_legendre_path(*p);
  }
  ~Pin() {
    if (active) sphere::set_legendre_path(previous);
  }
  Pin(const Pin&) = delete;
  Pin& operator=(const Pin&) = delete;
  bool active;
  sphere::LegendrePath previous = sphere::LegendrePath::automatic;
};

std::optional<sphere::LegendrePath> legendre_pin(const ShtSpec& spec, bool analysis, DType real, int64_t m0,
                                                 int64_t count, int64_t batch) {
  if (sphere::legendre_path() != sphere::LegendrePath::automatic) return std::nullopt;
  const auto kind = analysis ? sphere::LegendreTableKind::analysis : sphere::LegendreTableKind::synthesis;
  // The key the contraction itself looks its tables up by (the orders m0 .. m0 + count).
  const sphere::LegendreTableKey key = sphere::LegendreTableKey{
      spec.grid, spec.nlat, spec.lmax, spec.mmax, spec.norm, spec.csphase, kind, real, m0, m0 + count}.canonical();
  return sphere::use_recurrence(key, batch)
             ? sphere::LegendrePath::recurrence
             : sphere::LegendrePath::table;
}

// Recording on for the probe below, whatever the caller's modes.
struct RecordingOn {
  GradModeGuard grad{true};
  bool inference = InferenceMode::enabled();
  RecordingOn() { InferenceMode::set_enabled(false); }
  ~RecordingOn() { InferenceMode::set_enabled(inference); }
  RecordingOn(const RecordingOn&) = delete;
  RecordingOn& operator=(const RecordingOn&) = delete;
};

// A kernel's adjoint is the backward rule its node runs in the unpipelined path, taken from the
// node of a one-field probe: the FFTs' and contractions' rules read only their constants (length,
// weights, table), never the input's shape, so applied to a chunk's gradient they compute exactly
// what the unpipelined backward computes for those fields.
Kernel adjoint_of(const Step& s) {
  auto node = std::make_shared<std::shared_ptr<Node>>();
  return [s, node](const Tensor& g) {
    if (!*node) {
      RecordingOn on;
      Shape shape = g.sizes();
      shape[0] = 1;
      shape[s.dim] = s.in_size;
      const Tensor probe = zeros(shape, s.in_dtype, g.device()).set_requires_grad();
      *node = s.kernel(probe).grad_fn();
      GS_CHECK(*node && (*node)->next_edges.size() == 1,
               "pipelined sht: the kernel of {} inputs should record one node of one input", probe.meta_str());
    }
    std::vector<Tensor> r = (*node)->apply({g});
    return r.at(0);
  };
}

// What a step does to one chunk when a pipeline runs forward or as its adjoint (reversed: the
// transposes swap direction, the kernels become their adjoints).
struct RunStep {
  Step::Kind kind;
  int64_t dim, global, out_size;
  DType out_dtype;
  CommPtr comm;
  Kernel apply;
};

std::vector<RunStep> run_steps(const Pipeline& p, bool adjoint) {
  std::vector<RunStep> out;
  for (const Step& s : p.steps) {
    RunStep r{s.kind, s.dim, s.global, adjoint ? s.in_size : s.out_size, adjoint ? s.in_dtype : s.out_dtype, s.comm,
              s.kernel};
    if (adjoint && s.kind == Step::Kind::compute) r.apply = adjoint_of(s);
    if (adjoint && s.kind == Step::Kind::to_fields) r.kind = Step::Kind::from_fields;
    else if (adjoint && s.kind == Step::Kind::from_fields) r.kind = Step::Kind::to_fields;
    out.push_back(std::move(r));
  }
  if (adjoint) std::reverse(out.begin(), out.end());
  return out;
}

// ---- running a pipeline

struct Chunk {
  Tensor value;                           // when not moving
  std::unique_ptr<BlockTranspose> moving;  // a transpose started and not finished
  void settle() {
    if (moving) value = moving->finish();
    moving.reset();
  }
};

std::unique_ptr<BlockTranspose> start_transpose(const RunStep& s, const Tensor& x, const FieldSet& fields,
                                                int64_t n_fields) {
  const int n = s.comm->size();
  std::vector<int64_t> counts(n);  // every rank's share of the chunk's fields
  for (int p = 0; p < n; ++p) counts[p] = count_in(fields, split_block(n_fields, n, p));
  if (s.kind == Step::Kind::to_fields)
    return std::make_unique<BlockTranspose>(x, s.dim, 0, split_counts(s.global, n), counts, *s.comm);
  return std::make_unique<BlockTranspose>(x, 0, s.dim, counts, split_counts(s.global, n), *s.comm);
}

Tensor compute(const RunStep& s, const Tensor& x) {
  Shape out_shape = x.sizes();
  out_shape[s.dim] = s.out_size;
  if (x.numel() == 0) return empty(out_shape, s.out_dtype, x.device());  // no fields or no orders here
  return s.apply(x);
}

Tensor execute(const Tensor& x, const Pipeline& p, bool adjoint) {
  forward_ad::PrimalOnlyGuard primal;
  Pin pin(p.legendre_path);
  const std::vector<RunStep> steps = run_steps(p, adjoint);
  const size_t k = p.chunks.size(), n_steps = steps.size();
  std::vector<Chunk> chunks(k);
  for (size_t c = 0; c < k; ++c) chunks[c].value = take_fields(x, p.chunks[c]);
  auto poll = [&] {
    for (Chunk& ch : chunks)
      if (ch.moving) ch.moving->test();
  };
  for (size_t tick = 0; tick + 1 < n_steps + k; ++tick) {
    for (size_t c = 0; c < k && c <= tick; ++c) {  // the transposes first: they move while the kernels run
      if (tick - c >= n_steps || steps[tick - c].kind == Step::Kind::compute) continue;
      chunks[c].settle();
      chunks[c].moving = start_transpose(steps[tick - c], chunks[c].value, p.chunks[c], x.size(0));
    }
    for (size_t c = 0; c < k && c <= tick; ++c) {
      if (tick - c >= n_steps || steps[tick - c].kind != Step::Kind::compute) continue;
      chunks[c].settle();
      chunks[c].value = compute(steps[tick - c], chunks[c].value);
      poll();
    }
  }
  for (Chunk& ch : chunks) ch.settle();
  Shape out_shape = chunks[0].value.sizes();
  out_shape[0] = x.size(0);
  Tensor out = empty(out_shape, chunks[0].value.dtype(), x.device());
  for (size_t c = 0; c < k; ++c) {
    int64_t off = 0;
    for (const Block& b : p.chunks[c]) {
      copy_values(narrow(out, 0, b.start, b.count), narrow(chunks[c].value, 0, off, b.count));
      off += b.count;
    }
  }
  return out;
}

// The transform as one linear tape op; its backward is the adjoint, whose backward is the transform.
Tensor run(const Tensor& x, const std::shared_ptr<const Pipeline>& p, bool adjoint) {
  Tensor out = execute(x, *p, adjoint);
  if (should_record({x}))
    record_op(adjoint ? "pipelined_sht_adjoint" : "pipelined_sht", {x}, {&out}, {}, {},
              [p, adjoint](BackwardContext&, const std::vector<Tensor>& g) {
                return std::vector<Tensor>{run(g[0], p, !adjoint)};
              });
  return out;
}

// ---- the transforms as steps (the order of sphere_transforms.h)

Step to_fields(int64_t dim, int64_t global, const CommPtr& comm) {
  return {Step::Kind::to_fields, dim, global, comm, {}, 0, 0, DType::f64, DType::f64};
}
Step from_fields(int64_t dim, int64_t global, const CommPtr& comm) {
  return {Step::Kind::from_fields, dim, global, comm, {}, 0, 0, DType::f64, DType::f64};
}
Step kernel_step(int64_t dim, int64_t in_size, int64_t out_size, DType in_dtype, DType out_dtype, Kernel k) {
  return {Step::Kind::compute, dim, 0, nullptr, std::move(k), in_size, out_size, in_dtype, out_dtype};
}

// The chunks, by the blocks of the first transpose's group.
std::vector<FieldSet> chunks_for(const Pipeline& p, int64_t n_fields, int64_t k) {
  for (const Step& s : p.steps)
    if (s.kind != Step::Kind::compute) return chunk_fields(n_fields, s.comm->size(), k);
  return chunk_fields(n_fields, 1, k);
}

// The fields this rank's Legendre contraction holds in the unpipelined path.
int64_t legendre_batch(int64_t n_fields, const ProcessGrid& grid) {
  return grid.h_size() > 1 ? split_block(n_fields, grid.h_size(), grid.h_rank()).count : n_fields;
}

}  // namespace

int set_sht_pipeline_chunks(int chunks) {
  GS_CHECK(chunks >= 0, "set_sht_pipeline_chunks: expected 0 (automatic) or a chunk count >= 1, got {}", chunks);
  const int previous = sht_pipeline_chunks();
  chunk_setting().store(chunks);
  return previous;
}

int sht_pipeline_chunks() {
  int k = chunk_setting().load();
  if (k < 0) {
    k = chunks_from_environment();
    chunk_setting().store(k);
  }
  return k;
}

int64_t sht_pipeline_chunks_for(const ProcessGrid& grid) {
  const int setting = sht_pipeline_chunks();
  // No transposes to hide: unpipelined unless chunks are asked for by count (the kernels then run
  // chunk by chunk, which the tests and the registry use to check the op pair on one process).
  if (!grid.spatially_split()) return setting >= 2 ? setting : 1;
  // Automatic: unpipelined. On the CPU the pipelined path never paid (BENCHMARKS.md, "Pipelined
  // transposes": 2-52% slower at 2 ranks): MPI moves the data only inside its calls, on the core
  // that computes, and the chunks add copies of the fields.
  return setting >= 1 ? setting : 1;
}

Tensor pipelined_analysis(const Tensor& x, const ShtSpec& spec, const ProcessGrid& grid, bool vector, int64_t chunks) {
  const int64_t lat = vector ? 2 : 1, lon = lat + 1, n = x.size(0);
  const Block orders = local_orders(grid, spec.mmax);
  const DType real = x.dtype(), cplx = complex_dtype(x.dtype());
  auto p = std::make_shared<Pipeline>();
  if (grid.w_size() > 1) p->steps.push_back(to_fields(lon, spec.nlon, grid.comm(Group::w)));
  p->steps.push_back(kernel_step(lon, spec.nlon, spec.mmax, real, cplx, [m = spec.mmax](const Tensor& t) {
    return sphere::rfft_lon(t, m);
  }));
  if (grid.w_size() > 1) p->steps.push_back(from_fields(lon, spec.mmax, grid.comm(Group::w)));
  if (grid.h_size() > 1) p->steps.push_back(to_fields(lat, spec.nlat, grid.comm(Group::h)));
  p->steps.push_back(kernel_step(lat, spec.nlat, spec.lmax, cplx, cplx, [spec, vector, m0 = orders.start](const Tensor& t) {
    return vector ? sphere::vector_legendre_analysis_orders(t, spec, m0)
                  : sphere::legendre_analysis_orders(t, spec, m0);
  }));
  if (grid.h_size() > 1) p->steps.push_back(from_fields(lat, spec.lmax, grid.comm(Group::h)));
  p->chunks = chunks_for(*p, n, chunks);
  p->legendre_path = legendre_pin(spec, true, real, orders.start, orders.count, legendre_batch(n, grid));
  return run(x, p, false);
}

Tensor pipelined_synthesis(const Tensor& coeffs, const ShtSpec& spec, const ProcessGrid& grid, bool vector,
                           int64_t chunks) {
  const int64_t lat = vector ? 2 : 1, lon = lat + 1, n = coeffs.size(0);
  const Block orders = local_orders(grid, spec.mmax);
  const DType cplx = coeffs.dtype();
  auto p = std::make_shared<Pipeline>();
  if (grid.h_size() > 1) p->steps.push_back(to_fields(lat, spec.lmax, grid.comm(Group::h)));
  p->steps.push_back(kernel_step(lat, spec.lmax, spec.nlat, cplx, cplx, [spec, vector, m0 = orders.start](const Tensor& t) {
    return vector ? sphere::vector_legendre_synthesis_orders(t, spec, m0)
                  : sphere::legendre_synthesis_orders(t, spec, m0);
  }));
  if (grid.h_size() > 1) p->steps.push_back(from_fields(lat, spec.nlat, grid.comm(Group::h)));
  if (grid.w_size() > 1) p->steps.push_back(to_fields(lon, spec.mmax, grid.comm(Group::w)));
  p->steps.push_back(kernel_step(lon, spec.mmax, spec.nlon, cplx, real_dtype(cplx),
                                 [nlon = spec.nlon](const Tensor& t) { return sphere::irfft_lon(t, nlon); }));
  if (grid.w_size() > 1) p->steps.push_back(from_fields(lon, spec.nlon, grid.comm(Group::w)));
  p->chunks = chunks_for(*p, n, chunks);
  p->legendre_path = legendre_pin(spec, false, real_dtype(cplx), orders.start, orders.count, legendre_batch(n, grid));
  return run(coeffs, p, false);
}

}  // namespace gs::dist
