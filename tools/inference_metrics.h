// The metrics of a long forced rollout, as ACE's inference reports them (fme's MeanAggregator and
// TimeMeanEvaluatorAggregator), accumulated step by step in memory that does not grow with the
// number of steps (but for two numbers per variable and step):
//   global-mean series   per step and predicted variable, the area-weighted mean of the prediction
//                        and of the truth (weights: area x mask, the mask being where the truth has
//                        a value);
//   time-mean maps       the prediction's and the truth's mean over the steps at each grid point
//                        (over the steps where the truth has a value there);
//   from those maps      the bias map (prediction - truth), the RMSE of the time mean (the
//                        area-weighted RMS of the bias map) and the global-mean bias (its
//                        area-weighted mean, the time- and global-mean bias).
// The initial condition is not a step (as fme). On a grid that splits the sphere every rank adds its
// tile; the global means are the whole sphere's (collective), and finish() gathers the maps.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "distributed/process_grid.h"
#include "engine/tensor.h"

namespace gs::tools {

class InferenceMetrics {
 public:
  // `variables`: the predicted channels; area_weights / nlat, nlon: the whole sphere's.
  InferenceMetrics(std::vector<std::string> variables, std::vector<double> area_weights, int64_t nlon,
                   const dist::ProcessGrid& grid);
  // One step: prediction and truth (C, h, w) on this rank's tile, physical units, the truth NaN
  // where missing. Collective.
  void add(const Tensor& prediction, const Tensor& truth);

  struct Result {
    std::vector<std::string> variables;
    std::vector<std::vector<double>> mean_prediction, mean_truth;  // [step][variable]
    Tensor time_mean_prediction, time_mean_truth, bias;           // (C, nlat, nlon) whole sphere (world rank 0)
    std::vector<double> rmse_of_time_mean, global_mean_bias;       // per variable
  };
  // Collective: the maps gathered to whole spheres (on every rank; the writers use rank 0's).
  Result finish() const;
  int64_t steps() const { return steps_; }

 private:
  // The area-weighted mean over the whole sphere of x (C, h, w) where `valid`; (C) f64.
  std::vector<double> masked_mean(const Tensor& x, const Tensor& valid) const;

  std::vector<std::string> variables_;
  std::vector<double> area_weights_;
  int64_t nlon_;
  dist::ProcessGrid grid_;
  int64_t steps_ = 0;
  Tensor sum_prediction_, sum_truth_, count_;  // (C, h, w) f64 over the steps where the truth is valid
  std::vector<std::vector<double>> mean_prediction_, mean_truth_;
};

}  // namespace gs::tools
