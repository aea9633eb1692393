#include "models/sharded_state.h"

#include <map>
#include <string>

#include "distributed/shards.h"

namespace gs::models {
namespace {

using Distributions = std::map<std::string, dist::Distribution>;

Distributions distributions_of(const Module& m) {
  Distributions d;
  for (const auto& p : m.named_parameters()) d[p.name] = p.distribution;
  for (const auto& b : m.named_buffers()) d[b.name] = b.distribution;
  return d;
}

// The distribution of a state-dict entry: its own name's, or (training state) that of the longest
// parameter name it ends with after a '.', when the ranks agree; replicated otherwise.
dist::Distribution entry_distribution(const std::string& key, const Tensor& t, const Distributions& d, bool suffix) {
  auto it = d.find(key);
  if (it != d.end()) return it->second;
  if (!suffix) return dist::Distribution::replicated();
  const std::string* best = nullptr;
  for (const auto& [name, dist] : d)
    if (key.size() > name.size() && key.compare(key.size() - name.size(), name.size(), name) == 0 &&
        key[key.size() - name.size() - 1] == '.' && (!best || name.size() > best->size()))
      best = &name;
  if (!best) return dist::Distribution::replicated();
  const dist::Distribution& found = d.at(*best);
  const bool fits = found.h_dim < t.dim() && found.w_dim < t.dim();
  return fits ? found : dist::Distribution::replicated();
}

template <typename F>
StateDict map_entries(const StateDict& in, const Module& m, bool suffix, F&& f) {
  const Distributions d = distributions_of(m);
  StateDict out;
  for (const auto& [key, t] : in) {
    const dist::Distribution dd = entry_distribution(key, t, d, suffix);
    out[key] = dd.sharded() ? f(t, dd) : t;
  }
  return out;
}

}  // namespace

StateDict whole_state_dict(const Module& module, const dist::ProcessGrid& grid) {
  const StateDict mine = module.state_dict();
  if (!grid.spatially_split()) return mine;
  return map_entries(mine, module, false, [&](const Tensor& t, const dist::Distribution& d) {
    return dist::gather_shards(t, d, grid);
  });
}

StateDict local_state_dict(const StateDict& whole, const Module& module, const dist::ProcessGrid& grid) {
  if (!grid.spatially_split()) return whole;
  return map_entries(whole, module, false, [&](const Tensor& t, const dist::Distribution& d) {
    return dist::local_shard(t, d, grid);
  });
}

StateDict whole_training_state(const StateDict& state, const Module& module, const dist::ProcessGrid& grid) {
  if (!grid.spatially_split()) return state;
  return map_entries(state, module, true, [&](const Tensor& t, const dist::Distribution& d) {
    return dist::gather_shards(t, d, grid);
  });
}

StateDict local_training_state(const StateDict& whole, const Module& module, const dist::ProcessGrid& grid) {
  if (!grid.spatially_split()) return whole;
  return map_entries(whole, module, true, [&](const Tensor& t, const dist::Distribution& d) {
    return dist::local_shard(t, d, grid);
  });
}

}  // namespace gs::models
