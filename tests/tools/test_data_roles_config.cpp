// The configuration of climate data (tools/train_config.h): data.variables with roles and levels,
// loss weights and residual scaling, the forced shallow-water keys; and what train_setup makes of
// them (loss_scales, the run log's account of the variables).
#include <doctest/doctest.h>

#include <cmath>

#include "tests/test_util.h"
#include "tools/train_config.h"
#include "tools/train_setup.h"

using namespace gs;
using namespace gs::tools;
using gs_test::contains;
using gs_test::error_of;

namespace {

std::string err(const std::string& text) { return error_of([&] { train_config_from_string(text, "bad.yaml"); }); }

// Channels T_0..T_2 (prognostic, levels of T), SST (forcing), PR (diagnostic).
models::TrajectoryInfo climate_info() {
  models::TrajectoryInfo i;
  i.variables = {"T_0", "T_1", "T_2", "PS", "SST", "PR"};
  i.roles = {models::VariableRole::prognostic, models::VariableRole::prognostic, models::VariableRole::prognostic,
             models::VariableRole::prognostic, models::VariableRole::forcing, models::VariableRole::diagnostic};
  for (int64_t k = 0; k < 3; ++k) i.levels.push_back({"lev", "hPa", 1000.0 - 250.0 * static_cast<double>(k), k});
  for (int k = 0; k < 3; ++k) i.levels.push_back({});
  i.units = {"K", "K", "K", "Pa", "K", "kg m-2 s-1"};
  return i;
}

}  // namespace

TEST_CASE("data roles config: a flat list is all prognostic; the roles form takes levels by value or index") {
  TrainConfig flat = train_config_from_string("data:\n  variables: [a, b]\n", "flat.yaml");
  REQUIRE(flat.data.variables.size() == 2);
  CHECK(flat.data.variables[1].name == "b");
  CHECK(flat.data.variables[1].role == models::VariableRole::prognostic);
  TrainConfig roles = train_config_from_string(
      "data:\n  variables:\n    diagnostic: [PR]\n    forcing: [SST, {land: {}}]\n"
      "    prognostic: [PS, {T: {levels: [850, 500]}}, {Q: {level_indices: [3, 0]}}]\n",
      "roles.yaml");
  const auto& v = roles.data.variables;
  REQUIRE(v.size() == 6);
  CHECK(v[0].name == "PS");
  CHECK(v[1].name == "T");
  CHECK(v[1].levels.values == std::vector<double>{850, 500});
  CHECK(v[2].levels.indices == std::vector<int64_t>{3, 0});
  CHECK(v[3].name == "SST");
  CHECK(v[3].role == models::VariableRole::forcing);
  CHECK(v[4].name == "land");
  CHECK(v[5].role == models::VariableRole::diagnostic);
  // The flat netcdf list of earlier versions still reads (all prognostic).
  TrainConfig old = train_config_from_string(
      "data:\n  source: netcdf\n  netcdf:\n    train_files: [a.nc]\n    validation_files: [b.nc]\n    variables: [z]\n"
      "    join: time\n    lat_name: latitude\n",
      "old.yaml");
  REQUIRE(old.data.variables.size() == 1);
  CHECK(old.data.netcdf.join == models::NetcdfJoin::time);
  CHECK(old.data.netcdf.lat_name == "latitude");
}

TEST_CASE("data roles config: bad variables and loss sections are errors naming the key") {
  CHECK(contains(err("data:\n  variables:\n    forcing: [SST]\n"), "at least one prognostic or diagnostic"));
  CHECK(contains(err("data:\n  variables: [a, a]\n"), "'a' is listed twice"));
  CHECK(contains(err("data:\n  variables:\n    prognostic: [a]\n    forcing: [a]\n"), "'a' is listed twice"));
  CHECK(contains(err("data:\n  variables:\n    prognostics: [a]\n"), "prognostics"));
  CHECK(contains(err("data:\n  variables: [{T: {levelz: [1]}}]\n"), "levelz"));
  CHECK(contains(err("data:\n  variables: [{T: 3}]\n"), "data.variables[0]"));
  CHECK(contains(err("data:\n  variables: [{T: {level_indices: [-1]}}]\n"), "level_indices"));
  CHECK(contains(err("loss:\n  weights: {T: -1}\n"), "loss.weights.T"));
  CHECK(contains(err("loss:\n  residual_scaling: maybe\n"), "loss.residual_scaling"));
  CHECK(contains(err("data:\n  swe:\n    forcing_amplitude: 1\n"), "data.swe.forcing is false"));
  CHECK(contains(err("data:\n  swe:\n    forcing: true\n    forcing_wave1: 2\n"), "data.swe.forcing_wave1"));
  CHECK(contains(err("data:\n  variables: [a]\n  netcdf:\n    train_files: [x]\n    validation_files: [y]\n    "
                     "variables: [b]\n  source: netcdf\n"),
                 "both given"));
}

TEST_CASE("data roles config: loss scales are fme's weights times std / residual std for prognostic channels") {
  const models::TrajectoryInfo info = climate_info();
  models::Normalizer norm;
  norm.mean = {0, 0, 0, 0, 0, 0};
  norm.std = {2, 3, 4, 5, 6, 7};
  norm.residual_std = {1, 1.5, 1, 2.5, 3, 7};
  LossConfig none;
  CHECK(loss_scales(none, info, norm).empty());  // every scale 1: the plain loss
  LossConfig weights{.weights = {{"T", 2.0}, {"PR", 0.5}}};
  // Output channels: T_0, T_1, T_2, PS (prognostic), PR (diagnostic).
  CHECK(loss_scales(weights, info, norm) == std::vector<double>{2, 2, 2, 1, 0.5});
  LossConfig level{.weights = {{"T_1", 3.0}}};
  CHECK(loss_scales(level, info, norm) == std::vector<double>{1, 3, 1, 1, 1});
  // A channel's weight wins over its variable's, in either order.
  LossConfig both{.weights = {{"T_1", 3.0}, {"T", 2.0}}};
  CHECK(loss_scales(both, info, norm) == std::vector<double>{2, 3, 2, 1, 1});
  LossConfig residual{.weights = {{"PS", 2.0}}, .residual_scaling = true};
  CHECK(loss_scales(residual, info, norm) == std::vector<double>{2, 2, 4, 4, 1});  // the diagnostic keeps full-field
  LossConfig forcing{.weights = {{"SST", 2.0}}};
  const std::string e = error_of([&] { loss_scales(forcing, info, norm); });
  CHECK(contains(e, "loss.weights: 'SST' is not a predicted variable"));
  CHECK(contains(e, "T_0, T, T_1"));
  models::Normalizer unfitted = norm;
  unfitted.residual_std.clear();
  CHECK(contains(error_of([&] { loss_scales(residual, info, unfitted); }), "no residual statistics"));
}

TEST_CASE("data roles config: the run log lists the channels by role with levels, units, masks and notes") {
  models::TrajectoryInfo info = climate_info();
  info.notes = {"'a.nc': variable 'time_bnds' (time, nbnd) skipped: it is not a field over (lat, lon)"};
  models::Normalizer norm;
  norm.missing = {0, 0, 0, 0, 1200, 0};
  const std::string log = describe_variables(info, norm);
  CHECK(contains(log, "prognostic (4): T_0 (lev 1000 hPa) [K], T_1 (lev 750 hPa) [K], T_2 (lev 500 hPa) [K], PS [Pa]"));
  CHECK(contains(log, "forcing (1): SST [K]"));
  CHECK(contains(log, "diagnostic (1): PR [kg m-2 s-1]"));
  CHECK(contains(log, "SST: 1200 missing value(s) in the training data, masked"));
  CHECK(contains(log, "note: 'a.nc': variable 'time_bnds'"));
}

TEST_CASE("data roles config: the shipped forced example parses with its roles") {
  TrainConfig c = load_train_config(std::string(GS_SOURCE_ROOT) + "/tools/configs/swe_forced.yaml");
  REQUIRE(c.data.variables.size() == 5);
  CHECK(c.data.variables[3].name == "mass_source");
  CHECK(c.data.variables[3].role == models::VariableRole::forcing);
  CHECK(c.data.variables[4].role == models::VariableRole::diagnostic);
  CHECK(c.data.swe.forcing.enabled);
  CHECK(c.training.stepper.residual_prediction);
}
