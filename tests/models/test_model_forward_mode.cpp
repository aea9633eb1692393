// Forward mode through whole networks: the tangent of SFNO (sphere transforms, spectral
// convolution, norms, dropout, bf16 MLP storage) and of NoiseConditionedSFNO for a random input
// tangent, against central differences and the reverse-mode Jacobian (jvpcheck).
#include <doctest/doctest.h>

#include "engine/autograd/gradcheck.h"
#include "engine/random.h"
#include "models/noise_sfno.h"
#include "models/sfno.h"
#include "tests/models/net_test_util.h"

using namespace gs;
using namespace gs::models;

TEST_CASE("forward mode: SFNO and NoiseConditionedSFNO tangents pass jvpcheck (f64)") {
  SfnoOptions so;
  so.img_size = {6, 12};
  so.in_chans = 2, so.out_chans = 2, so.embed_dim = 4, so.num_layers = 2;
  so.dtype = DType::f64;
  so.drop_rate = 0.2, so.drop_path_rate = 0.3;
  SFNO sfno(so);
  gs_test::randomize(sfno, 3);
  sfno.train();  // dropout on: its masks are keyed, so every evaluation draws the same
  ForwardContext ctx;
  ctx.noise_key = {4, 4};
  const Tensor x = randn({1, 2, 6, 12}, {8, 1}, DType::f64).set_requires_grad(true);
  auto rep = jvpcheck([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{sfno.forward(in[0], ctx)}; }, {x});
  CHECK_MESSAGE(rep.ok, rep.failure << " (" << rep.detail << ")");

  NoiseSfnoOptions no;
  no.img_shape = {4, 8};
  no.in_chans = 2, no.out_chans = 2, no.embed_dim = 3, no.noise_embed_dim = 2, no.num_layers = 2;
  no.dtype = DType::f64, no.seed = 3;
  NoiseConditionedSFNO noise(no);
  gs_test::randomize(noise, 4);
  const Tensor z = noise.make_noise(1, {5, 5});
  const Tensor x2 = randn({1, 2, 4, 8}, {8, 2}, DType::f64).set_requires_grad(true);
  rep = jvpcheck([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{noise.forward_with_noise(in[0], z)}; },
                 {x2});
  CHECK_MESSAGE(rep.ok, rep.failure << " (" << rep.detail << ")");
}
