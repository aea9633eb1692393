// A view of a data source with some of its channels, in role order with their roles: how the
// `variables` of a configuration (variables.h) apply to data that is not read from files (the
// generated shallow-water sets). The NetCDF reader takes the requests itself (netcdf_io.h), reading
// only what they name.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "models/data/trajectory_source.h"
#include "models/data/variables.h"

namespace gs::models {

// The channels `requests` name (exact channel names; a level selection is refused: such a source
// has no level coordinate), in role order. An unknown name is an error listing the source's
// channels, naming `what` (e.g. "the generated shallow-water data"); the channels not asked for are
// listed in the view's notes.
std::shared_ptr<TrajectorySource> select_variables(std::shared_ptr<TrajectorySource> source,
                                                   const std::vector<VariableRequest>& requests,
                                                   const std::string& what);

}  // namespace gs::models
