#include "distributed/dist_gradcheck.h"

#include <algorithm>
#include <cmath>

#include "engine/autograd/engine.h"
#include "engine/autograd/forward_ad.h"
#include "engine/autograd/grad_mode.h"
#include "engine/error.h"
#include "engine/factory.h"

namespace gs::dist {
namespace {

using Matrix = std::vector<std::vector<double>>;  // [global input real index][global output real index]

int width(DType d) { return is_complex(d) ? 2 : 1; }

// Whether this rank's copy of a tensor is the one the global vector counts.
bool represented(const ProcessGrid& grid, const Placement& p) {
  return !p.replicated || grid.group_rank(p.group) == 0;
}
// Whether this rank holds (a copy of) the element that world rank `owner` represents.
bool holds(const ProcessGrid& grid, int64_t owner, const Placement& p) {
  return p.replicated ? grid.in_my_group(owner, p.group) : owner == grid.world_rank();
}

void append_real(std::vector<double>& out, const Tensor& t) {
  if (is_complex(t.dtype())) {
    for (auto v : t.to_vector<c128>()) out.push_back(v.real()), out.push_back(v.imag());
  } else {
    for (auto v : t.to_vector<double>()) out.push_back(v);
  }
}

// Every rank's vector, concatenated in world-rank order (the same on every rank).
std::vector<double> gather_all(Communicator& world, const std::vector<double>& mine) {
  Tensor n = empty({world.size()}, DType::i64);
  world.all_gather(from_vector(std::vector<int64_t>{static_cast<int64_t>(mine.size())}), n,
                   std::vector<int64_t>(world.size(), 1));
  std::vector<int64_t> counts = n.to_vector<int64_t>();
  int64_t total = 0;
  for (auto c : counts) total += c;
  Tensor recv = empty({total}, DType::f64);
  world.all_gather(from_vector(mine.empty() ? std::vector<double>{} : mine, {static_cast<int64_t>(mine.size())}), recv,
                   counts);
  return recv.to_vector<double>();
}

// The represented, differentiable entries of `ts` on this rank, as real numbers.
std::vector<double> local_flat(const ProcessGrid& grid, const std::vector<Tensor>& ts, const std::vector<Placement>& pl,
                               const std::vector<bool>& counted) {
  std::vector<double> out;
  for (size_t i = 0; i < ts.size(); ++i)
    if (counted[i] && represented(grid, pl[i])) append_real(out, ts[i]);
  return out;
}

// Contiguous: the numerical Jacobian perturbs elements through data<T>()[e].
std::vector<Tensor> fresh(const std::vector<Tensor>& inputs) { return fresh_leaves(inputs, LeafLayout::contiguous); }

// counts[r][i]: real entries of tensor i that world rank r contributes to the global vector.
std::vector<std::vector<int64_t>> count_table(const ProcessGrid& grid, Communicator& world,
                                              const std::vector<Tensor>& ts, const std::vector<Placement>& pl,
                                              const std::vector<bool>& counted) {
  std::vector<double> mine;
  for (size_t i = 0; i < ts.size(); ++i)
    mine.push_back(counted[i] && represented(grid, pl[i]) ? double(ts[i].numel() * width(ts[i].dtype())) : 0.0);
  auto all = gather_all(world, mine);
  std::vector<std::vector<int64_t>> table(world.size(), std::vector<int64_t>(ts.size()));
  for (int r = 0; r < world.size(); ++r)
    for (size_t i = 0; i < ts.size(); ++i) table[r][i] = static_cast<int64_t>(all[r * ts.size() + i]);
  return table;
}

void check_sample(const DistSample& s, const char* who) {
  GS_CHECK(s.inputs.size() == s.input_placement.size(), "{} [{}]: {} inputs but {} input placements", who, s.label,
           s.inputs.size(), s.input_placement.size());
  GS_CHECK(static_cast<bool>(s.fn), "{} [{}]: the sample has no function", who, s.label);
}

std::vector<Tensor> checked_outputs(const DistSample& s, const std::vector<Tensor>& outs, const char* who) {
  GS_CHECK(outs.size() == s.output_placement.size(), "{} [{}]: the function returned {} outputs but {} placements",
           who, s.label, outs.size(), s.output_placement.size());
  return outs;
}

struct Layout {
  std::vector<bool> counted;                 // per tensor: requires grad (inputs) / differentiable (outputs)
  std::vector<std::vector<int64_t>> table;   // count_table
};

// Locates a global real index: "rank 2, input 0, element 5 (imag)".
std::string locate(const Layout& L, const std::vector<Tensor>& ts, size_t index, const char* kind) {
  for (size_t r = 0; r < L.table.size(); ++r)
    for (size_t i = 0; i < ts.size(); ++i) {
      const auto n = static_cast<size_t>(L.table[r][i]);
      if (index < n) {
        const int w = width(ts[i].dtype());
        return fmt::format("rank {} {} {} element {}{}", r, kind, i, index / w,
                           w == 2 ? (index % 2 ? " (imag)" : " (real)") : "");
      }
      index -= n;
    }
  return "?";
}

}  // namespace

GradcheckReport dist_gradcheck(const ProcessGrid& grid, const DistSample& s, const GradcheckOptions& opt) {
  check_sample(s, "dist_gradcheck");
  GradModeGuard on(true);
  Communicator& world = *grid.comm(Group::world);
  GradcheckReport rep;

  Layout in;
  for (const auto& x : s.inputs) {
    const bool c = x.defined() && x.requires_grad();
    if (c)
      GS_CHECK(x.dtype() == DType::f64 || x.dtype() == DType::c128,
               "dist_gradcheck [{}]: an input is {}; finite differences need f64 or c128", s.label, x.meta_str());
    in.counted.push_back(c);
  }
  in.table = count_table(grid, world, s.inputs, s.input_placement, in.counted);

  auto outs0 = checked_outputs(s, s.fn(fresh(s.inputs)), "dist_gradcheck");
  Layout out;
  for (const auto& o : outs0) out.counted.push_back(o.defined() && is_differentiable(o.dtype()));
  out.table = count_table(grid, world, outs0, s.output_placement, out.counted);
  auto eval_global = [&](const std::vector<Tensor>& xs) {
    auto outs = checked_outputs(s, s.fn(xs), "dist_gradcheck");
    return gather_all(world, local_flat(grid, outs, s.output_placement, out.counted));
  };
  const size_t n_out = eval_global(fresh(s.inputs)).size();

  // Numerical: perturb each global input entry where it lives.
  Matrix num;
  for (size_t r = 0; r < in.table.size(); ++r)
    for (size_t i = 0; i < s.inputs.size(); ++i)
      for (int64_t e = 0; e < in.table[r][i]; ++e) {
        const int w = width(s.inputs[i].dtype());
        auto eval = [&](double delta) {
          auto xs = fresh(s.inputs);
          if (holds(grid, static_cast<int64_t>(r), s.input_placement[i])) {
            if (w == 2) xs[i].data<c128>()[e / 2] += e % 2 == 0 ? c128(delta, 0) : c128(0, delta);
            else xs[i].data<double>()[e] += delta;
          }
          return eval_global(xs);
        };
        auto plus = eval(opt.eps), minus = eval(-opt.eps);
        std::vector<double> row(n_out);
        for (size_t k = 0; k < n_out; ++k) row[k] = (plus[k] - minus[k]) / (2 * opt.eps);
        num.push_back(std::move(row));
      }

  // Analytical: seed each global output entry where it lives, backward everywhere.
  auto analytical = [&] {
    auto xs = fresh(s.inputs);
    std::vector<Tensor> diff;
    for (size_t i = 0; i < xs.size(); ++i)
      if (in.counted[i]) diff.push_back(xs[i]);
    auto outs = checked_outputs(s, s.fn(xs), "dist_gradcheck");
    Matrix J(num.size(), std::vector<double>(n_out, 0.0));
    size_t col = 0;
    for (size_t r = 0; r < out.table.size(); ++r)
      for (size_t o = 0; o < outs.size(); ++o)
        for (int64_t e = 0; e < out.table[r][o]; ++e, ++col) {
          std::vector<Tensor> roots, gos;
          for (size_t q = 0; q < outs.size(); ++q) {
            if (!out.counted[q] || !outs[q].requires_grad()) continue;
            Tensor go = zeros_like(outs[q]);
            if (q == o && holds(grid, static_cast<int64_t>(r), s.output_placement[o])) {
              if (is_complex(go.dtype())) go.data<c128>()[e / 2] = e % 2 == 0 ? c128(1, 0) : c128(0, 1);
              else go.data<double>()[e] = 1.0;
            }
            roots.push_back(outs[q]);
            gos.push_back(go);
          }
          std::vector<double> mine;
          if (!roots.empty()) {
            auto g = grad(roots, diff, gos, {.retain_graph = true, .allow_unused = true});
            size_t d = 0;
            for (size_t i = 0; i < xs.size(); ++i) {
              if (!in.counted[i]) continue;
              Tensor gi = g[d++];
              if (represented(grid, s.input_placement[i])) append_real(mine, gi.defined() ? gi : zeros_like(xs[i]));
            }
          } else {
            mine = std::vector<double>(local_flat(grid, xs, s.input_placement, in.counted).size(), 0.0);
          }
          auto column = gather_all(world, mine);
          GS_CHECK(column.size() == J.size(), "dist_gradcheck [{}]: backward gave {} input gradient values, expected {}",
                   s.label, column.size(), J.size());
          for (size_t k = 0; k < J.size(); ++k) J[k][col] = column[k];
        }
    return J;
  };
  Matrix ana = analytical();
  for (size_t r = 0; r < num.size(); ++r)
    for (size_t k = 0; k < n_out; ++k) {
      const double a = ana[r][k], n = num[r][k], err = std::abs(a - n);
      rep.max_abs_error = std::max(rep.max_abs_error, err);
      if (std::abs(n) >= 1e-6) rep.max_rel_error = std::max(rep.max_rel_error, err / std::abs(n));
      if (!(err <= opt.atol + opt.rtol * std::abs(n)) && rep.ok) {
        rep.ok = false;
        rep.failure = fmt::format("[{}] Jacobian mismatch for {} and {}: analytical {:.10g}, numerical {:.10g}",
                                  s.label, locate(in, s.inputs, r, "input"), locate(out, outs0, k, "output"), a, n);
      }
    }
  if (rep.ok) {
    Matrix again = analytical();
    for (size_t r = 0; r < ana.size() && rep.ok; ++r)
      for (size_t k = 0; k < n_out; ++k)
        if (std::abs(again[r][k] - ana[r][k]) > opt.nondet_tol) {
          rep.ok = false;
          rep.failure = fmt::format("[{}] backward is not reentrant: {:.17g} then {:.17g} for {}", s.label, ana[r][k],
                                    again[r][k], locate(in, s.inputs, r, "input"));
          break;
        }
  }
  return rep;
}

GradcheckReport dist_gradgradcheck(const ProcessGrid& grid, const DistSample& s, const GradcheckOptions& opt) {
  check_sample(s, "dist_gradgradcheck");
  GradModeGuard on(true);
  auto outs = checked_outputs(s, s.fn(fresh(s.inputs)), "dist_gradgradcheck");
  DistSample g;
  g.label = s.label + ", second order";
  g.inputs = s.inputs;
  g.input_placement = s.input_placement;
  const size_t n_in = s.inputs.size();
  std::vector<size_t> v_of;  // output index of each v
  for (size_t o = 0; o < outs.size(); ++o) {
    if (!outs[o].defined() || !is_differentiable(outs[o].dtype()) || !outs[o].requires_grad()) continue;
    Tensor v = dist_sample_leaf(grid, outs[o].sizes(), {opt.key.seed, opt.key.stream + 17 * o}, s.output_placement[o],
                                outs[o].dtype());
    g.inputs.push_back(v);
    g.input_placement.push_back(s.output_placement[o]);
    v_of.push_back(o);
  }
  GS_CHECK(!v_of.empty(), "dist_gradgradcheck [{}]: no output requires grad", s.label);
  for (size_t i = 0; i < n_in; ++i)
    if (s.inputs[i].defined() && s.inputs[i].requires_grad()) g.output_placement.push_back(s.input_placement[i]);
  auto f = s.fn;
  g.fn = [f, n_in, v_of](const std::vector<Tensor>& xs) {
    std::vector<Tensor> in(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(n_in));
    std::vector<Tensor> diff;
    for (const auto& x : in)
      if (x.defined() && x.requires_grad()) diff.push_back(x);
    auto outs = f(in);
    std::vector<Tensor> roots, vs;
    for (size_t k = 0; k < v_of.size(); ++k) roots.push_back(outs[v_of[k]]), vs.push_back(xs[n_in + k]);
    auto gr = grad(roots, diff, vs, {.create_graph = true, .allow_unused = true});
    for (size_t i = 0; i < gr.size(); ++i)
      if (!gr[i].defined()) gr[i] = zeros_like(diff[i]);
    return gr;
  };
  return dist_gradcheck(grid, g, opt);
}

GradcheckReport dist_adjoint_check(const ProcessGrid& grid, const DistSample& s, RandomKey key, double rtol) {
  check_sample(s, "dist_adjoint_check");
  GS_CHECK(s.linear, "dist_adjoint_check [{}]: the function is not linear", s.label);
  GradModeGuard on(true);
  Communicator& world = *grid.comm(Group::world);
  auto xs = fresh(s.inputs);
  std::vector<Tensor> diff;
  std::vector<Placement> diff_pl;
  for (size_t i = 0; i < xs.size(); ++i)
    if (xs[i].defined() && xs[i].requires_grad()) diff.push_back(xs[i]), diff_pl.push_back(s.input_placement[i]);
  auto outs = checked_outputs(s, s.fn(xs), "dist_adjoint_check");
  std::vector<Tensor> roots, ys;
  std::vector<Placement> root_pl;
  for (size_t o = 0; o < outs.size(); ++o) {
    if (!outs[o].defined() || !outs[o].requires_grad()) continue;
    roots.push_back(outs[o]);
    root_pl.push_back(s.output_placement[o]);
    Tensor y = dist_sample_leaf(grid, outs[o].sizes(), {key.seed, key.stream + 31 * o}, s.output_placement[o],
                                outs[o].dtype());
    ys.push_back(y.detach());
  }
  auto aty = grad(roots, diff, ys, {.allow_unused = true});
  // Real inner products of represented entries, summed over ranks, with the sum of the terms'
  // magnitudes: rounding is relative to that, not to the (possibly cancelling) result.
  struct Dot {
    double value = 0.0, magnitude = 0.0;
  };
  auto dot = [&](const std::vector<Tensor>& a, const std::vector<Tensor>& b, const std::vector<Placement>& pl) {
    double acc = 0.0, mag = 0.0;
    for (size_t k = 0; k < a.size(); ++k) {
      if (!represented(grid, pl[k]) || !b[k].defined()) continue;
      std::vector<double> va, vb;
      append_real(va, a[k]);
      append_real(vb, b[k]);
      for (size_t e = 0; e < va.size(); ++e) acc += va[e] * vb[e], mag += std::abs(va[e] * vb[e]);
    }
    Tensor t = from_vector(std::vector<double>{acc, mag});
    world.all_reduce(t, ReduceOp::sum);
    const auto v = t.to_vector<double>();
    return Dot{v[0], v[1]};
  };
  std::vector<Tensor> outs_detached;
  for (auto& r : roots) outs_detached.push_back(r.detach());
  const Dot l = dot(outs_detached, ys, root_pl), r = dot(diff, aty, diff_pl);
  const double lhs = l.value, rhs = r.value;
  GradcheckReport rep;
  rep.max_abs_error = std::abs(lhs - rhs);
  rep.max_rel_error = rep.max_abs_error / std::max({l.magnitude, r.magnitude, 1e-300});
  if (!(rep.max_rel_error <= rtol) && !(rep.max_abs_error == 0.0)) {
    rep.ok = false;
    rep.failure = fmt::format("[{}] adjoint identity fails: <A x, y> = {:.17g} but <x, A^T y> = {:.17g} (relative to the terms' magnitude {:.3g})",
                              s.label, lhs, rhs, rep.max_rel_error);
  }
  return rep;
}

}  // namespace gs::dist

namespace gs::dist {
namespace {

// x + scale * t on a contiguous fresh copy (same requires_grad as x).
Tensor shifted(const Tensor& x, const Tensor& t, double scale) {
  Tensor out = contiguous_copy(x.detach(), true);
  const Tensor tc = contiguous_copy(t, true);
  if (is_complex(out.dtype())) {
    c128* o = out.data<c128>();
    const c128* d = tc.data<c128>();
    for (int64_t e = 0; e < out.numel(); ++e) o[e] += scale * d[e];
  } else {
    double* o = out.data<double>();
    const double* d = tc.data<double>();
    for (int64_t e = 0; e < out.numel(); ++e) o[e] += scale * d[e];
  }
  if (x.requires_grad()) out.set_requires_grad(true);
  return out;
}

std::vector<double> real_values(const Tensor& t) {
  std::vector<double> v;
  append_real(v, contiguous_copy(t, true));
  return v;
}

}  // namespace

GradcheckReport dist_jvpcheck(const ProcessGrid& grid, const DistSample& s, const GradcheckOptions& opt) {
  check_sample(s, "dist_jvpcheck");
  GradModeGuard on(true);
  Communicator& world = *grid.comm(Group::world);
  // A global tangent: replicated inputs get the same tangent on every copy.
  std::vector<Tensor> t(s.inputs.size());
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    const Tensor& x = s.inputs[i];
    if (!x.defined() || !x.requires_grad()) continue;
    GS_CHECK(x.dtype() == DType::f64 || x.dtype() == DType::c128,
             "dist_jvpcheck [{}]: an input is {}; finite differences need f64 or c128", s.label, x.meta_str());
    t[i] = dist_sample_leaf(grid, x.sizes(), {opt.key.seed + 5, opt.key.stream + 13 * i}, s.input_placement[i],
                            x.dtype()).detach();
  }
  auto tangents = [&](bool with_reverse) {
    forward_ad::DualLevel level;
    auto xs = fresh(s.inputs);
    for (size_t i = 0; i < xs.size(); ++i)
      if (t[i].defined()) xs[i] = forward_ad::make_dual(with_reverse ? xs[i] : xs[i].detach(), t[i]);
    auto outs = checked_outputs(s, s.fn(xs), "dist_jvpcheck");
    std::vector<Tensor> r(outs.size());
    for (size_t o = 0; o < outs.size(); ++o) {
      if (!outs[o].defined() || !is_differentiable(outs[o].dtype())) continue;
      Tensor tg = forward_ad::tangent_of(outs[o]);
      r[o] = tg.defined() ? contiguous_copy(tg, true) : zeros_like(outs[o].detach());
    }
    return r;
  };
  const auto jt = tangents(true), jt_plain = tangents(false);
  auto evaluate = [&](double scale) {
    auto xs = fresh(s.inputs);
    for (size_t i = 0; i < xs.size(); ++i)
      if (t[i].defined()) xs[i] = shifted(xs[i], t[i], scale);
    return checked_outputs(s, s.fn(xs), "dist_jvpcheck");
  };
  const auto plus = evaluate(opt.eps), minus = evaluate(-opt.eps);

  // This rank's worst element: excess over the tolerance (> 1 fails) and what it was.
  double excess = 0, where_o = -1, where_e = -1, got = 0, want = 0, kind = 0;
  for (size_t o = 0; o < jt.size(); ++o) {
    if (!jt[o].defined() || !represented(grid, s.output_placement[o])) continue;
    const auto a = real_values(jt[o]), b = real_values(jt_plain[o]);
    const auto p = real_values(plus[o]), m = real_values(minus[o]);
    for (size_t e = 0; e < a.size(); ++e) {
      const double num = (p[e] - m[e]) / (2 * opt.eps);
      const double x1 = std::abs(a[e] - num) / (opt.atol + opt.rtol * std::abs(num));
      const double x2 = std::abs(a[e] - b[e]) / (1e-12 * (1.0 + std::abs(a[e])));
      if (x1 > excess) excess = x1, where_o = double(o), where_e = double(e), got = a[e], want = num, kind = 0;
      if (x2 > excess) excess = x2, where_o = double(o), where_e = double(e), got = a[e], want = b[e], kind = 1;
    }
  }
  const auto all = gather_all(world, {excess, where_o, where_e, got, want, kind});
  GradcheckReport rep;
  size_t worst = 0;
  for (size_t r = 0; r < all.size() / 6; ++r)
    if (all[r * 6] > all[worst * 6]) worst = r;
  if (all[worst * 6] > 1.0) {
    const double* w = &all[worst * 6];
    rep.ok = false;
    rep.failure = fmt::format("[{}] rank {} output {} element {}: forward mode {:.10g}, {} {:.10g}", s.label, worst,
                              static_cast<int64_t>(w[1]), static_cast<int64_t>(w[2]), w[3],
                              w[5] == 0 ? "central differences" : "without reverse mode", w[4]);
    return rep;
  }

  // Transpose identity: <J t, u> = <t, J^T u>, represented entries summed over ranks.
  auto xs = fresh(s.inputs);
  std::vector<Tensor> diff, diff_t;
  std::vector<Placement> diff_pl;
  for (size_t i = 0; i < xs.size(); ++i)
    if (t[i].defined()) diff.push_back(xs[i]), diff_t.push_back(t[i]), diff_pl.push_back(s.input_placement[i]);
  auto outs = checked_outputs(s, s.fn(xs), "dist_jvpcheck");
  std::vector<Tensor> roots, us, jts;
  double lhs = 0, rhs = 0, magnitude = 0;
  for (size_t o = 0; o < outs.size(); ++o) {
    if (!jt[o].defined() || !outs[o].requires_grad()) continue;
    Tensor u = dist_sample_leaf(grid, outs[o].sizes(), {opt.key.seed + 9, opt.key.stream + 31 * o},
                                s.output_placement[o], outs[o].dtype()).detach();
    roots.push_back(outs[o]), us.push_back(u);
    if (!represented(grid, s.output_placement[o])) continue;
    const auto a = real_values(u), b = real_values(jt[o]);
    for (size_t e = 0; e < a.size(); ++e) lhs += a[e] * b[e], magnitude += std::abs(a[e] * b[e]);
  }
  if (!roots.empty()) {
    auto g = grad(roots, diff, us, {.allow_unused = true});
    for (size_t i = 0; i < diff.size(); ++i) {
      if (!g[i].defined() || !represented(grid, diff_pl[i])) continue;
      const auto a = real_values(diff_t[i]), b = real_values(g[i]);
      for (size_t e = 0; e < a.size(); ++e) rhs += a[e] * b[e], magnitude += std::abs(a[e] * b[e]);
    }
  }
  Tensor sums = from_vector(std::vector<double>{lhs, rhs, magnitude});
  world.all_reduce(sums, ReduceOp::sum);
  const auto v = sums.to_vector<double>();
  rep.max_abs_error = std::abs(v[0] - v[1]);
  rep.max_rel_error = rep.max_abs_error / std::max(v[2], 1e-300);
  if (rep.max_rel_error > 1e-10) {
    rep.ok = false;
    rep.failure = fmt::format("[{}] transpose identity fails: <J t, u> = {:.17g} but <t, J^T u> = {:.17g}", s.label,
                              v[0], v[1]);
  }
  return rep;
}

}  // namespace gs::dist
