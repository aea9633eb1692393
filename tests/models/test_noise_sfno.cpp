// NoiseConditionedSFNO (models/noise_sfno.h): ACE's parameter names, shapes and counts; the
// spectral weight's (groups, lmax, Cout, Cin, 2) layout checked against an explicit contraction;
// groups against the equivalent block-diagonal weight; the noise (keyed, reproducible, the two
// kinds' statistics); conditioning on noise, labels and the context position embedding; an
// end-to-end f64 gradcheck w.r.t. the input and a selection of parameters; train / eval; the state
// dict round trip; and the errors for what it refuses.
#include "models/noise_sfno.h"
#include "ops/shape_ops.h"
#include "ops/sphere/sfno_blocks.h"
#include "ops/sphere/sht.h"
#include "ops/sphere/spectral_conv.h"
#include "tests/models/net_test_util.h"

using namespace gs;
using namespace gs::models;
using namespace gs_test;

namespace {

NoiseSfnoOptions tiny(DType dtype = DType::f64) {
  NoiseSfnoOptions o;
  o.img_shape = {4, 8};  // legendre-gauss: lmax 4, mmax min(5, 4) = 4
  o.in_chans = 2, o.out_chans = 2;
  o.embed_dim = 3, o.noise_embed_dim = 2, o.num_layers = 2;
  o.dtype = dtype, o.seed = 3;
  return o;
}

}  // namespace

TEST_CASE("NoiseConditionedSFNO: ACE's parameter names, shapes and counts") {
  NoiseSfnoOptions o;
  o.img_shape = {6, 12}, o.in_chans = 2, o.out_chans = 3, o.n_labels = 2;
  o.embed_dim = 4, o.noise_embed_dim = 3, o.num_layers = 2;
  NoiseConditionedSFNO m(o);
  const int64_t C = 4, E = 3, N = 2, L = 6, hid = 8, in = 2, out = 3, H = 6, W = 12;
  CHECK(m.data_spec().lmax == 6);
  CHECK(m.data_spec().mmax == 6);  // ACE's W/2 + 1 = 7, clamped to lmax (see noise_sfno.h)
  CHECK(m.data_spec() == m.internal_spec());
  const std::map<std::string, Shape> s = shapes_of(m);
  const std::string b = "conditional_model.blocks.1.";
  CHECK(s.at("conditional_model.encoder.0.weight") == Shape{C, in, 1, 1});
  CHECK(s.at("conditional_model.encoder.0.bias") == Shape{C});
  CHECK(s.at("conditional_model.encoder.2.weight") == Shape{C, C, 1, 1});
  CHECK(!s.count("conditional_model.encoder.2.bias"));
  CHECK(s.at("conditional_model.pos_embed") == Shape{1, C, H, W});
  CHECK(s.at(b + "norm0.W_scale_2d.weight") == Shape{C, E, 1, 1});
  CHECK(s.at(b + "norm0.W_bias_2d.weight") == Shape{C, E, 1, 1});
  CHECK(s.at(b + "norm1.W_scale_labels.weight") == Shape{C, N});
  CHECK(s.at(b + "norm1.W_scale_labels.bias") == Shape{C});
  CHECK(s.at(b + "norm1.W_bias_labels.bias") == Shape{C});
  CHECK(s.at(b + "filter.filter.weight") == Shape{1, L, C, C, 2});
  CHECK(s.at(b + "filter.filter.bias") == Shape{1, C, 1, 1});
  CHECK(s.at(b + "inner_skip.weight") == Shape{C, C, 1, 1});
  CHECK(s.at(b + "inner_skip.bias") == Shape{C});
  CHECK(s.at(b + "mlp.fwd.0.weight") == Shape{hid, C, 1, 1});
  CHECK(s.at(b + "mlp.fwd.2.bias") == Shape{C});
  CHECK(s.at("conditional_model.decoder.0.weight") == Shape{C, C + in, 1, 1});  // big_skip concatenates x
  CHECK(s.at("conditional_model.decoder.2.weight") == Shape{out, C, 1, 1});
  // count = encoder + pos_embed + layers * (2 norms + filter + inner skip + mlp) + decoder
  const int64_t norm = 2 * C * E + 2 * (C * N + C);
  const int64_t block = 2 * norm + (L * C * C * 2 + C) + (C * C + C) + (hid * C + hid + C * hid + C);
  const int64_t formula = (in * C + C + C * C) + C * H * W + 2 * block + ((C + in) * C + C + C * out);
  CHECK(m.num_parameters() == formula);
  CHECK(m.num_parameters() == 1132);
  for (const auto& p : m.named_parameters()) CHECK(p.tensor.dtype() == DType::f32);

  SUBCASE("context position embedding, labels, affine and global norms, groups, no big skip") {
    NoiseSfnoOptions g = o;
    g.pos_embed = false, g.context_pos_embed_dim = 5, g.affine_norms = true, g.global_layer_norm = true;
    g.filter_num_groups = 2, g.big_skip = false, g.encoder_layers = 2;
    NoiseConditionedSFNO mg(g);
    const std::map<std::string, Shape> r = shapes_of(mg);
    CHECK(r.at("pos_embed") == Shape{1, 5, H, W});
    CHECK(r.at("label_pos_embed") == Shape{N, 5, H, W});
    CHECK(!r.count("conditional_model.pos_embed"));
    CHECK(r.at(b + "norm0.W_scale_pos.weight") == Shape{C, 5, 1, 1});
    CHECK(r.at(b + "norm0.norm.weight") == Shape{C, H, W});
    CHECK(r.at(b + "filter.filter.weight") == Shape{2, L, 2, 2, 2});
    CHECK(r.at("conditional_model.encoder.2.bias") == Shape{C});
    CHECK(r.at("conditional_model.encoder.4.weight") == Shape{C, C, 1, 1});
    CHECK(r.at("conditional_model.decoder.0.weight") == Shape{C, C, 1, 1});
  }
}

TEST_CASE("NoiseConditionedSFNO: initialisation as ACE") {
  NoiseSfnoOptions o;
  o.img_shape = {16, 32}, o.embed_dim = 32, o.noise_embed_dim = 4, o.num_layers = 1, o.n_labels = 3;
  NoiseConditionedSFNO m(o);
  auto rms = [](const Tensor& t) { return std::sqrt(mean(square(cast_copy(t.detach(), DType::f64))).item<double>()); };
  CHECK(rms(parameter(m, "conditional_model.blocks.0.norm0.W_scale_2d.weight")) == 0.0);
  CHECK(rms(parameter(m, "conditional_model.blocks.0.norm1.W_scale_labels.bias")) == 0.0);
  CHECK(rms(parameter(m, "conditional_model.blocks.0.inner_skip.weight")) == doctest::Approx(0.02).epsilon(0.1));
  CHECK(rms(parameter(m, "conditional_model.blocks.0.inner_skip.bias")) == 0.0);
  CHECK(rms(parameter(m, "conditional_model.pos_embed")) == doctest::Approx(0.02).epsilon(0.05));
  // Spectral weight: N(0, 1/C) per real component, sqrt(2) more at l = 0.
  Tensor w = parameter(m, "conditional_model.blocks.0.filter.filter.weight");  // (1, 16, 32, 32, 2)
  CHECK(rms(slice(w, 1, 1, 16)) == doctest::Approx(std::sqrt(1.0 / 32)).epsilon(0.05));
  CHECK(rms(slice(w, 1, 0, 1)) == doctest::Approx(std::sqrt(2.0 / 32)).epsilon(0.1));
}

TEST_CASE("NoiseConditionedSFNO: the spectral weight layout (groups, lmax, Cout, Cin, 2)") {
  // One block without MLP, encoder, big skip or position embedding; encoder and decoder identities,
  // inner skip identity: out = LN(gelu(filter(n) + n)) + n with n = LN(x), filter(n) =
  // isht(sum_i w[i, o, l] sht(n)[i]) computed here with an explicitly re-indexed weight.
  NoiseSfnoOptions o;
  o.img_shape = {6, 12}, o.in_chans = 3, o.out_chans = 3, o.embed_dim = 3, o.noise_embed_dim = 0;
  o.num_layers = 1, o.use_mlp = false, o.big_skip = false, o.pos_embed = false, o.encoder_layers = 0;
  o.dtype = DType::f64;
  NoiseConditionedSFNO m(o);
  const int64_t C = 3, L = 6;
  Tensor w = init_normal({1, L, C, C, 2}, 1.0, {5, 5}, DType::f64);
  {
    StateDict sd = m.state_dict();
    Tensor eye = reshape(from_vector(std::vector<double>{1, 0, 0, 0, 1, 0, 0, 0, 1}, {3, 3}), {3, 3, 1, 1});
    sd["conditional_model.encoder.0.weight"] = eye;
    sd["conditional_model.decoder.0.weight"] = eye;
    sd["conditional_model.blocks.0.inner_skip.weight"] = eye;
    sd["conditional_model.blocks.0.inner_skip.bias"] = zeros({3}, DType::f64);
    sd["conditional_model.blocks.0.filter.filter.weight"] = w;
    m.load_state_dict(sd);
  }
  auto wv = values_f64(w);
  std::vector<c128> ref(static_cast<size_t>(C * C * L));  // (Cin, Cout, L) for spectral_conv_dh
  for (int64_t l = 0; l < L; ++l)
    for (int64_t oc = 0; oc < C; ++oc)
      for (int64_t ic = 0; ic < C; ++ic) {
        const size_t src = static_cast<size_t>(((l * C + oc) * C + ic) * 2);
        ref[static_cast<size_t>((ic * C + oc) * L + l)] = c128(wv[src], wv[src + 1]);
      }
  Tensor x = randn({2, 3, 6, 12}, {6, 6}, DType::f64);
  const sphere::ShtSpec& spec = m.data_spec();
  Tensor n = sphere::layer_norm_channels(x);
  Tensor f = sphere::isht(sphere::spectral_conv_dh(sphere::sht(n, spec), from_vector(ref, {C, C, L})), spec);
  Tensor expected = add(sphere::layer_norm_channels(gelu(add(f, n))), n);
  NoGradGuard ng;
  CHECK(max_abs_diff(m.forward(x), expected) < 1e-12);

  SUBCASE("two groups equal one group with the block-diagonal weight") {
    NoiseSfnoOptions o2 = o;
    o2.embed_dim = o2.in_chans = o2.out_chans = 4, o2.filter_num_groups = 2, o2.num_layers = 2, o2.use_mlp = true;
    NoiseConditionedSFNO g2(o2);
    randomize(g2, 8);
    o2.filter_num_groups = 1;
    NoiseConditionedSFNO g1(o2);
    StateDict sd = g2.state_dict();
    for (const char* blk : {"0", "1"}) {
      const std::string key = std::string("conditional_model.blocks.") + blk + ".filter.filter.weight";
      auto v2 = values_f64(sd.at(key));  // (2, L, 2, 2, 2)
      std::vector<double> v1(static_cast<size_t>(L * 4 * 4 * 2), 0.0);
      for (int64_t g = 0; g < 2; ++g)
        for (int64_t l = 0; l < L; ++l)
          for (int64_t oc = 0; oc < 2; ++oc)
            for (int64_t ic = 0; ic < 2; ++ic)
              for (int64_t c = 0; c < 2; ++c)
                v1[static_cast<size_t>(((l * 4 + g * 2 + oc) * 4 + g * 2 + ic) * 2 + c)] =
                    v2[static_cast<size_t>((((g * L + l) * 2 + oc) * 2 + ic) * 2 + c)];
      sd[key] = from_vector(v1, {1, L, 4, 4, 2});
    }
    g1.load_state_dict(sd);
    Tensor x4 = randn({1, 4, 6, 12}, {7, 7}, DType::f64);
    Tensor noise = g1.make_noise(1, {1, 1});
    CHECK(max_abs_diff(g1.forward_with_noise(x4, noise), g2.forward_with_noise(x4, noise)) < 1e-12);
  }
}

TEST_CASE("NoiseConditionedSFNO: noise is keyed, and conditions the output") {
  NoiseSfnoOptions o = tiny(DType::f32);
  NoiseConditionedSFNO m(o);
  Tensor x = randn({2, 2, 4, 8}, {1, 2});
  ForwardContext k1, k2;
  k1.noise_key = {10, 1}, k2.noise_key = {10, 2};
  // Fresh conditional norms are zero: the noise has no effect yet (ACE's reset_parameters).
  CHECK(max_abs_diff(m.forward(x, k1), m.forward(x, k2)) == 0.0);
  randomize(m, 4);
  Tensor y1 = m.forward(x, k1);
  CHECK(max_abs_diff(m.forward(x, k1), y1) == 0.0);  // same key, same noise, same output
  CHECK(max_abs_diff(m.forward(x, k2), y1) > 1e-3);
  CHECK(max_abs_diff(m.forward_with_noise(x, m.make_noise(2, k1.noise_key)), y1) == 0.0);
  // Each batch entry draws its own noise: identical inputs give different outputs.
  Tensor xx = cat({slice(x, 0, 0, 1), slice(x, 0, 0, 1)}, 0);
  Tensor yy = m.forward(xx, k1);
  CHECK(max_abs_diff(slice(yy, 0, 0, 1), slice(yy, 0, 1, 2)) > 1e-3);
}

TEST_CASE("NoiseConditionedSFNO: noise statistics (gaussian, isotropic)") {
  for (const char* kind : {"gaussian", "isotropic"}) {
    CAPTURE(kind);
    NoiseSfnoOptions o;
    o.img_shape = {24, 48}, o.embed_dim = 2, o.noise_embed_dim = 16, o.num_layers = 1, o.noise_type = kind;
    NoiseConditionedSFNO m(o);
    Tensor z = m.make_noise(8, {77, 3});
    CHECK(z.sizes() == Shape{8, 16, 24, 48});
    CHECK(!z.requires_grad());
    auto v = values_f64(z);
    double s = 0, s2 = 0;
    for (double a : v) s += a, s2 += a * a;
    const double n = static_cast<double>(v.size()), mu = s / n, var = s2 / n - mu * mu;
    CHECK(std::abs(mu) < 0.05);
    CHECK(var == doctest::Approx(1.0).epsilon(0.08));
    if (std::string(kind) == "isotropic") {
      // Band-limited to the data transform: the SHT round trip reproduces it.
      const auto& spec = m.data_spec();
      CHECK(max_abs_diff(sphere::isht(sphere::sht(z, spec), spec), z) < 1e-4);
    }
  }
}

TEST_CASE("NoiseConditionedSFNO: labels and the context position embedding condition the output") {
  NoiseSfnoOptions o = tiny(DType::f32);
  o.n_labels = 2, o.context_pos_embed_dim = 3, o.pos_embed = false;
  NoiseConditionedSFNO m(o);
  randomize(m, 5);
  Tensor x = randn({1, 2, 4, 8}, {1, 3});
  ForwardContext a, b;
  a.labels = from_vector(std::vector<float>{1, 0}, {1, 2});
  b.labels = from_vector(std::vector<float>{0, 1}, {1, 2});
  CHECK(max_abs_diff(m.forward(x, a), m.forward(x, b)) > 1e-3);
  CHECK(contains(error_of([&] { m.forward(x); }), "expected labels (B, n_labels) = (1, 2)"));
  ForwardContext wrong;
  wrong.labels = zeros({1, 3});
  CHECK(contains(error_of([&] { m.forward(x, wrong); }), "got f32 (1, 3)"));
  NoiseConditionedSFNO plain(tiny(DType::f32));
  CHECK(contains(error_of([&] { plain.forward(x, a); }), "built with n_labels = 0"));
}

TEST_CASE("NoiseConditionedSFNO: f64 gradcheck end to end w.r.t. the input and a selection of parameters") {
  NoiseSfnoOptions o = tiny();
  o.n_labels = 2, o.context_pos_embed_dim = 2, o.pos_embed = false;
  NoiseConditionedSFNO m(o);
  randomize(m, 6);
  const std::vector<std::string> names = {
      "pos_embed", "label_pos_embed", "conditional_model.encoder.0.bias",
      "conditional_model.blocks.0.norm0.W_scale_2d.weight", "conditional_model.blocks.0.norm1.W_bias_labels.weight",
      "conditional_model.blocks.1.norm0.W_scale_pos.weight", "conditional_model.blocks.1.filter.filter.weight",
      "conditional_model.decoder.2.weight"};
  const Tensor x0 = randn({1, 2, 4, 8}, {8, 8}, DType::f64).set_requires_grad();
  ForwardContext ctx;
  ctx.noise_key = {3, 3};
  ctx.labels = from_vector(std::vector<double>{0.3, -1.2}, {1, 2});
  const Tensor proj = randn({3, 2 * 4 * 8}, {9, 9}, DType::f64);
  GradcheckReport r =
      gradcheck_input_and_parameters(m, names, x0, proj, [&](const Tensor& in) { return m.forward(in, ctx); });
  CAPTURE(r.failure);
  CHECK(r.ok);

  SUBCASE("global affine norms, isotropic noise, filtered residual and output: the full Jacobian in x") {
    NoiseSfnoOptions g = tiny();
    g.global_layer_norm = true, g.affine_norms = true, g.noise_type = "isotropic";
    g.filter_residual = true, g.filter_output = true, g.activation_function = "silu";
    NoiseConditionedSFNO mg(g);
    randomize(mg, 7);
    Tensor x = randn({1, 2, 4, 8}, {8, 9}, DType::f64).set_requires_grad();
    Tensor nw = contiguous_copy(parameter(mg, "conditional_model.blocks.0.norm1.norm.weight").detach(), true).set_requires_grad();
    auto fg = [&](const std::vector<Tensor>& xs) {
      ParameterSubstitution guard(mg, {{"conditional_model.blocks.0.norm1.norm.weight", xs[1]}});
      return std::vector<Tensor>{mg.forward(xs[0], ForwardContext{{1, 2}, {}})};
    };
    GradcheckReport rg = gradcheck(fg, {x, nw});
    CAPTURE(rg.failure);
    CHECK(rg.ok);
  }
}

TEST_CASE("NoiseConditionedSFNO: forward shapes, train / eval, state dict round trip") {
  NoiseSfnoOptions o = tiny(DType::f32);
  o.img_shape = {8, 16}, o.out_chans = 5;
  NoiseConditionedSFNO m(o);
  randomize(m, 1);
  Tensor x = randn({3, 2, 8, 16}, {2, 3});
  ForwardContext ctx;
  ctx.noise_key = {1, 9};
  Tensor y = m.forward(x, ctx);
  CHECK(y.sizes() == Shape{3, 5, 8, 16});
  m.eval();
  CHECK(!m.is_training());
  CHECK(max_abs_diff(m.forward(x, ctx), y) == 0.0);  // eval still draws noise: ACE's ensembles need it
  m.train();

  NoiseSfnoOptions o2 = o;
  o2.seed = 99;
  NoiseConditionedSFNO m2(o2);
  CHECK(max_abs_diff(m2.forward(x, ctx), y) > 1e-4);
  m2.load_state_dict(m.state_dict());
  CHECK(max_abs_diff(m2.forward(x, ctx), y) == 0.0);

  SUBCASE("an equiangular data grid within its quadrature's truncation") {
    NoiseSfnoOptions e = tiny(DType::f32);
    e.img_shape = {9, 18}, e.data_grid = "equiangular", e.hard_thresholding_fraction = 0.5;
    NoiseConditionedSFNO me(e);
    CHECK(me.data_spec().lmax == 4);  // int(9 * 0.5)
    CHECK(me.data_spec().grid == sphere::GridKind::equiangular);
    CHECK(me.internal_spec().grid == sphere::GridKind::legendre_gauss);
    Tensor xe = randn({1, 2, 9, 18}, {4, 4});
    CHECK(me.forward(xe, ctx).sizes() == Shape{1, 2, 9, 18});
  }
}

TEST_CASE("NoiseConditionedSFNO: errors for options and inputs it refuses") {
  NoiseConditionedSFNO m(tiny(DType::f32));
  CHECK(contains(error_of([&] { m.forward(randn({1, 3, 4, 8}, {1, 1})); }), "(B, in_chans, nlat, nlon) = (B, 2, 4, 8)"));
  CHECK(contains(error_of([&] { m.forward(randn({1, 2, 5, 8}, {1, 1})); }), "got f32 (1, 2, 5, 8)"));
  CHECK(contains(error_of([&] { m.forward_with_noise(randn({1, 2, 4, 8}, {1, 1}), zeros({1, 3, 4, 8})); }),
                 "expected the noise of shape (1, 2, 4, 8)"));
  auto refused = [](auto edit, const std::string& what) {
    NoiseSfnoOptions bad = tiny(DType::f32);
    edit(bad);
    const std::string e = error_of([&] { NoiseConditionedSFNO s(bad); });
    CAPTURE(e);
    CHECK(contains(e, what));
  };
  refused([](NoiseSfnoOptions& b) { b.operator_type = "diagonal"; }, "only the 'dhconv' operator_type");
  refused([](NoiseSfnoOptions& b) { b.filter_type = "non-linear"; }, "filter_type 'non-linear' is not supported");
  refused([](NoiseSfnoOptions& b) { b.residual_filter_factor = 2; }, "residual_filter_factor 2");
  refused([](NoiseSfnoOptions& b) { b.context_pos_embed_dim = 4; }, "should not both be set");
  refused([](NoiseSfnoOptions& b) { b.noise_type = "uniform"; }, "unknown noise_type 'uniform'");
  refused([](NoiseSfnoOptions& b) { b.activation_function = "identity"; }, "must be gelu, relu or silu");
  refused([](NoiseSfnoOptions& b) { b.filter_num_groups = 2; }, "not divisible by filter_num_groups 2");
  refused([](NoiseSfnoOptions& b) { b.data_grid = "equiangular"; }, "lower hard_thresholding_fraction");
  refused([](NoiseSfnoOptions& b) { b.dtype = DType::c128; }, "expected dtype f32 or f64");
  NoiseSfnoOptions global = tiny(DType::f32);
  global.global_layer_norm = true;
  const std::string e = error_of([&] { NoiseConditionedSFNO s(global, dist::ProcessGrid(1, 1, 2, 0)); });
  CHECK(contains(e, "is not available on a process grid that splits the sphere"));
}
