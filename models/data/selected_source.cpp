// Channel selection over any source (selected_source.h).
#include "models/data/selected_source.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/error.h"
#include "ops/shape_ops.h"
#include "ops/view.h"

namespace gs::models {
namespace {

class SelectedSource final : public TrajectorySource {
 public:
  SelectedSource(std::shared_ptr<TrajectorySource> base, std::vector<int64_t> channels, TrajectoryInfo info)
      : base_(std::move(base)), channels_(std::move(channels)), info_(std::move(info)) {}
  const TrajectoryInfo& info() const override { return info_; }
  Tensor read(int64_t trajectory, int64_t first, int64_t n, Span rows, Span cols) const override {
    check_request(trajectory, first, n, rows, cols);
    const Tensor all = base_->read(trajectory, first, n, rows, cols);  // (n, C_base, rows, cols)
    std::vector<Tensor> picked;
    for (int64_t c : channels_) picked.push_back(narrow(all, 1, c, 1));
    return contiguous_copy(cat(picked, 1));
  }

 private:
  std::shared_ptr<TrajectorySource> base_;
  std::vector<int64_t> channels_;  // base channel of each of this view's channels
  TrajectoryInfo info_;
};

}  // namespace

std::shared_ptr<TrajectorySource> select_variables(std::shared_ptr<TrajectorySource> source,
                                                   const std::vector<VariableRequest>& requests,
                                                   const std::string& what) {
  GS_CHECK(source != nullptr, "select_variables: no source");
  const TrajectoryInfo& base = source->info();
  const std::vector<VariableRequest> ordered = in_role_order(requests);
  TrajectoryInfo info = base;
  info.variables.clear();
  info.units.clear();
  info.roles.clear();
  info.levels.clear();
  std::vector<int64_t> channels;
  for (const auto& r : ordered) {
    auto it = std::find(base.variables.begin(), base.variables.end(), r.name);
    GS_CHECK(it != base.variables.end(), "variables: {} has no variable '{}' (it has: {})", what, r.name,
             fmt::join(base.variables, ", "));
    GS_CHECK(r.levels.all(), "variables: '{}' of {} is a single-level field; it has no levels to select", r.name, what);
    const int64_t c = it - base.variables.begin();
    channels.push_back(c);
    info.variables.push_back(r.name);
    if (!base.units.empty()) info.units.push_back(base.units[static_cast<size_t>(c)]);
    info.roles.push_back(r.role);
    if (!base.levels.empty()) info.levels.push_back(base.levels[static_cast<size_t>(c)]);
  }
  (void)layout_of(info.roles, info.channels());  // at least one predicted channel
  std::vector<std::string> unused;
  for (const auto& v : base.variables)
    if (std::find(info.variables.begin(), info.variables.end(), v) == info.variables.end()) unused.push_back(v);
  if (!unused.empty())
    info.notes.push_back(fmt::format("{}: not used (not in data.variables): {}", what, fmt::join(unused, ", ")));
  return std::make_shared<SelectedSource>(std::move(source), std::move(channels), std::move(info));
}

}  // namespace gs::models
