// The request check every TrajectorySource shares (trajectory_source.h).
#include "models/data/trajectory_source.h"

#include "engine/error.h"

namespace gs::models {

void TrajectorySource::check_request(int64_t trajectory, int64_t first, int64_t n, Span& rows, Span& cols) const {
  const TrajectoryInfo& i = info();
  GS_CHECK(trajectory >= 0 && trajectory < i.trajectories(),
           "reading trajectory {}: out of range (the data has {} trajectories)", trajectory, i.trajectories());
  const int64_t T = i.states[static_cast<size_t>(trajectory)];
  GS_CHECK(n >= 1 && first >= 0 && first + n <= T,
           "reading states {}..{} of trajectory {}: out of range (it has {} states)", first, first + n - 1, trajectory,
           T);
  auto fill = [](Span& s, int64_t size, const char* what) {
    if (s.count == 0 && s.start == 0) s.count = size;
    GS_CHECK(s.start >= 0 && s.count >= 1 && s.start + s.count <= size,
             "reading {} [{}, {}): out of range (the grid has {})", what, s.start, s.start + s.count, size);
  };
  fill(rows, i.nlat, "latitude rows");
  fill(cols, i.nlon, "longitude columns");
}

}  // namespace gs::models
