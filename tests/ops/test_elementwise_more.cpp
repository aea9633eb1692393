// The ops of ops/elementwise_more.h against PyTorch 2.14.1 (values, first and second derivatives
// computed with /opt/gs-ref/bin/python and pasted below) and closed forms: the conventions at kinks,
// ties, bounds and NaN that finite differences cannot check, round half to even, and the errors.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "engine/factory.h"
#include "ops/elementwise_more.h"
#include "ops/ops.h"
#include "tests/test_util.h"

namespace {

using gs::DType;
using gs::Tensor;
using Values = std::vector<double>;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor leaf(const Values& v, DType dtype = DType::f64) {
  Tensor t = gs::cast_copy(gs::from_vector(v, {static_cast<int64_t>(v.size())}), dtype);
  t.set_requires_grad(true);
  return t;
}

Values values_of(const Tensor& t) {
  Tensor c = gs::cast_copy(gs::contiguous(t.detach()), DType::f64);
  const double* p = c.data<double>();
  return Values(p, p + c.numel());
}

// Equal within `tol` relative to the larger magnitude; NaN matches NaN, infinities match exactly.
void check_close(const Values& got, const Values& want, double tol = 1e-14) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CAPTURE(got[i]);
    CAPTURE(want[i]);
    if (std::isnan(want[i])) {
      CHECK(std::isnan(got[i]));
    } else if (std::isinf(want[i])) {
      CHECK(got[i] == want[i]);
    } else {
      CHECK(std::abs(got[i] - want[i]) <= tol * std::max(1.0, std::abs(want[i])));
    }
  }
}

// y = f(x), d sum(y) / dx and d/dx of sum(d sum(y) / dx) (create_graph), as torch.autograd.grad.
struct Derivatives {
  Values value, first, second;
};
Derivatives derivatives(const std::function<Tensor(const Tensor&)>& f, const Values& x) {
  Tensor t = leaf(x);
  Tensor y = f(t);
  auto g = gs::grad({gs::sum(y)}, {t}, {}, {.create_graph = true});
  Values second(x.size(), 0.0);
  if (g[0].requires_grad()) second = values_of(gs::grad({gs::sum(g[0])}, {t}, {}, {.allow_unused = true})[0]);
  return {values_of(y), values_of(g[0]), second};
}

// The gradient of sum(f(inputs)) for each input.
std::vector<Values> gradients(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                              const std::vector<Values>& inputs) {
  std::vector<Tensor> xs;
  for (const auto& v : inputs) xs.push_back(leaf(v));
  auto g = gs::grad({gs::sum(f(xs))}, xs);
  std::vector<Values> out;
  for (const auto& t : g) out.push_back(values_of(t));
  return out;
}

struct TorchCase {
  const char* name;
  Values value, first, second;
};

}  // namespace

TEST_CASE("elementwise_more: trigonometric, hyperbolic, exp and log ops against torch") {
  using F = Tensor (*)(const Tensor&);
  const std::map<std::string, F> ops = {
      {"sin", gs::sin},   {"cos", gs::cos},     {"tan", gs::tan},     {"asin", gs::asin},   {"acos", gs::acos},
      {"atan", gs::atan}, {"sinh", gs::sinh},   {"cosh", gs::cosh},   {"asinh", gs::asinh}, {"atanh", gs::atanh},
      {"log1p", gs::log1p}, {"expm1", gs::expm1}, {"exp2", gs::exp2}, {"acosh", gs::acosh}, {"log2", gs::log2},
      {"log10", gs::log10}};
  // torch 2.14.1: y = f(x), torch.autograd.grad of sum(y), and of the sum of that (create_graph).
  const Values x = {-0.9, -0.3, 0.2, 0.7};
  const std::vector<TorchCase> on_x = {
      {"sin",
       {-0.78332690962748341, -0.29552020666133955, 0.19866933079506122, 0.64421768723769102},
       {0.62160996827066439, 0.95533648912560598, 0.98006657784124163, 0.7648421872844885},
       {0.78332690962748341, 0.29552020666133955, -0.19866933079506122, -0.64421768723769102}},
      {"cos",
       {0.62160996827066439, 0.95533648912560598, 0.98006657784124163, 0.7648421872844885},
       {0.78332690962748341, 0.29552020666133955, -0.19866933079506122, -0.64421768723769102},
       {-0.62160996827066439, -0.95533648912560598, -0.98006657784124163, -0.7648421872844885}},
      {"tan",
       {-1.2601582175503392, -0.30933624960962325, 0.2027100355086725, 0.84228838046307941},
       {2.5879987332596479, 1.0956889153225471, 1.0410913584959274, 1.7094497158631172},
       {-6.5225757414540269, -0.67787259960942559, 0.42207933249696306, 2.8796992653148323}},
      {"asin",
       {-1.1197695149986342, -0.30469265401539747, 0.2013579207903308, 0.77539749661075297},
       {2.294157338705618, 1.0482848367219182, 1.0206207261596576, 1.4002800840280099},
       {-10.867061078079246, -0.34558840771052241, 0.2126293179499287, 1.921953056509033}},
      {"acos",
       {2.6905658417935308, 1.8754889808102941, 1.3694384060045659, 0.79539883018414359},
       {-2.294157338705618, -1.0482848367219182, -1.0206207261596576, -1.4002800840280099},
       {10.867061078079246, 0.34558840771052241, -0.2126293179499287, -1.921953056509033}},
      {"atan",
       {-0.73281510178650655, -0.2914567944778671, 0.19739555984988078, 0.61072596438920856},
       {0.5524861878453039, 0.9174311926605504, 0.96153846153846145, 0.67114093959731547},
       {0.54943377796770554, 0.50500799595993595, -0.36982248520710059, -0.63060222512499431}},
      {"sinh",
       {-1.0265167257081753, -0.3045202934471426, 0.20133600254109402, 0.75858370183953339},
       {1.4330863854487745, 1.0453385141288605, 1.0200667556190759, 1.255169005630943},
       {-1.0265167257081753, -0.3045202934471426, 0.20133600254109402, 0.75858370183953339}},
      {"cosh",
       {1.4330863854487745, 1.0453385141288605, 1.0200667556190759, 1.255169005630943},
       {-1.0265167257081753, -0.3045202934471426, 0.20133600254109402, 0.75858370183953339},
       {1.4330863854487745, 1.0453385141288605, 1.0200667556190759, 1.255169005630943}},
      {"asinh",
       {-0.80886693565278245, -0.29567304756342244, 0.19869011034924142, 0.65266656608235574},
       {0.74329414624716628, 0.95782628522115132, 0.98058067569092011, 0.81923192051904048},
       {0.36959377437704394, 0.26362191336361956, -0.18857320686363849, -0.38487405661968349}},
      {"atanh",
       {-1.4722194895832204, -0.30951960420311175, 0.20273255405408219, 0.86730052769405308},
       {5.2631578947368434, 1.0989010989010988, 1.0416666666666667, 1.9607843137254901},
       {-49.861495844875378, -0.72455017509962549, 0.4340277777777779, 5.3825451749327176}},
      {"log1p",
       {-2.3025850929940459, -0.35667494393873234, 0.18232155679395465, 0.53062825106217038},
       {10.000000000000002, 1.4285714285714286, 0.83333333333333337, 0.58823529411764708},
       {-100.00000000000004, -2.0408163265306123, -0.69444444444444453, -0.34602076124567477}},
      {"expm1",
       {-0.59343034025940089, -0.25918177931828212, 0.22140275816016985, 1.0137527074704764},
       {0.40656965974059911, 0.74081822068171788, 1.2214027581601699, 2.0137527074704762},
       {0.40656965974059911, 0.74081822068171788, 1.2214027581601699, 2.0137527074704762}},
      {"exp2",
       {0.53588673126814657, 0.81225239635623558, 1.1486983549970351, 1.6245047927124709},
       {0.37144837687800086, 0.56301045843738384, 0.79621702608004197, 1.1260209168747677},
       {0.25746839515655429, 0.39024911189163486, 0.55189558674120553, 0.78049822378326972}},
  };
  const Values positive = {1.5, 2.0, 3.5, 10.0};
  const std::vector<TorchCase> on_positive = {
      {"acosh",
       {0.96242365011920694, 1.3169578969248166, 1.9248473002384139, 2.9932228461263808},
       {0.89442719099991586, 0.57735026918962584, 0.29814239699997197, 0.10050378152592121},
       {-1.0733126291998989, -0.38490017945975069, -0.092755412399991272, -0.010151897123830427}},
      {"log2",
       {0.58496250072115619, 1, 1.8073549220576042, 3.3219280948873622},
       {0.96179669392597567, 0.72134752044448169, 0.41219858311113244, 0.14426950408889633},
       {-0.64119779595065041, -0.36067376022224085, -0.11777102374603785, -0.014426950408889633}},
      {"log10",
       {0.17609125905568124, 0.3010299956639812, 0.54406804435027567, 1},
       {0.28952965460216784, 0.21714724095162588, 0.12408413768664338, 0.043429448190325175},
       {-0.19301976973477855, -0.10857362047581294, -0.0354526107676124, -0.0043429448190325168}},
  };
  for (const auto& [cases, input] : {std::pair{&on_x, x}, std::pair{&on_positive, positive}}) {
    for (const auto& c : *cases) {
      CAPTURE(c.name);
      Derivatives d = derivatives(ops.at(c.name), input);
      check_close(d.value, c.value);
      check_close(d.first, c.first, 1e-13);
      check_close(d.second, c.second, 1e-12);
    }
  }
}

TEST_CASE("elementwise_more: complex sin and cos against torch") {
  Tensor z = gs::complex(gs::from_vector(Values{1.0, -0.5}, {2}), gs::from_vector(Values{2.0, 0.3}, {2}));
  z.set_requires_grad(true);
  // torch 2.14.1, as (re, im) pairs.
  check_close(values_of(gs::view_as_real(gs::sin(z))),
              {3.1657785132161682, 1.9596010414216063, -0.50116198015994617, 0.26724169927095148});
  check_close(values_of(gs::view_as_real(gs::cos(z))),
              {2.0327230070196656, -3.0518977991518002, 0.917370851271881, 0.14599480570180629});
  // The gradient of real(sum(sin(z) w)), torch's convention dL/dx + i dL/dy.
  Tensor w = gs::complex(gs::from_vector(Values{0.3, 1.0}, {2}), gs::from_vector(Values{-0.2, 0.5}, {2}));
  auto g = gs::grad({gs::sum(gs::real(gs::mul(gs::sin(z), w)))}, {z});
  check_close(values_of(gs::view_as_real(g[0])),
              {-0.00056265772446042507, 1.3221139411494731, 0.84437344842097783, -0.60468023133774684}, 1e-13);
}

TEST_CASE("elementwise_more: atan2 quadrants, gradients and the origin against torch") {
  Tensor y = leaf({1.0, -1.0, -1.0, 0.5, 0.0, 0.0, 1e-170}), x = leaf({1.0, 1.0, -1.0, -2.0, 0.0, -0.0, 3e-170});
  Tensor out = gs::atan2(y, x);
  check_close(values_of(out), {0.78539816339744828, -0.78539816339744828, -2.3561944901923448, 2.8966139904629289, 0.0,
                               3.141592653589793, 0.3217505543966422});
  auto g = gs::grad({gs::sum(out)}, {y, x}, {}, {.create_graph = true});
  // torch 2.14.1; where x^2 + y^2 is 0 (the origin, or underflowed) the gradient is 0.
  check_close(values_of(g[0]), {0.5, 0.5, -0.5, -0.47058823529411764, 0.0, 0.0, 0.0});
  check_close(values_of(g[1]), {-0.5, 0.5, 0.5, -0.11764705882352941, 0.0, 0.0, 0.0});
  auto gg = gs::grad({gs::sum(gs::add(g[0], g[1]))}, {y, x});
  check_close(values_of(gg[0]), {-0.5, 0.5, -0.5, -0.096885813148788913, kNaN, kNaN, kNaN});
  check_close(values_of(gg[1]), {0.5, -0.5, 0.5, -0.31833910034602081, kNaN, kNaN, kNaN});
}

TEST_CASE("elementwise_more: rounding is half to even and has a zero gradient") {
  const Values x = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999999999999994, 2.5000000000000004, -3.7, 1e300};
  for (DType dtype : {DType::f64, DType::f32}) {
    CAPTURE(gs::dtype_name(dtype));
    Tensor t = leaf(x, dtype);
    Values r = values_of(gs::round(t));
    // torch.round: ties to the even neighbour. 0.49999999999999994 lies below its tie in f64 and is
    // 0.5 in f32 (0 either way); 2.5000000000000004 lies above its tie in f64 and is 2.5 in f32.
    const bool f64 = dtype == DType::f64;
    check_close(r, {0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 0.0, f64 ? 3.0 : 2.0, -4.0, f64 ? 1e300 : kInf});
    CHECK(std::signbit(r[3]));  // round(-0.5) is -0, as torch
    auto g = gs::grad({gs::sum(gs::add(gs::add(gs::round(t), gs::floor(t)), gs::add(gs::ceil(t), gs::trunc(t))))}, {t});
    check_close(values_of(g[0]), Values(x.size(), 0.0));
  }
  const Values y = {-1.5, -0.5, 0.5, 1.5, -0.0, kNaN, kInf};
  check_close(values_of(gs::floor(leaf(y))), {-2.0, -1.0, 0.0, 1.0, -0.0, kNaN, kInf});
  check_close(values_of(gs::ceil(leaf(y))), {-1.0, -0.0, 1.0, 2.0, -0.0, kNaN, kInf});
  check_close(values_of(gs::trunc(leaf(y))), {-1.0, -0.0, 0.0, 1.0, -0.0, kNaN, kInf});
  CHECK(std::signbit(values_of(gs::ceil(leaf(y)))[1]));
}

TEST_CASE("elementwise_more: softplus, elu and leaky_relu against torch, thresholds and zero included") {
  const Values x = {-3.0, -0.5, 0.0, 1.0, 9.9, 10.0, 10.5};
  // torch 2.14.1 F.softplus(x, 1, 20): value, first and second derivative.
  Derivatives d = derivatives([](const Tensor& t) { return gs::softplus(t); }, x);
  check_close(d.value, {0.048587351573742062, 0.47407698418010669, 0.69314718055994529, 1.3132616875182228,
                        9.9000501734233488, 10.000045398899218, 10.500027536070229});
  check_close(d.first, {0.047425873177566788, 0.37754066879814546, 0.5, 0.7310585786300049, 0.99994982783531627,
                        0.99995460213129761, 0.99997246430888542}, 1e-13);
  check_close(d.second, {0.045176659730912137, 0.23500371220159449, 0.25, 0.19661193324148185,
                         5.0169647437728057e-05, 4.5395807735907655e-05, 2.7534932900403291e-05}, 1e-10);
  // beta 2: x = 10 puts x beta on the threshold (derivative z / (z + 1), its derivative 0), 10.5 above.
  d = derivatives([](const Tensor& t) { return gs::softplus(t, 2.0, 20.0); }, x);
  check_close(d.value, {0.0012378425688652247, 0.15663084375911143, 0.34657359027997264, 1.0634640055214863,
                        9.9000000012587499, 10.000000001030577, 10.5});
  check_close(d.first, {0.0024726231566347748, 0.2689414213699951, 0.5, 0.88079707797788243, 0.99999999748250123,
                        0.99999999793884642, 1.0}, 1e-13);
  check_close(d.second, {0.0049330185827200961, 0.3932238664829637, 0.5, 0.20998717080701323, 5.0349972952977e-09,
                         0.0, 0.0}, 1e-7);
  // elu(alpha 1.5): the derivative at 0 is alpha, its derivative there 0 (torch's x < 0 mask).
  d = derivatives([](const Tensor& t) { return gs::elu(t, 1.5); }, {-2.0, -0.5, 0.0, 0.5});
  check_close(d.value, {-1.296997075145081, -0.59020401043104986, 0.0, 0.5});
  check_close(d.first, {0.20300292485491905, 0.90979598956895014, 1.5, 1.0});
  check_close(d.second, {0.20300292485491905, 0.90979598956895014, 0.0, 0.0});
  d = derivatives([](const Tensor& t) { return gs::leaky_relu(t, 0.2); }, {-2.0, -0.5, 0.0, 0.5});
  check_close(d.value, {-0.4, -0.1, 0.0, 0.5});
  check_close(d.first, {0.2, 0.2, 0.2, 1.0});
  // NaN: elu and leaky_relu take their x <= 0 / x > 0 tests as torch does.
  check_close(derivatives([](const Tensor& t) { return gs::elu(t, 1.5); }, {kNaN}).first, {1.0});
  check_close(derivatives([](const Tensor& t) { return gs::leaky_relu(t, 0.2); }, {kNaN}).first, {0.2});
  Derivatives at_nan = derivatives([](const Tensor& t) { return gs::softplus(t); }, {kNaN});
  check_close(at_nan.first, {kNaN});
  check_close(at_nan.second, {kNaN});  // torch multiplies by its x beta < threshold mask: NaN * 0
  // elu's small negative inputs go through expm1 (torch's kernel), exact where exp(x) - 1 is not.
  check_close(values_of(gs::elu(leaf({-1e-10}))), {-9.999999999500001e-11});
}

TEST_CASE("elementwise_more: hardtanh is zero at its bounds and passes NaN's gradient") {
  // torch 2.14.1: F.hardtanh(x, -1, 0.5).
  Derivatives d = derivatives([](const Tensor& t) { return gs::hardtanh(t, -1.0, 0.5); }, {-2, -1, 0, 0.5, 1, kNaN});
  check_close(d.value, {-1.0, -1.0, 0.0, 0.5, 0.5, kNaN});
  check_close(d.first, {0.0, 0.0, 1.0, 0.0, 0.0, 1.0});
  check_close(d.second, Values(6, 0.0));
  CHECK_THROWS_WITH_AS(gs::hardtanh(leaf({0.0}), 1.0, -1.0),
                       doctest::Contains("hardtanh: expected min_val <= max_val, got min_val 1 and max_val -1"),
                       gs::Error);
}

TEST_CASE("elementwise_more: clamp with scalar bounds") {
  const Values x = {-2.0, -1.0, 0.0, 1.0, 2.0, kNaN};
  using Opt = std::optional<double>;
  auto run = [&](Opt lo, Opt hi) { return derivatives([&](const Tensor& t) { return gs::clamp(t, lo, hi); }, x); };
  // torch 2.14.1: the gradient only strictly inside (0 at a bound, 0 for NaN).
  Derivatives d = run(-1.0, 1.0);
  check_close(d.value, {-1.0, -1.0, 0.0, 1.0, 1.0, kNaN});
  check_close(d.first, {0.0, 0.0, 1.0, 0.0, 0.0, 0.0});
  d = run(-1.0, std::nullopt);
  check_close(d.value, {-1.0, -1.0, 0.0, 1.0, 2.0, kNaN});
  check_close(d.first, {0.0, 0.0, 1.0, 1.0, 1.0, 0.0});
  d = run(std::nullopt, 1.0);
  check_close(d.value, {-2.0, -1.0, 0.0, 1.0, 1.0, kNaN});
  check_close(d.first, {1.0, 1.0, 1.0, 0.0, 0.0, 0.0});
  d = run(1.0, -1.0);  // min > max: every value is max, no gradient
  check_close(d.value, {-1.0, -1.0, -1.0, -1.0, -1.0, kNaN});
  check_close(d.first, Values(6, 0.0));
  d = run(kNaN, 1.0);  // a NaN bound makes every value NaN
  check_close(d.value, Values(6, kNaN));
  check_close(d.first, Values(6, 0.0));
  CHECK_THROWS_WITH_AS(gs::clamp(leaf({0.0}), std::nullopt, std::nullopt),
                       doctest::Contains("clamp: expected at least one of min and max, got neither"), gs::Error);
}

TEST_CASE("elementwise_more: clamp with tensor bounds follows torch at ties, NaN and min > max") {
  struct Row {
    double x, lo, hi, y, gx, glo, ghi;
  };
  // torch 2.14.1: torch.clamp(x, lo, hi) and the gradients of its sum.
  const std::vector<Row> rows = {
      {0, -1, 1, 0, 1, 0, 0},          {-1, -1, 1, -1, 0.5, 0.5, 0},     {1, -1, 1, 1, 0.5, 0, 0.5},
      {-kInf, -1, 1, -1, 0, 1, 0},     {kInf, -1, 1, 1, 0, 0, 1},        {0, 0, 0, 0, 1, 0, 0},
      {-kInf, -1, -1, -1, 0, 1, 0},    {1, 0, 0, 0, 0, 0, 1},            {0, 1, -1, -1, 0, 0, 1},
      {kNaN, -1, 1, kNaN, 1, 0, 0},    {kNaN, 0, -1, kNaN, 1, 0, 1},     {1, 1, kNaN, kNaN, 1, 0, 0},
      {-1, 0, kNaN, kNaN, 0, 0, 0},    {1, kNaN, 0, kNaN, 0, 0, 0},      {0, kNaN, 1, kNaN, 1, 0, 0},
  };
  Values x, lo, hi, y, gx, glo, ghi;
  for (const Row& r : rows) {
    x.push_back(r.x), lo.push_back(r.lo), hi.push_back(r.hi), y.push_back(r.y);
    gx.push_back(r.gx), glo.push_back(r.glo), ghi.push_back(r.ghi);
  }
  check_close(values_of(gs::clamp(leaf(x), leaf(lo), leaf(hi))), y);
  auto g = gradients([](const std::vector<Tensor>& t) { return gs::clamp(t[0], t[1], t[2]); }, {x, lo, hi});
  check_close(g[0], gx);
  check_close(g[1], glo);
  check_close(g[2], ghi);
  // One bound: torch's clamp is maximum(x, min) / minimum(x, max), ties halved, NaN to both.
  g = gradients([](const std::vector<Tensor>& t) { return gs::clamp(t[0], t[1], Tensor()); },
                {{-1.0, 0.0, kNaN, -2.0}, {-1.0, -1.0, -1.0, -1.0}});
  check_close(g[0], {0.5, 1.0, 1.0, 0.0});
  check_close(g[1], {0.5, 0.0, 1.0, 1.0});
  // Bounds broadcast: (2, 1) against (3).
  Tensor b = gs::clamp(gs::from_vector(Values{-2.0, 0.5, 3.0}, {3}), gs::from_vector(Values{-1.0, 0.0}, {2, 1}),
                       gs::from_vector(Values{1.0}, {1}));
  CHECK(b.sizes() == gs::Shape{2, 3});
  check_close(values_of(b), {-1.0, 0.5, 1.0, 0.0, 0.5, 1.0});
  CHECK_THROWS_WITH_AS(gs::clamp(leaf({0.0}), Tensor(), Tensor()),
                       doctest::Contains("clamp: expected at least one of min and max, got neither"), gs::Error);
}

TEST_CASE("elementwise_more: maximum and minimum split ties and propagate NaN as torch") {
  const Values a = {1.0, 2.0, kNaN, kNaN, -1.0}, b = {1.0, 3.0, 1.0, kNaN, -4.0};
  // torch 2.14.1.
  check_close(values_of(gs::maximum(leaf(a), leaf(b))), {1.0, 3.0, kNaN, kNaN, -1.0});
  check_close(values_of(gs::minimum(leaf(a), leaf(b))), {1.0, 2.0, kNaN, kNaN, -4.0});
  auto g = gradients([](const std::vector<Tensor>& t) { return gs::maximum(t[0], t[1]); }, {a, b});
  check_close(g[0], {0.5, 0.0, 1.0, 1.0, 1.0});
  check_close(g[1], {0.5, 1.0, 1.0, 1.0, 0.0});
  g = gradients([](const std::vector<Tensor>& t) { return gs::minimum(t[0], t[1]); }, {a, b});
  check_close(g[0], {0.5, 1.0, 1.0, 1.0, 0.0});
  check_close(g[1], {0.5, 0.0, 1.0, 1.0, 1.0});
  // Broadcast: (2, 1) against (3); the gradient of the broadcast operand is summed back.
  Tensor p = gs::reshape(leaf({0.0, 2.0}), {2, 1}), q = leaf({-1.0, 1.0, 3.0});
  Tensor m = gs::maximum(p, q);
  check_close(values_of(m), {0.0, 1.0, 3.0, 2.0, 2.0, 3.0});
  auto gb = gs::grad({gs::sum(m)}, {q});
  check_close(values_of(gb[0]), {0.0, 1.0, 2.0});
}

TEST_CASE("elementwise_more: errors name the op, what it expected and what it got") {
  Tensor i = gs::arange(3), c = gs::full_complex({2}, {1.0, 1.0}, DType::c128);
  Tensor f = leaf({1.0}), s = leaf({1.0}, DType::f32);
  CHECK_THROWS_WITH_AS(gs::sin(i), doctest::Contains("sin: expected an f32, f64, c64 or c128 tensor, got i64"),
                       gs::Error);
  CHECK_THROWS_WITH_AS(gs::tan(c), doctest::Contains("tan: expected an f32 or f64 tensor, got c128"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::acosh(i), doctest::Contains("acosh: expected an f32 or f64 tensor, got i64"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::round(c), doctest::Contains("round: expected an f32 or f64 tensor, got c128"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::softplus(i), doctest::Contains("softplus: expected an f32 or f64 tensor"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::maximum(c, c), doctest::Contains("maximum: expected f32 or f64 tensors, got c128"),
                       gs::Error);
  CHECK_THROWS_WITH_AS(gs::atan2(f, s), doctest::Contains("atan2"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::minimum(leaf({1.0, 2.0}), leaf({1.0, 2.0, 3.0})), doctest::Contains("minimum"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::clamp(f, leaf({0.0}, DType::f32), f), doctest::Contains("clamp"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::sin(gs::cast_copy(f.detach(), DType::bf16)), doctest::Contains("bf16"), gs::Error);
}
