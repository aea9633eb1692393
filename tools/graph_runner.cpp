// graph_runner PROGRAM: runs one autograd graph written by tools/diff_autograd.py and prints what
// it computed, so that the script can compare gradsphere with PyTorch on the same graph.
//
// The program is one statement per line, tokens separated by spaces:
//   input NAME DTYPE DIMS REQUIRES_GRAD V...   a leaf; DIMS "a,b,c" or "-" for a scalar; values
//                                              in C99 hex-float or decimal form
//   const NAME i64|bool DIMS V...              a constant index or mask (integers; not printed)
//   op NAME OP ARG...                          NAME = OP(ARG...); an ARG is a variable or a number
//                                              (complex tensors come from `complex RE IM`)
//   inplace OP TARGET ARG...                   OP_(TARGET, ARG...): add_ mul_ copy_ adds_ muls_,
//                                              scatter_add_ index_add_ masked_fill_ index_put_
//   loss NAME                                  the scalar that backward starts from
//   probe NAME V...                            the direction u_i of input NAME for double backward
//   tangent NAME V...                          the tangent v_i of input NAME (read with --jvp only)
// Output, one line each, values in hex floats (complex as (re, im) pairs):
//   alias NAME 0|1         whether a reshape / flatten / contiguous returned a view (or its input)
//   value NAME V...        every variable after the whole program ran (views see later writes)
//   grad NAME V... | grad NAME none            d loss / d input (none: unused)
//   gradgrad NAME V... | none                  d/d input of sum_i <grad_i, u_i> (create_graph)
//   error STAGE MESSAGE                        a gs::Error at STAGE (build, backward, double);
//                                              the lines of the stages before it come first
//                                              (no values when the build itself failed)
// With --jvp (graph_runner --jvp PROGRAM) it runs forward mode instead of backward, twice:
//   jvp: every input that requires grad is made dual with its tangent (gs::jvp's way: a primal
//        without history); prints value and `tangent NAME V... | none` (J v) of every variable
//   hvp: forward-over-reverse as gs::hvp, the inputs leaves that require grad made dual; prints
//        `hvp NAME V... | none`: the tangent of d loss / d input, i.e. H v with v all the tangents
//   errors are `error jvp ...` or `error hvp ...`.
// Exit status 0 when the program was read (an error inside the graph is a result, not a failure),
// 2 when it could not be read.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/autograd/forward_ad.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "ops/indexing.h"
#include "ops/dropout.h"
#include "ops/elementwise_more.h"
#include "ops/ops.h"
#include "ops/reduce_more.h"
#include "ops/softmax.h"

namespace {

using gs::Tensor;
using Args = std::vector<std::string>;

struct Program {
  std::map<std::string, Tensor> vars;
  std::vector<std::string> order;   // variables in definition order
  std::vector<std::string> inputs;  // leaves that require grad
  std::map<std::string, Tensor> probes;
  std::string loss;
  // --jvp: which pass (plain: the backward and double backward run), the inputs' tangents (read
  // before the statements, since an input is made dual where it is defined) and, for hvp, the
  // leaves the gradient is taken for (the program sees their dual aliases).
  enum class Mode { plain, jvp, hvp } mode = Mode::plain;
  std::map<std::string, std::vector<double>> tangents;
  std::map<std::string, Tensor> leaves;
};

double number(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0') throw std::runtime_error("expected a number, got '" + s + "'");
  return v;
}
int64_t integer(const std::string& s) { return static_cast<int64_t>(number(s)); }
std::vector<int64_t> int_list(const std::string& s) {
  std::vector<int64_t> out;
  if (s == "-") return out;
  std::istringstream in(s);
  for (std::string d; std::getline(in, d, ',');) out.push_back(integer(d));
  return out;
}

gs::DType real_dtype_named(const std::string& s) {
  if (s == "f64") return gs::DType::f64;
  if (s == "f32") return gs::DType::f32;
  throw std::runtime_error("expected dtype f32 or f64, got '" + s + "'");
}

Tensor values_tensor(const std::vector<double>& v, const gs::Shape& sizes, gs::DType dtype) {
  return gs::cast_copy(gs::from_vector(v, sizes), dtype);
}

struct Runner {
  Program& p;
  const Tensor& var(const std::string& name) const {
    auto it = p.vars.find(name);
    if (it == p.vars.end()) throw std::runtime_error("unknown variable '" + name + "'");
    return it->second;
  }
  // The forward ops the script may use; each takes the statement's arguments after OP.
  Tensor apply(const std::string& op, const Args& a) const {
    using namespace gs;
    auto v = [&](size_t i) -> const Tensor& { return var(a.at(i)); };
    static const std::map<std::string, Tensor (*)(const Tensor&)> unary = {
        {"neg", [](const Tensor& x) { return gs::neg(x); }},   {"exp", [](const Tensor& x) { return gs::exp(x); }},
        {"log", [](const Tensor& x) { return gs::log(x); }},   {"sqrt", [](const Tensor& x) { return gs::sqrt(x); }},
        {"rsqrt", [](const Tensor& x) { return gs::rsqrt(x); }}, {"abs", [](const Tensor& x) { return gs::abs(x); }},
        {"tanh", [](const Tensor& x) { return gs::tanh(x); }}, {"sigmoid", [](const Tensor& x) { return gs::sigmoid(x); }},
        {"relu", [](const Tensor& x) { return gs::relu(x); }}, {"erf", [](const Tensor& x) { return gs::erf(x); }},
        {"gelu", [](const Tensor& x) { return gs::gelu(x); }},
        {"gelu_tanh", [](const Tensor& x) { return gs::gelu(x, GeluApprox::tanh); }},
        {"silu", [](const Tensor& x) { return gs::silu(x); }}, {"square", [](const Tensor& x) { return gs::square(x); }},
        // tools/diff_autograd.py draws the same mask (DROPOUT_KEY) for its reference.
        {"dropout", [](const Tensor& x) { return gs::dropout(x, 0.5, RandomKey{1234, 5}); }},
        {"dropout_p1", [](const Tensor& x) { return gs::dropout(x, 1.0, RandomKey{1234, 5}); }},
        {"clone", [](const Tensor& x) { return gs::clone(x); }},
        {"contiguous", [](const Tensor& x) { return gs::contiguous(x); }},
        {"squeeze_all", [](const Tensor& x) { return gs::squeeze(x); }},
        {"sin", gs::sin},     {"cos", gs::cos},     {"tan", gs::tan},       {"asin", gs::asin},   {"acos", gs::acos},
        {"atan", gs::atan},   {"sinh", gs::sinh},   {"cosh", gs::cosh},     {"asinh", gs::asinh}, {"acosh", gs::acosh},
        {"atanh", gs::atanh}, {"log1p", gs::log1p}, {"expm1", gs::expm1},   {"log2", gs::log2},   {"log10", gs::log10},
        {"exp2", gs::exp2},   {"floor", gs::floor}, {"ceil", gs::ceil},     {"round", gs::round}, {"trunc", gs::trunc},
    };
    static const std::map<std::string, Tensor (*)(const Tensor&, const Tensor&)> binary = {
        {"add", [](const Tensor& x, const Tensor& y) { return gs::add(x, y); }},
        {"sub", [](const Tensor& x, const Tensor& y) { return gs::sub(x, y); }},
        {"mul", [](const Tensor& x, const Tensor& y) { return gs::mul(x, y); }},
        {"div", [](const Tensor& x, const Tensor& y) { return gs::div(x, y); }},
        {"pow", [](const Tensor& x, const Tensor& y) { return gs::pow(x, y); }},
        {"matmul", [](const Tensor& x, const Tensor& y) { return gs::matmul(x, y); }},
        {"maximum", gs::maximum}, {"minimum", gs::minimum}, {"atan2", gs::atan2},
    };
    using Reduce = Tensor (*)(const Tensor&, std::vector<int64_t>, bool);
    static const std::map<std::string, Reduce> reductions = {
        {"sum", [](const Tensor& x, std::vector<int64_t> d, bool k) { return gs::sum(x, d, k); }},
        {"mean", [](const Tensor& x, std::vector<int64_t> d, bool k) { return gs::mean(x, d, k); }},
        {"max", [](const Tensor& x, std::vector<int64_t> d, bool k) { return gs::max(x, d, k); }},
        {"min", [](const Tensor& x, std::vector<int64_t> d, bool k) { return gs::min(x, d, k); }},
        {"logsumexp", [](const Tensor& x, std::vector<int64_t> d, bool k) { return gs::logsumexp(x, d, k); }},
        {"prod", [](const Tensor& x, std::vector<int64_t> d, bool k) { return gs::prod(x, d, k); }},
    };
    if (auto it = unary.find(op); it != unary.end()) return it->second(v(0));
    if (auto it = binary.find(op); it != binary.end()) return it->second(v(0), v(1));
    if (auto it = reductions.find(op); it != reductions.end()) return it->second(v(0), int_list(a.at(1)), a.at(2) == "1");
    if (op == "complex") return gs::complex(v(0), v(1));
    if (op == "real") return gs::real(v(0));
    if (op == "imag") return gs::imag(v(0));
    if (op == "conj") return gs::conj(v(0));
    if (op == "view_as_real") return gs::view_as_real(v(0));
    if (op == "view_as_complex") return gs::view_as_complex(v(0));
    // Scalar parameters after the input; "-" is an absent clamp bound (clampt: bounds are variables).
    auto bound = [&](size_t i) { return a.at(i) == "-" ? std::optional<double>() : number(a.at(i)); };
    if (op == "softplus") return gs::softplus(v(0), number(a.at(1)), number(a.at(2)));
    if (op == "elu") return gs::elu(v(0), number(a.at(1)));
    if (op == "leaky_relu") return gs::leaky_relu(v(0), number(a.at(1)));
    if (op == "hardtanh") return gs::hardtanh(v(0), number(a.at(1)), number(a.at(2)));
    if (op == "clamps") return gs::clamp(v(0), bound(1), bound(2));
    if (op == "clampt") return gs::clamp(v(0), a.at(1) == "-" ? Tensor() : v(1), a.at(2) == "-" ? Tensor() : v(2));
    if (op == "adds") return gs::add(v(0), number(a.at(1)));
    if (op == "muls") return gs::mul(v(0), number(a.at(1)));
    if (op == "pows") return gs::pow(v(0), number(a.at(1)));
    if (op == "var") return gs::var(v(0), int_list(a.at(1)), integer(a.at(2)), a.at(3) == "1");
    if (op == "std") return gs::std(v(0), int_list(a.at(1)), integer(a.at(2)), a.at(3) == "1");
    if (op == "norm") return gs::norm(v(0), number(a.at(1)), int_list(a.at(2)), a.at(3) == "1");
    if (op == "cumsum") return gs::cumsum(v(0), integer(a.at(1)), a.at(2) == "1");
    if (op == "cumprod") return gs::cumprod(v(0), integer(a.at(1)), a.at(2) == "1");
    if (op == "softmax") return gs::softmax(v(0), integer(a.at(1)));
    if (op == "log_softmax") return gs::log_softmax(v(0), integer(a.at(1)));
    // X TARGET REDUCTION IGNORE_INDEX SMOOTHING [WEIGHT]; TARGET an i64 `const`
    if (op == "cross_entropy" || op == "nll_loss") {
      const std::string& r = a.at(2);
      const auto reduction = r == "none" ? LossReduction::none : r == "sum" ? LossReduction::sum : LossReduction::mean;
      const Tensor weight = a.size() > 5 ? v(5) : Tensor();
      if (op == "nll_loss") return gs::nll_loss(v(0), v(1), weight, reduction, integer(a.at(3)));
      return gs::cross_entropy(v(0), v(1), weight, reduction, integer(a.at(3)), number(a.at(4)));
    }
    if (op == "transpose") return gs::transpose(v(0), integer(a.at(1)), integer(a.at(2)));
    if (op == "permute") return gs::permute(v(0), int_list(a.at(1)));
    if (op == "select") return gs::select(v(0), integer(a.at(1)), integer(a.at(2)));
    if (op == "slice") return gs::slice(v(0), integer(a.at(1)), integer(a.at(2)), integer(a.at(3)), integer(a.at(4)));
    if (op == "narrow") return gs::narrow(v(0), integer(a.at(1)), integer(a.at(2)), integer(a.at(3)));
    if (op == "expand") return gs::expand(v(0), int_list(a.at(1)));
    if (op == "reshape") return gs::reshape(v(0), int_list(a.at(1)));
    if (op == "view") return gs::view(v(0), int_list(a.at(1)));
    if (op == "flatten") return gs::flatten(v(0), integer(a.at(1)), integer(a.at(2)));
    if (op == "squeeze") return gs::squeeze(v(0), integer(a.at(1)));
    if (op == "unsqueeze") return gs::unsqueeze(v(0), integer(a.at(1)));
    if (op == "cat" || op == "stack") {
      std::vector<Tensor> ts;
      for (size_t i = 1; i < a.size(); ++i) ts.push_back(v(i));
      return op == "cat" ? gs::cat(ts, integer(a.at(0))) : gs::stack(ts, integer(a.at(0)));
    }
    if (op == "index_select") return gs::index_select(v(0), integer(a.at(1)), v(2));
    if (op == "gather") return gs::gather(v(0), integer(a.at(1)), v(2));
    if (op == "scatter") return gs::scatter(v(0), integer(a.at(1)), v(2), v(3));
    if (op == "scatter_value") return gs::scatter(v(0), integer(a.at(1)), v(2), number(a.at(3)));
    if (op == "scatter_add") return gs::scatter_add(v(0), integer(a.at(1)), v(2), v(3));
    if (op == "index_add") return gs::index_add(v(0), integer(a.at(1)), v(2), v(3), number(a.at(4)));
    if (op == "masked_fill") return gs::masked_fill(v(0), v(1), number(a.at(2)));
    if (op == "masked_fill_t") return gs::masked_fill(v(0), v(1), v(2));
    if (op == "masked_select") return gs::masked_select(v(0), v(1));
    if (op == "index_put") return gs::index_put(v(0), vars_from(a, 3), v(2), a.at(1) == "1");
    throw std::runtime_error("unknown op '" + op + "'");
  }
  std::vector<Tensor> vars_from(const Args& a, size_t first) const {
    std::vector<Tensor> ts;
    for (size_t i = first; i < a.size(); ++i) ts.push_back(var(a[i]));
    return ts;
  }
  void apply_inplace(const std::string& op, const Args& a) const {
    Tensor target = var(a.at(0));  // a handle: the write lands in the variable's tensor
    if (op == "add_") gs::add_(target, var(a.at(1)), number(a.at(2)));
    else if (op == "mul_") gs::mul_(target, var(a.at(1)));
    else if (op == "copy_") gs::copy_(target, var(a.at(1)));
    else if (op == "adds_") gs::add_(target, number(a.at(1)));
    else if (op == "muls_") gs::mul_(target, number(a.at(1)));
    else if (op == "scatter_add_") gs::scatter_add_(target, integer(a.at(1)), var(a.at(2)), var(a.at(3)));
    else if (op == "index_add_") gs::index_add_(target, integer(a.at(1)), var(a.at(2)), var(a.at(3)), number(a.at(4)));
    else if (op == "masked_fill_") gs::masked_fill_(target, var(a.at(1)), number(a.at(2)));
    else if (op == "index_put_") gs::index_put_(target, vars_from(a, 3), var(a.at(2)), a.at(1) == "1");
    else throw std::runtime_error("unknown in-place op '" + op + "'");
  }
};

void print_values(const char* kind, const std::string& name, const Tensor& t) {
  std::printf("%s %s", kind, name.c_str());
  if (!t.defined()) {
    std::printf(" none\n");
    return;
  }
  const Tensor real = gs::is_complex(t.dtype()) ? gs::view_as_real(gs::contiguous(t.detach())) : t.detach();
  const Tensor c = gs::cast_copy(gs::contiguous(real), gs::DType::f64);
  const double* d = static_cast<const double*>(c.raw_data());
  for (int64_t i = 0; i < c.numel(); ++i) std::printf(" %a", d[i]);
  std::printf("\n");
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  return s;
}

// An input's tangent from its `tangent` line, of the input's shape and dtype.
Tensor tangent_for(const Program& p, const std::string& name, const Tensor& input) {
  auto it = p.tangents.find(name);
  if (it == p.tangents.end()) throw std::runtime_error("--jvp: input '" + name + "' has no `tangent` line");
  if (static_cast<int64_t>(it->second.size()) != input.numel())
    throw std::runtime_error("--jvp: tangent of '" + name + "' has " + std::to_string(it->second.size()) +
                             " values, its input " + std::to_string(input.numel()));
  return values_tensor(it->second, input.sizes(), input.dtype());
}

// Reads the program, runs its forward statements; throws std::runtime_error for a malformed file.
void run_forward(std::istream& in, Program& p) {
  Runner r{p};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string kind;
    if (!(ls >> kind) || kind[0] == '#') continue;
    Args a;
    for (std::string t; ls >> t;) a.push_back(t);
    if (kind == "input" || kind == "probe") {
      const bool is_input = kind == "input";
      const size_t first = is_input ? 4 : 1;
      std::vector<double> v;
      for (size_t i = first; i < a.size(); ++i) v.push_back(number(a[i]));
      if (!is_input) {
        const Tensor& of = r.var(a.at(0));
        p.probes[a.at(0)] = values_tensor(v, of.sizes(), of.dtype());
        continue;
      }
      Tensor t = values_tensor(v, int_list(a.at(2)), real_dtype_named(a.at(1)));
      if (a.at(3) == "1") {
        p.inputs.push_back(a.at(0));
        if (p.mode != Program::Mode::jvp) t.set_requires_grad(true);
        if (p.mode == Program::Mode::hvp) p.leaves[a.at(0)] = t;
        if (p.mode != Program::Mode::plain) t = gs::forward_ad::make_dual(t, tangent_for(p, a.at(0), t));
      }
      p.vars[a.at(0)] = t;
      p.order.push_back(a.at(0));
    } else if (kind == "const") {
      std::vector<int64_t> v;
      for (size_t i = 3; i < a.size(); ++i) v.push_back(integer(a[i]));
      const gs::Shape sizes = int_list(a.at(2));
      Tensor t = gs::reshape(gs::from_vector(v, {static_cast<int64_t>(v.size())}), sizes);
      if (a.at(1) == "bool") t = gs::ne(t, gs::zeros({}, gs::DType::i64));
      else if (a.at(1) != "i64") throw std::runtime_error("expected const dtype i64 or bool, got '" + a.at(1) + "'");
      p.vars[a.at(0)] = gs::contiguous(t);
    } else if (kind == "op") {
      Tensor t = r.apply(a.at(1), Args(a.begin() + 2, a.end()));
      // (not again in the hvp pass: it reruns the program the jvp pass printed them for)
      if ((a.at(1) == "reshape" || a.at(1) == "flatten" || a.at(1) == "contiguous") && p.mode != Program::Mode::hvp)
        std::printf("alias %s %d\n", a.at(0).c_str(), int(t.is_view() || t.is_same(r.var(a.at(2)))));
      p.vars[a.at(0)] = t;
      p.order.push_back(a.at(0));
    } else if (kind == "inplace") {
      r.apply_inplace(a.at(0), Args(a.begin() + 1, a.end()));
    } else if (kind == "loss") {
      p.loss = a.at(0);
    } else if (kind == "tangent") {
      continue;  // read before the statements (read_tangents); ignored without --jvp
    } else {
      throw std::runtime_error("unknown statement '" + kind + "'");
    }
  }
}

// The `tangent` lines of a program, by input name.
std::map<std::string, std::vector<double>> read_tangents(const std::string& text) {
  std::map<std::string, std::vector<double>> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::string kind, name;
    if (!(ls >> kind >> name) || kind != "tangent") continue;
    for (std::string v; ls >> v;) out[name].push_back(number(v));
  }
  return out;
}

// --jvp: J v of every variable, then H v of the loss (forward-over-reverse); `stage` names the pass
// an error comes from.
void run_dual(const std::string& text, const char*& stage) {
  stage = "jvp";
  Program p;
  p.mode = Program::Mode::jvp;
  p.tangents = read_tangents(text);
  {
    gs::forward_ad::DualLevel level;
    std::istringstream in(text);
    run_forward(in, p);
    for (const auto& name : p.order) print_values("value", name, p.vars.at(name));
    for (const auto& name : p.order) print_values("tangent", name, gs::forward_ad::tangent_of(p.vars.at(name)));
  }
  if (p.loss.empty() || p.inputs.empty()) return;
  stage = "hvp";
  Program q;
  q.mode = Program::Mode::hvp;
  q.tangents = std::move(p.tangents);
  gs::forward_ad::DualLevel level;
  gs::GradModeGuard on(true);
  std::istringstream in(text);
  run_forward(in, q);
  std::vector<Tensor> leaves;
  for (const auto& name : q.inputs) leaves.push_back(q.leaves.at(name));
  gs::GradOptions options;
  options.create_graph = true;  // the reverse pass's ops carry the tangents forward
  options.allow_unused = true;
  // A loss without history does not depend on the inputs: H v = 0 (torch.func.grad's zeros; gs::grad
  // and gs::hvp refuse such a root).
  const Tensor& loss = q.vars.at(q.loss);
  const auto g = loss.requires_grad() ? gs::grad({loss}, leaves, {}, options) : std::vector<Tensor>(leaves.size());
  for (size_t i = 0; i < leaves.size(); ++i)
    print_values("hvp", q.inputs[i], g[i].defined() ? gs::forward_ad::tangent_of(g[i]) : Tensor());
}

}  // namespace

int main(int argc, char** argv) {
  const bool dual = argc == 3 && std::string(argv[1]) == "--jvp";
  if (argc != 2 && !dual) {
    std::fprintf(stderr, "usage: graph_runner [--jvp] PROGRAM\n");
    return 2;
  }
  std::ifstream file(argv[argc - 1]);
  if (!file) {
    std::fprintf(stderr, "graph_runner: cannot open '%s'\n", argv[argc - 1]);
    return 2;
  }
  std::stringstream whole;
  whole << file.rdbuf();
  Program p;
  const char* stage = "build";
  try {
    if (dual) {
      run_dual(whole.str(), stage);
      return 0;
    }
    std::istringstream in(whole.str());
    run_forward(in, p);
    for (const auto& name : p.order) print_values("value", name, p.vars.at(name));
    std::vector<Tensor> xs;
    for (const auto& name : p.inputs) xs.push_back(p.vars.at(name));
    if (p.loss.empty() || xs.empty()) return 0;
    stage = "backward";
    gs::GradOptions first;
    first.create_graph = true;
    first.allow_unused = true;
    const auto g = gs::grad({p.vars.at(p.loss)}, xs, {}, first);
    for (size_t i = 0; i < xs.size(); ++i) print_values("grad", p.inputs[i], g[i]);
    stage = "double";
    Tensor s;
    for (size_t i = 0; i < xs.size(); ++i) {
      if (!g[i].defined() || !g[i].requires_grad() || !p.probes.count(p.inputs[i])) continue;
      Tensor term = gs::sum(gs::mul(g[i], p.probes.at(p.inputs[i])));
      s = s.defined() ? gs::add(s, term) : term;
    }
    if (!s.defined()) return 0;
    gs::GradOptions second;
    second.allow_unused = true;
    const auto gg = gs::grad({s}, xs, {}, second);
    for (size_t i = 0; i < xs.size(); ++i) print_values("gradgrad", p.inputs[i], gg[i]);
  } catch (const gs::Error& e) {
    std::fflush(stdout);
    std::printf("error %s %s\n", stage, one_line(e.what()).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "graph_runner: %s\n", e.what());
    return 2;
  }
  return 0;
}
