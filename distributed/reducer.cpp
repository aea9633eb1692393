#include "distributed/reducer.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "distributed/reducer_state.h"
#include "distributed/replica_check.h"
#include "engine/autograd/engine.h"
#include "engine/autograd/forward_ad.h"
#include "engine/autograd/grad_clip.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/record.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "ops/complex_ops.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace gs::dist {

Group reduction_group(const Distribution& d) {
  const bool h = d.splits(GridAxis::h), w = d.splits(GridAxis::w);
  if (h && w) return Group::replicas;
  if (h) return Group::data_w;
  if (w) return Group::data_h;
  return Group::world;
}

namespace {

void check_parameters(const std::vector<ReducedParameter>& params) {
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& p = params[i];
    GS_CHECK(p.tensor.defined() && p.tensor.is_leaf() && p.tensor.requires_grad(),
             "GradientReducer: parameter '{}' must be a leaf that requires grad, got {}", p.name,
             p.tensor.meta_str());
    GS_CHECK(is_differentiable(p.tensor.dtype()), "GradientReducer: parameter '{}' is {}; expected f32, f64, c64 or c128",
             p.name, p.tensor.meta_str());
    const Distribution& d = p.distribution;
    GS_CHECK(d.h_dim < p.tensor.dim() && d.w_dim < p.tensor.dim() && (d.h_dim < 0 || d.h_dim != d.w_dim),
             "GradientReducer: parameter '{}' ({}) is declared {}, but has no such dims", p.name, p.tensor.meta_str(),
             d.str());
    // One device for all: a bucket is one flat tensor, reduced where the gradients are.
    GS_CHECK(p.tensor.device() == params[0].tensor.device(),
             "GradientReducer: parameter '{}' is on {} but parameter '{}' is on {}; expected one device for all",
             p.name, p.tensor.device(), params[0].name, params[0].tensor.device());
    for (size_t j = 0; j < i; ++j)
      GS_CHECK(!params[j].tensor.is_same(p.tensor), "GradientReducer: parameters '{}' and '{}' are the same tensor",
               params[j].name, p.name);
  }
}

}  // namespace

// ---- buckets (both modes)

void GradientReducer::State::build(const std::vector<int>& order) {
  buckets.clear();
  bucket_of.assign(params.size(), -1);
  std::map<std::pair<int, int>, int> open;  // (group, dtype) -> bucket index
  for (int k : order) {
    const auto& p = params[k];
    std::pair<int, int> key{int(reduction_group(p.distribution)), int(p.tensor.dtype())};
    auto it = open.find(key);
    if (it == open.end()) {
      ReducerBucket b;
      b.group = reduction_group(p.distribution);
      b.dtype = p.tensor.dtype();
      buckets.push_back(std::move(b));
      it = open.emplace(key, static_cast<int>(buckets.size()) - 1).first;
    }
    ReducerBucket& b = buckets[it->second];
    b.params.push_back(k);
    b.elems += p.tensor.numel();
    bucket_of[k] = it->second;
    if (static_cast<size_t>(b.elems) * dtype_size(b.dtype) >= options.bucket_bytes) open.erase(it);
  }
  launch_order.clear();
  for (size_t b = 0; b < buckets.size(); ++b) launch_order.push_back(static_cast<int>(b));
}

void GradientReducer::State::fill(size_t bi, const std::vector<Tensor>& grads) {
  forward_ad::PrimalOnlyGuard ng;
  ReducerBucket& b = buckets[bi];
  const int64_t n = static_cast<int64_t>(b.params.size());
  const Device device = params[b.params[0]].tensor.device();
  b.flat = zeros({b.elems + n}, b.dtype, device);
  int64_t off = 0;
  std::vector<double> flags;
  for (int64_t q = 0; q < n; ++q) {
    const Tensor& t = params[b.params[q]].tensor;
    const Tensor& g = grads[static_cast<size_t>(q)];
    if (g.defined()) {
      GS_CHECK(g.sizes() == t.sizes() && g.dtype() == t.dtype(),
               "GradientReducer: the gradient of parameter '{}' is {}, expected the parameter's {}",
               params[b.params[q]].name, g.meta_str(), t.meta_str());
      copy_values(narrow(b.flat, 0, off, t.numel()), reshape(g.detach(), {t.numel()}));
    }
    flags.push_back(g.defined() ? 1.0 : 0.0);
    off += t.numel();
  }
  copy_values(narrow(b.flat, 0, b.elems, n), to_device_copy(from_vector(flags), device));
}

void GradientReducer::State::start(size_t bi, bool in_backward) {
  ReducerBucket& b = buckets[bi];
  b.work = grid.comm(b.group)->all_reduce_async(b.flat, ReduceOp::sum);
  stats.buckets_launched++;
  stats.bytes_reduced += static_cast<int64_t>(b.flat.numel() * dtype_size(b.dtype));
  if (in_backward) stats.launched_in_backward++;
}

void GradientReducer::State::launch_ready_in_order(bool in_backward) {
  while (next_launch < launch_order.size()) {
    const size_t bi = static_cast<size_t>(launch_order[next_launch]);
    ReducerBucket& b = buckets[bi];
    const bool complete = options.mode == ReducerMode::hooks ? b.ready == static_cast<int>(b.params.size())
                                                             : b.arrived || b.recorded || b.flushed;
    if (!complete) break;
    if (options.mode == ReducerMode::hooks) {
      std::vector<Tensor> grads;
      for (int k : b.params) grads.push_back(params[k].tensor.grad());
      fill(bi, grads);
    }
    if (!b.recorded) start(bi, in_backward);
    next_launch++;
  }
}

void GradientReducer::State::progress() {
  for (size_t pos = 0; pos < next_launch; ++pos)
    if (auto& w = buckets[static_cast<size_t>(launch_order[pos])].work) w->test();
}

std::vector<Tensor> GradientReducer::State::take_reduced(size_t bi) {
  forward_ad::PrimalOnlyGuard ng;
  ReducerBucket& b = buckets[bi];
  b.work->wait();
  b.work.reset();
  const int64_t n = static_cast<int64_t>(b.params.size());
  const auto flags = cast_copy(narrow(b.flat, 0, b.elems, n), DType::f64).to_vector<double>();
  std::vector<Tensor> out;
  int64_t off = 0;
  for (int64_t q = 0; q < n; ++q) {
    const Tensor& t = params[b.params[q]].tensor;
    // Undefined where no rank had a gradient: .grad stays undefined, as in one process.
    out.push_back(flags[q] < 0.5 ? Tensor() : reshape(narrow(b.flat, 0, off, t.numel()), t.sizes()));
    off += t.numel();
  }
  b.flat = Tensor();
  return out;
}

void GradientReducer::State::check_reduced(size_t bi, const std::vector<Tensor>& reduced) {
  if (!check_replicas_enabled()) return;
  forward_ad::PrimalOnlyGuard ng;
  const ReducerBucket& b = buckets[bi];
  for (size_t q = 0; q < reduced.size(); ++q)
    if (reduced[q].defined())
      maybe_check_replicated(reduced[q], *grid.comm(b.group),
                             fmt::format("the reduced gradient of parameter '{}'", params[b.params[q]].name));
}

void GradientReducer::State::store_reduced(size_t bi, const std::vector<Tensor>& reduced) {
  forward_ad::PrimalOnlyGuard ng;
  const ReducerBucket& b = buckets[bi];
  for (size_t q = 0; q < reduced.size(); ++q) {
    if (!reduced[q].defined()) continue;
    const auto& p = params[b.params[q]];
    Tensor g = p.tensor.grad();
    if (g.defined()) {
      // Hook mode: .grad held this rank's part, which the reduced value replaces. Tape mode (a
      // bucket whose node did not run): what backward had not touched, so the reduced value adds.
      copy_values(g, options.mode == ReducerMode::hooks ? reduced[q] : add(g.detach(), reduced[q]));
      bump_version(g);
    } else {
      p.tensor.set_grad(contiguous_copy(reduced[q], true));
    }
    maybe_check_replicated(p.tensor.grad(), *grid.comm(b.group),
                           fmt::format("the reduced gradient of parameter '{}'", p.name));
  }
}

void GradientReducer::State::end_pass_bookkeeping() {
  stats.passes++;
  reset_pass();
}

void GradientReducer::State::reset_pass() {
  std::fill(ready.begin(), ready.end(), 0);
  next_launch = 0;
  for (auto& b : buckets) {
    b.ready = 0;
    b.arrived = b.recorded = b.flushed = false;
  }
}

// ---- hook mode

void GradientReducer::State::on_ready(int k) {
  if (dead) return;
  if (!in_pass) {
    in_pass = true;
    std::weak_ptr<State> weak = shared_from_this();
    queue_backward_callback([weak] {
      if (auto s = weak.lock()) s->finish_hooks();
    });
  }
  if (!reduce_next || ready[k]) return;
  ready[k] = 1;
  if (!rebuilt) observed.push_back(k);
  buckets[bucket_of[k]].ready++;
  launch_ready_in_order(/*in_backward=*/true);
  progress();
}

void GradientReducer::State::finish_hooks() {
  in_pass = false;
  if (dead) return;
  if (!reduce_next) {
    reduce_next = true;
    return;
  }
  // Parameters that got no gradient this pass still take part (zeros), in bucket order.
  for (auto& b : buckets) b.ready = static_cast<int>(b.params.size());
  launch_ready_in_order(false);
  const double D = static_cast<double>(grid.data_size());
  for (int bi : launch_order) {
    std::vector<Tensor> reduced = take_reduced(static_cast<size_t>(bi));
    if (D > 1) {
      forward_ad::PrimalOnlyGuard ng;
      for (auto& r : reduced)
        if (r.defined()) r = mul(r, 1.0 / D);  // the replicas' mean
    }
    store_reduced(static_cast<size_t>(bi), reduced);
  }
  end_pass_bookkeeping();
  if (!rebuilt) rebuild_from_rank0_order();
}

// Rank 0's observed ready order, shared so every rank builds the same buckets.
void GradientReducer::State::rebuild_from_rank0_order() {
  std::vector<int64_t> order(observed.begin(), observed.end());
  std::vector<char> seen(params.size(), 0);
  for (int k : observed) seen[k] = 1;
  for (size_t k = 0; k < params.size(); ++k)
    if (!seen[k]) order.push_back(static_cast<int64_t>(k));
  Tensor t = from_vector(order);
  grid.comm(Group::world)->broadcast(t, 0);
  std::vector<int> o;
  for (auto v : t.to_vector<int64_t>()) o.push_back(static_cast<int>(v));
  build(o);
  rebuilt = true;
}

GradientReducer::GradientReducer(ProcessGrid grid, std::vector<ReducedParameter> params, ReducerOptions options)
    : state_(std::make_shared<State>()) {
  GS_CHECK(options.bucket_bytes > 0, "GradientReducer: expected bucket_bytes > 0");
  check_parameters(params);
  state_->grid = std::move(grid);
  state_->params = std::move(params);
  state_->options = options;
  state_->ready.assign(state_->params.size(), 0);
  state_->stash.assign(state_->params.size(), Tensor());
  std::vector<int> order;
  for (int k = static_cast<int>(state_->params.size()) - 1; k >= 0; --k) order.push_back(k);
  state_->build(order);
  // Hook mode: the hooks are the reducer. Tape mode: the bucket nodes of forward_scope() are, and
  // the hooks only refuse a gradient that went around them.
  std::weak_ptr<State> weak = state_;
  for (size_t k = 0; k < state_->params.size(); ++k)
    state_->params[k].tensor.register_post_accumulate_grad_hook([weak, k](const Tensor&) {
      if (auto s = weak.lock()) {
        if (s->options.mode == ReducerMode::hooks) {
          s->on_ready(static_cast<int>(k));
        } else {
          s->check_came_through_node(static_cast<int>(k));
        }
      }
    });
}

GradientReducer::~GradientReducer() {
  state_->dead = true;
  // A stash recorded under create_graph holds a graph that holds the nodes that hold the state.
  state_->stash.clear();
  for (auto& b : state_->buckets)
    if (b.work) b.work->wait();
}

void GradientReducer::prepare_for_backward(bool last) { state_->reduce_next = last; }

void GradientReducer::discard_pending() {
  state_->stash.assign(state_->params.size(), Tensor());
  state_->reduce_next = true;
}

double GradientReducer::loss_scale() const {
  return state_->options.mode == ReducerMode::tape ? 1.0 / static_cast<double>(state_->grid.data_size()) : 1.0;
}

ReducerMode GradientReducer::mode() const { return state_->options.mode; }

std::vector<std::vector<std::string>> GradientReducer::bucket_layout() const {
  std::vector<std::vector<std::string>> out;
  for (int bi : state_->launch_order) {
    out.emplace_back();
    for (int k : state_->buckets[static_cast<size_t>(bi)].params) out.back().push_back(state_->params[k].name);
  }
  return out;
}

const ReducerStats& GradientReducer::stats() const { return state_->stats; }

// ---- norms, clipping, the replicated loss term, the parameter check

namespace {
double sq_sum(const Tensor& g) {
  forward_ad::PrimalOnlyGuard ng;
  if (!g.device().is_cpu()) {  // on the device: one reduction read back, not the gradient itself
    const Tensor c = contiguous_copy(g.detach());
    const Tensor r = cast_copy(is_complex(c.dtype()) ? view_as_real(c) : c, DType::f64);
    return sum(mul(r, r)).item<double>();
  }
  double acc = 0.0;
  Tensor c = contiguous_copy(g.detach());
  if (is_complex(c.dtype())) {
    for (auto v : cast_copy(c, DType::c128).to_vector<c128>()) acc += std::norm(v);
  } else {
    for (auto v : cast_copy(c, DType::f64).to_vector<double>()) acc += v * v;
  }
  return acc;
}
}  // namespace

double global_grad_norm(const ProcessGrid& grid, const std::vector<ReducedParameter>& params) {
  // Squares of the replicated gradients count once; those of a shard are summed over the ranks
  // holding the other shards (h, w, or the whole spatial group for one split both ways).
  double repl = 0.0, by_h = 0.0, by_w = 0.0, by_hw = 0.0;
  for (const auto& p : params) {
    Tensor g = p.tensor.grad();
    if (!g.defined()) continue;
    const double s = sq_sum(g);
    const bool h = p.distribution.splits(GridAxis::h), w = p.distribution.splits(GridAxis::w);
    (h && w ? by_hw : h ? by_h : w ? by_w : repl) += s;
  }
  Tensor h = from_vector(std::vector<double>{by_h}), w = from_vector(std::vector<double>{by_w}),
         hw = from_vector(std::vector<double>{by_hw});
  grid.comm(Group::h)->all_reduce(h, ReduceOp::sum);
  grid.comm(Group::w)->all_reduce(w, ReduceOp::sum);
  grid.comm(Group::spatial)->all_reduce(hw, ReduceOp::sum);
  return std::sqrt(repl + h.item<double>() + w.item<double>() + hw.item<double>());
}

double clip_global_grad_norm(const ProcessGrid& grid, const std::vector<ReducedParameter>& params, double max_norm) {
  GS_CHECK(max_norm > 0 && !std::isnan(max_norm), "clip_global_grad_norm: expected max_norm > 0, got {}", max_norm);
  const double norm = global_grad_norm(grid, params);
  if (!std::isfinite(norm)) return norm;
  const double scale = grad_clip_factor(norm, max_norm);
  if (scale < 1) {
    forward_ad::PrimalOnlyGuard ng;
    for (const auto& p : params) {
      Tensor g = p.tensor.grad();
      if (!g.defined()) continue;
      copy_values(g, mul(g.detach(), scale));
      bump_version(g);
    }
  }
  return norm;
}

// A projection, so it is its own adjoint (and its own backward).
Tensor spatial_root_only(const Tensor& g, const ProcessGrid& grid) {
  GS_CHECK(g.defined(), "spatial_root_only: the tensor is undefined");
  Tensor out;
  {
    forward_ad::PrimalOnlyGuard ng;
    out = grid.group_rank(Group::spatial) == 0 ? contiguous_copy(g.detach(), true) : zeros_like(g);
  }
  if (should_record({g}))
    record_op("spatial_root_only", {g}, {&out}, {}, {}, [grid](BackwardContext&, const std::vector<Tensor>& gg) {
      return std::vector<Tensor>{spatial_root_only(gg[0], grid)};
    });
  return out;
}

Tensor replicated_loss_term(const Tensor& term, const ProcessGrid& grid) {
  GS_CHECK(term.defined(), "replicated_loss_term: the term is undefined");
  Tensor out = contiguous_copy(term.detach(), true);
  if (should_record({term}))
    record_op("replicated_loss_term", {term}, {&out}, {}, {}, [grid](BackwardContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{spatial_root_only(g[0], grid)};
    });
  return out;
}

void check_parameters_replicated(const ProcessGrid& grid, const std::vector<ReducedParameter>& params) {
  for (const auto& p : params) {
    Communicator& comm = *grid.comm(reduction_group(p.distribution));
    check_replicated(p.tensor, comm, fmt::format("parameter '{}' ({})", p.name, p.distribution.str()));
    Tensor g = p.tensor.grad();
    // Every rank must agree on whether there is a gradient before comparing them.
    Tensor has = from_vector(std::vector<int64_t>{g.defined() ? 1 : 0});
    comm.all_reduce(has, ReduceOp::sum);
    const int64_t n = has.item<int64_t>();
    GS_CHECK(n == 0 || n == comm.size(),
             "replica checker: parameter '{}' has a gradient on {} of the {} ranks of group '{}' (rank {} has {})",
             p.name, n, comm.size(), comm.name(), comm.rank(), g.defined() ? "one" : "none");
    if (n) check_replicated(g, comm, fmt::format("the gradient of parameter '{}'", p.name));
  }
}

}  // namespace gs::dist
