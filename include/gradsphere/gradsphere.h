// gradsphere in one include, for programs outside this repository: #include <gradsphere/gradsphere.h>
// (the pkg-config and the Meson-subproject routes of the top README.md both resolve it). Headers
// can also be included one by one by their path in the tree, "ops/ops.h", "models/sfno.h": that
// is how they include each other, and both routes put the tree's root on the include path.
//
// Everything here needs only fmt at compile time (engine/error.h formats its messages with it);
// Eigen, FFTW, MPI, NetCDF and CUDA stay inside libgradsphere. Not included, because they are for
// writing ops or are internal: ops/kernels.h (CPU loops; needs -fopenmp), the *_cuda.h launchers,
// the *_math.h arithmetic, models/data/netcdf_file.h (needs netcdf.h).
#pragma once

#include "gradsphere_config.h"  // GS_HAVE_MPI, GS_HAVE_CUDA, GS_HAVE_NCCL: what this build has

// Tensors, the tape and every differentiable op: factories, elementwise, reductions, views, shape
// ops, linear algebra, complex ops, in-place ops, grad(), backward(), hooks, no_grad,
// custom functions, gradcheck / gradgradcheck, anomaly mode, the op registry, DOT export.
#include "ops/ops.h"
#include "ops/dropout.h"           // dropout, channel dropout, drop path, masks keyed like rand()
#include "ops/elementwise_more.h"  // trig and hyperbolic, log1p, expm1, rounding, softplus, clamp
#include "ops/indexing.h"          // index_select, gather, scatter(_add), index_add, masked_*, index_put
#include "ops/reduce_more.h"       // prod, cumsum, cumprod, std, norm, amax/amin, argmax/argmin
#include "ops/softmax.h"           // softmax, log_softmax, nll_loss, cross_entropy
#include "engine/autograd/grad_clip.h"  // the total-norm clipping rule
// Beyond reverse mode (ops/ops.h has forward mode and ops/functional.h's jvp, jacfwd, hessian).
#include "engine/autograd/checkpoint.h"   // activation checkpointing (non-reentrant)
#include "engine/autograd/saved_hooks.h"  // saved-tensor pack/unpack hooks, SaveInBf16, SaveOnHost

// The sphere: grids and quadrature, scalar and vector spherical harmonic transforms, spectral
// convolution and the SFNO's grid-space blocks (norms, 1x1 and pole-aware 3x3 convolutions).
#include "ops/sphere/grids.h"
#include "ops/sphere/sfno_blocks.h"
#include "ops/sphere/sht.h"
#include "ops/sphere/spectral_conv.h"
#include "ops/sphere/vector_sht.h"

// Distribution: the job's communicator, the process grid, collectives as tape ops with their
// conjugate backward rules, the SHT and SFNO blocks on a split sphere, the gradient reducer, the
// replica checker and the distributed gradcheck. With one process (or a build without MPI) every
// one of these is the one-process operation.
#include "distributed/collectives.h"
#include "distributed/dist_gradcheck.h"
#include "distributed/process_grid.h"
#include "distributed/reducer.h"
#include "distributed/replica_check.h"
#include "distributed/sphere_blocks.h"
#include "distributed/sphere_transforms.h"
#include "distributed/world.h"

// Models: Module and its state dict, SFNO layers, SFNO and NoiseConditionedSFNO, optimizers and
// learning-rate schedules, safetensors checkpoints, ACE's stepper and losses, data (shallow-water
// generator, NetCDF reader and writer, normalisation and batches).
#include "models/checkpoint.h"
#include "models/ensemble_loss.h"
#include "models/layers.h"
#include "models/lr_schedule.h"
#include "models/module.h"
#include "models/noise_sfno.h"
#include "models/optim.h"
#include "models/safetensors.h"
#include "models/sfno.h"
#include "models/stepper.h"
#include "models/data/dataset.h"
#include "models/data/netcdf_io.h"
#include "models/data/swe_data.h"
#include "models/data/trajectory_source.h"
