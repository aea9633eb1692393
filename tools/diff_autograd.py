#!/usr/bin/env python3
"""Differential testing of gradsphere's autograd against PyTorch on random graphs.

A reference tool, like compare_sht.py: not part of the build or the tests, and it writes nothing
into the repository. It needs torch in a virtual environment outside the repository (see
compare_sht.py) and the runner built by `ninja -C build` (build/tools/graph_runner).

    /opt/gs-ref/bin/python tools/diff_autograd.py --graphs 2000 --seed 1 [--keep DIR]

Each graph is a small program (the format is in tools/graph_runner.cpp) over the ops both
sides have: elementwise ops with broadcasting, reductions (prod, std, norm p = 1, 2, inf among them),
cumsum / cumprod, softmax / log_softmax, cross_entropy / nll_loss on i64 class indices (a `const`, some
ignored, with class weights, label smoothing), every view kind, matmul, cat/stack,
and in-place writes (add_, mul_, copy_ and their scalar forms) on intermediates, on views of
them (including an operand that aliases the written tensor) and on constant leaves. The same text
runs in gradsphere (graph_runner) and in PyTorch (this script), and the two are compared on:

  values     every variable after the program ran (views see later in-place writes)
  grad       d loss / d input for every input that requires grad
  gradgrad   d/d input of sum_i <grad_i, u_i> (double backward, create_graph)
  errors     a refusal on one side only is a mismatch; both refusing is agreement (e.g. a saved
             tensor modified in place, or an in-place write on a view of a leaf)

Where torch refuses and gradsphere defines a meaning (an in-place operand that overlaps the written
tensor; a saved tensor written that gradsphere's rule does not keep), torch is rerun under that
meaning (the operand cloned; every saved tensor copied when saved) and compared. Graphs where a
reshape / flatten / view_as_complex is a view on one side only (layouts differ) are counted apart.
With --complex the graphs also build complex tensors from real pairs and use complex, real, imag,
conj (compared with torch.conj_physical), view_as_real, view_as_complex and complex arithmetic.
Elementwise ops of ops/elementwise_more.h: trigonometric, hyperbolic, exp/log variants and rounding
(asin, acos, atanh, tan, acosh fed tanh(x) * s or sigmoid(x) + 1.25 to stay in their domain),
softplus / elu / leaky_relu / hardtanh / clamp with scalar parameters, maximum, minimum, atan2, and
clamp with tensor bounds (clampt; "-" for an absent bound).
With --indexing they also use index_select, gather, scatter (distinct targets), scatter_add, index_add,
masked_fill, masked_select, index_put (distinct targets unless accumulating) and the in-place
scatter_add_, index_add_, masked_fill_ and index_put_, over i64 indices and bool masks written as
`const` statements; --edge-table includes each of them with edge values among its inputs.

With --jvp, forward mode instead of backward (graph_runner --jvp; the program gets a `tangent` line
per input that requires grad): the value and the tangent J v of every variable, gradsphere's dual
tensors (forward_ad.h) against torch.func.jvp, and H v of the loss, forward-over-reverse (the
tangent of d loss / d input, as gs::hvp) against torch.func.jvp(torch.func.grad(loss), x, v), with
every input's tangent at once. Where torch.func refuses and gradsphere does not, the graph counts
as "torch refuses" (the reasons are listed), not as a mismatch.
An unused gradient (None) equals zeros. Non-finite values must match exactly (NaN with NaN, an
infinity with the same infinity). Finite ones: f64 graphs to 1e-9 relative to the largest magnitude
of the tensor, or of any value or gradient the graph computed where that is larger (a tensor near
zero by cancellation; inputs left out, at most 1e6), and at least 1e-12 absolute; f32 graphs
(--dtype f32) to 1e-4 (at least 1e-6).
Mismatching programs are written to --keep (default /tmp/gs-diff-autograd) for replay:

    build/tools/graph_runner /tmp/gs-diff-autograd/graph-123.txt
    python tools/diff_autograd.py --replay /tmp/gs-diff-autograd/graph-123.txt
"""
from __future__ import annotations

import argparse
import collections
import itertools
import math
import os
import random
import subprocess
import sys
import tempfile

UNARY = ["neg", "exp", "tanh", "sigmoid", "relu", "erf", "gelu", "gelu_tanh", "silu", "square", "abs",
         "clone", "contiguous", "sin", "cos", "atan", "sinh", "cosh", "asinh", "expm1", "exp2", "floor", "ceil",
         "round", "trunc", "dropout", "dropout_p1"]
# dropout: gs::dropout(x, 0.5) under the key (1234, 5) (graph_runner.cpp); torch draws another mask, so
# the reference is x * mask / (1 - p) with gradsphere's mask (tools/philox_ref.py); dropout_p1 is
# F.dropout(x, 1.0) itself (zeros, NaN * 0 = NaN).
DROPOUT_KEY = (1234, 5)
POSITIVE_UNARY = ["log", "sqrt", "rsqrt", "log1p", "log2", "log10"]
# Ops defined on part of the line, with the scale s of tanh(x) * s that keeps their input inside on
# ordinary runs (acosh: sigmoid(x) + 1.25): asin, acos, atanh and tan take (-1, 1) or (-1.2, 1.2).
DOMAIN_UNARY = {"asin": 0.9, "acos": 0.9, "atanh": 0.9, "tan": 1.2, "acosh": None}
# Activations with scalar parameters (ARG... after the input) and clamp with scalar bounds ("-": none).
PARAM_UNARY = {"softplus": [(1, 20), (2, 20), (0.5, 1)], "elu": [(1,), (1.5,), (0.5,)],
               "leaky_relu": [(0.01,), (0.2,)], "hardtanh": [(-1, 1), (-0.5, 2)],
               "clamps": [(-1, 1), (-0.5, "-"), ("-", 0.3), (1, -1)]}
BINARY = ["add", "sub", "mul", "maximum", "minimum", "atan2"]
REDUCE = ["sum", "mean", "max", "min", "logsumexp", "prod"]
# Along one dim: ARG... = DIM (softmax, log_softmax) or DIM REVERSE (cumsum, cumprod).
ALONG = ["cumsum", "cumprod", "softmax", "log_softmax"]
# Ops that return a view or a copy depending on the input's strides (torch leaves which unspecified).
MAYBE_VIEW_OPS = {"reshape", "flatten", "contiguous"}
# --edges: inputs take these values 30% of the time, and domain-restricted ops get raw inputs half
# of the time, so every op meets 0, -0, negative bases, subnormals, infinities and the NaNs they make.
EDGE_VALUES = [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, float("inf"), float("-inf"), 1e-310, -1e-310, 1e300]


# ---------------------------------------------------------------- graph generation

class Var:
    def __init__(self, name, shape, leaf=False, requires_grad=False, base=None):
        self.name, self.shape = name, tuple(shape)
        self.leaf, self.requires_grad = leaf, requires_grad
        self.base = base  # the Var whose storage this view shares (None: owns its storage)
        self.kind = "input" if leaf else None  # the op that made it
        self.cplx = False  # complex (c128 / c64)

    def root(self):
        return self if self.base is None else self.base.root()


def broadcast_to_ok(src, dst):
    """src broadcasts to exactly dst (what an in-place write's operand must do)."""
    if len(src) > len(dst):
        return False
    return all(s in (1, d) for s, d in zip(reversed(src), reversed(dst)))


def broadcast_shape(a, b):
    return tuple(max(x, y) for x, y in zip((1,) * (len(b) - len(a)) + tuple(a), (1,) * (len(a) - len(b)) + tuple(b)))


def broadcast_ok(a, b):
    return all(x == y or x == 1 or y == 1 for x, y in zip(reversed(a), reversed(b)))


def writable(v):
    """Targets PyTorch accepts: not a leaf that requires grad, nor a view of one, nor an expanded view."""
    r = v.root()
    expanded, x = False, v
    while x.base is not None:  # a write through an expanded view is refused by both
        expanded, x = expanded or x.kind == "expand", x.base
    return not (r.leaf and r.requires_grad) and not expanded


def mark_written(t, operand):
    """An in-place write with an operand that requires grad makes the target and its bases require it."""
    if operand.requires_grad:
        v = t
        v.requires_grad = True
        while v.base is not None:
            v = v.base
            v.requires_grad = True


class Generator:
    def __init__(self, rng, dtype, complex_mode=False, edges=False, indexing=False, jvp=False):
        self.rng, self.dtype, self.complex_mode, self.edges = rng, dtype, complex_mode, edges
        self.indexing_mode, self.jvp = indexing, jvp
        self.lines, self.vars, self.count = [], [], 0

    def fresh(self):
        self.count += 1
        return f"t{self.count}"

    def value_text(self, n, edges=None):
        edges = self.edges if edges is None else edges
        def one():
            if edges and self.rng.random() < 0.3:
                return self.rng.choice(EDGE_VALUES)
            return round(self.rng.gauss(0, 1), 6)
        return " ".join(float.hex(one()) for _ in range(n))

    def input(self, shape, requires_grad):
        v = Var(self.fresh(), shape, leaf=True, requires_grad=requires_grad)
        n = 1
        for s in shape:
            n *= s
        dims = ",".join(map(str, shape)) if shape else "-"
        self.lines.append(f"input {v.name} {self.dtype} {dims} {int(requires_grad)} {self.value_text(n)}")
        self.vars.append(v)
        return v

    def op(self, opname, args, shape, view_of=None, cplx=False):
        v = Var(self.fresh(), shape, base=view_of)
        v.cplx = cplx
        v.requires_grad = any(isinstance(a, Var) and a.requires_grad for a in args)
        v.kind = opname
        text = " ".join(a.name if isinstance(a, Var) else str(a) for a in args)
        self.lines.append(f"op {v.name} {opname} {text}")
        self.vars.append(v)
        return v

    def random_shape(self):
        return tuple(self.rng.randint(1, 4) for _ in range(self.rng.randint(1, 3)))

    def pick(self, pred=lambda v: True, cplx=False):
        """A random variable satisfying pred, real or complex as cplx says (None: either)."""
        cands = [v for v in self.vars if pred(v) and (cplx is None or v.cplx == cplx)]
        return self.rng.choice(cands) if cands else None

    def positive(self, x):
        if self.edges and self.rng.random() < 0.5:  # the raw value: 0, negatives, infinities
            return x
        return self.op("adds", [self.op("sigmoid", [x], x.shape), 0.25], x.shape)

    def in_domain(self, op, x):
        if self.edges and self.rng.random() < 0.5:  # the raw value: outside the domain too
            return x
        if DOMAIN_UNARY[op] is None:  # acosh: above 1
            return self.op("adds", [self.op("sigmoid", [x], x.shape), 1.25], x.shape)
        return self.op("muls", [self.op("tanh", [x], x.shape), DOMAIN_UNARY[op]], x.shape)

    # --- statement kinds
    def unary(self):
        x = self.pick()
        r = self.rng.random()
        if r < 0.2:
            return self.op(self.rng.choice(POSITIVE_UNARY), [self.positive(x)], x.shape)
        if r < 0.3:
            op = self.rng.choice(sorted(DOMAIN_UNARY))
            return self.op(op, [self.in_domain(op, x)], x.shape)
        if r < 0.4:
            op = self.rng.choice(sorted(PARAM_UNARY))
            return self.op(op, [x, *self.rng.choice(PARAM_UNARY[op])], x.shape)
        return self.op(self.rng.choice(UNARY), [x], x.shape)

    def scalar(self):
        x = self.pick()
        kind = self.rng.choice(["adds", "muls", "pows"])
        if kind == "pows":
            return self.op("pows", [self.positive(x), self.rng.choice([2, 3, 0.5, -1.5])], x.shape)
        return self.op(kind, [x, round(self.rng.uniform(-2, 2), 3)], x.shape)

    def binary(self):
        a = self.pick()
        b = self.pick(lambda v: broadcast_ok(a.shape, v.shape))
        if b is None or self.rng.random() < 0.2:
            b = self.input(a.shape[self.rng.randint(0, len(a.shape)):], self.rng.random() < 0.5)
        out = tuple(max(x, y) for x, y in zip(((1,) * (len(b.shape) - len(a.shape)) + a.shape),
                                               ((1,) * (len(a.shape) - len(b.shape)) + b.shape)))
        kind = self.rng.choice(BINARY + ["div", "pow", "clampt"])
        if kind == "clampt":  # clamp(a, b, c) with tensor bounds, one of them sometimes absent
            c = self.pick(lambda v: broadcast_ok(out, v.shape)) or self.input(out, self.rng.random() < 0.5)
            lo, hi = self.rng.choice([(b, c), (b, "-"), ("-", c), (c, b)])
            shape = a.shape
            for bound in (lo, hi):
                if bound != "-":
                    shape = broadcast_shape(shape, bound.shape)
            return self.op("clampt", [a, lo, hi], shape)
        if kind == "div":
            return self.op("div", [a, self.positive(b)], out)
        if kind == "pow":
            return self.op("pow", [self.positive(a), b], out)
        return self.op(kind, [a, b], out)

    def reduce(self):
        x = self.pick(lambda v: len(v.shape) >= 1)
        kind = self.rng.choice(REDUCE + ["var", "std", "norm"])
        nd = len(x.shape)
        dims = sorted(self.rng.sample(range(nd), self.rng.randint(1, nd)))
        if kind == "prod" and 1 < len(dims) < nd:  # torch.prod takes one dim or all
            dims = dims[:1]
        keep = self.rng.random() < 0.5
        shape = tuple((1 if i in dims else s) for i, s in enumerate(x.shape) if keep or i not in dims)
        dtext = ",".join(map(str, dims))
        if kind in ("var", "std"):
            if all(x.shape[d] == 1 for d in dims):
                return None
            return self.op(kind, [x, dtext, self.rng.choice([0, 1]), int(keep)], shape)
        if kind == "norm":
            return self.op("norm", [x, self.rng.choice(["1", "2", "inf"]), dtext, int(keep)], shape)
        return self.op(kind, [x, dtext, int(keep)], shape)

    def along(self):
        """cumsum / cumprod (forward or from the end) and softmax / log_softmax along one dim."""
        x = self.pick(lambda v: len(v.shape) >= 1)
        kind = self.rng.choice(ALONG)
        d = self.rng.randrange(len(x.shape))
        if kind in ("cumsum", "cumprod"):
            # torch runs a reverse scan as flip(scan(flip(x))): its cumprod saves a hidden result
            # that an in-place write on ours cannot reach, so only cumsum (saving nothing) reverses.
            return self.op(kind, [x, d, int(kind == "cumsum" and self.rng.random() < 0.3)], x.shape)
        return self.op(kind, [x, d], x.shape)

    def classify(self):
        """cross_entropy or nll_loss of an input (C), (N, C) or (N, C, d) against i64 class indices (a
        `const`), some ignored, with or without class weights (a constant input), every reduction, and
        label smoothing for cross_entropy."""
        x = self.pick(lambda v: 1 <= len(v.shape) <= 3)
        if x is None:
            return None
        cd = 0 if len(x.shape) == 1 else 1
        c = x.shape[cd]
        tshape = x.shape[:cd] + x.shape[cd + 1:]
        ignore = -100 if self.rng.random() < 0.7 else self.rng.randrange(c)
        values = [ignore if self.rng.random() < 0.2 else self.rng.randrange(c) for _ in range(math.prod(tshape))]
        target = self.const("i64", list(tshape), values)
        kind = self.rng.choice(["cross_entropy", "nll_loss"])
        reduction = self.rng.choice(["mean", "sum", "none"])
        smoothing = self.rng.choice([0, 0, 0.1, 0.3]) if kind == "cross_entropy" else 0
        args = [x, target, reduction, ignore, smoothing]
        if self.rng.random() < 0.5:
            w = Var(self.fresh(), (c,), leaf=True)
            self.lines.append(f"input {w.name} {self.dtype} {c} 0 " +
                              " ".join(float.hex(round(self.rng.uniform(0.5, 2), 3)) for _ in range(c)))
            self.vars.append(w)
            args.append(w)
        return self.op(kind, args, tshape if reduction == "none" else ())

    def view(self):
        x = self.pick(lambda v: len(v.shape) >= 1, cplx=None if self.complex_mode else False)
        op = self.op
        self.op = lambda name, args, shape, view_of=None: op(name, args, shape, view_of, cplx=x.cplx)
        try:
            return self.view_of(x)
        finally:
            self.op = op

    def view_of(self, x):
        nd, s = len(x.shape), list(x.shape)
        kind = self.rng.choice(["transpose", "permute", "select", "slice", "narrow", "expand", "reshape",
                                "flatten", "squeeze", "unsqueeze"])
        if kind == "transpose" and nd >= 2:
            d0, d1 = self.rng.sample(range(nd), 2)
            s[d0], s[d1] = s[d1], s[d0]
            return self.op("transpose", [x, d0, d1], s, view_of=x)
        if kind == "permute":
            perm = list(range(nd))
            self.rng.shuffle(perm)
            return self.op("permute", [x, ",".join(map(str, perm))], [x.shape[p] for p in perm], view_of=x)
        if kind == "select":
            d = self.rng.randrange(nd)
            i = self.rng.randrange(s[d])
            return self.op("select", [x, d, i], s[:d] + s[d + 1:], view_of=x)
        if kind == "slice":
            d = self.rng.randrange(nd)
            start, step = self.rng.randrange(s[d]), self.rng.choice([1, 2])
            end = self.rng.randint(start + 1, s[d])
            s[d] = len(range(start, end, step))
            return self.op("slice", [x, d, start, end, step], s, view_of=x)
        if kind == "narrow":
            d = self.rng.randrange(nd)
            start = self.rng.randrange(s[d])
            length = self.rng.randint(1, s[d] - start)
            s[d] = length
            return self.op("narrow", [x, d, start, length], s, view_of=x)
        if kind == "expand" and 1 in s:
            s = [self.rng.randint(2, 3) if v == 1 else v for v in s]
            return self.op("expand", [x, ",".join(map(str, s))], s, view_of=x)
        if kind == "reshape":
            n = 1
            for v in s:
                n *= v
            divisors = [d for d in range(1, n + 1) if n % d == 0]
            first = self.rng.choice(divisors)
            return self.op("reshape", [x, f"{first},-1"], [first, n // first], view_of=x)
        if kind == "flatten" and nd >= 2:
            return self.op("flatten", [x, 0, nd - 1], [math.prod(s)], view_of=x)
        if kind == "squeeze" and 1 in s and nd >= 2:
            d = s.index(1)
            return self.op("squeeze", [x, d], s[:d] + s[d + 1:], view_of=x)
        d = self.rng.randint(0, nd)
        return self.op("unsqueeze", [x, d], s[:d] + [1] + s[d:], view_of=x)

    def matmul(self):
        a = self.pick(lambda v: len(v.shape) in (1, 2))
        if a is None:
            return None
        k = a.shape[-1]
        if self.rng.random() < 0.5:
            b = self.pick(lambda v: len(v.shape) in (1, 2) and v.shape[0] == k)
        else:
            b = None
        if b is None:
            b = self.input((k, self.rng.randint(1, 3)) if self.rng.random() < 0.7 else (k,), self.rng.random() < 0.6)
        shape = a.shape[:-1] + b.shape[1:]
        return self.op("matmul", [a, b], shape)

    def cat(self):
        a = self.pick(lambda v: len(v.shape) >= 1)
        others = [v for v in self.vars if v.shape == a.shape and not v.cplx]
        parts = [a] + [self.rng.choice(others) for _ in range(self.rng.randint(1, 2))]
        if self.rng.random() < 0.5:
            d = self.rng.randrange(len(a.shape))
            s = list(a.shape)
            s[d] *= len(parts)
            return self.op("cat", [d] + parts, s)
        d = self.rng.randint(0, len(a.shape))
        s = list(a.shape)
        s.insert(d, len(parts))
        return self.op("stack", [d] + parts, s)

    def inplace(self):
        t = self.pick(writable, cplx=None if self.complex_mode else False)
        if t is None:
            return None
        kind = self.rng.choice(["add_", "mul_", "copy_", "adds_", "muls_"])
        if kind in ("adds_", "muls_"):
            self.lines.append(f"inplace {kind} {t.name} {round(self.rng.uniform(-2, 2), 3)}")
        else:
            o = self.pick(lambda v: broadcast_to_ok(v.shape, t.shape) and v is not t, cplx=t.cplx)
            if o is None:
                o = self.complex_of(t.shape) if t.cplx else self.input(t.shape, True)
            extra = f" {self.rng.choice([1, -0.5, 2])}" if kind == "add_" else ""
            self.lines.append(f"inplace {kind} {t.name} {o.name}{extra}")
            mark_written(t, o)
        return t

    # --- indexing (--indexing): i64 indices and bool masks are `const` statements
    def const(self, dtype, shape, values):
        name = self.fresh()
        dims = ",".join(map(str, shape)) if shape else "-"
        self.lines.append(f"const {name} {dtype} {dims} " + " ".join(str(int(v)) for v in values))
        return name

    def dim_index(self, x, d, distinct=False):
        """An index for gather / scatter along d: x's number of dims, at most x's sizes elsewhere; with
        distinct, no two entries of one fibre along d are equal (scatter's writes do not collide)."""
        n = x.shape[d]
        shape = [self.rng.randint(1, s) for s in x.shape]
        shape[d] = self.rng.randint(1, n) if distinct else self.rng.randint(1, 4)
        fibres = math.prod(shape) // shape[d]
        cols = [self.rng.sample(range(n), shape[d]) if distinct else [self.rng.randrange(n) for _ in range(shape[d])]
                for _ in range(fibres)]
        # element (.., i along d, ..) in row-major order: fibre f = (outer, inner), entry i
        inner = math.prod(shape[d + 1:])
        values = [cols[(q // (shape[d] * inner)) * inner + q % inner][(q // inner) % shape[d]]
                  for q in range(math.prod(shape))]
        return self.const("i64", shape, values), tuple(shape)

    def source_like(self, shape, avoid=None):
        """A real variable of `shape` (not one sharing avoid's storage), or a new input."""
        ok = lambda v: v.shape == tuple(shape) and (avoid is None or v.root() is not avoid.root())
        return self.pick(ok, cplx=False) or self.input(shape, self.rng.random() < 0.7)

    def mask_for(self, shape):
        """A bool mask whose shape broadcasts to `shape` (some dims 1, maybe fewer dims)."""
        ms = [s if self.rng.random() < 0.7 else 1 for s in shape[self.rng.randint(0, len(shape) - 1):]]
        values = [self.rng.random() < 0.5 for _ in range(math.prod(ms))]
        if not any(values):  # masked_select keeps an element: the generator makes no empty tensors
            values[self.rng.randrange(len(values))] = True
        return self.const("bool", ms, values), ms, values

    def indexing(self):
        x = self.pick(lambda v: len(v.shape) >= 1 and 0 not in v.shape, cplx=False)
        if x is None:
            return None
        nd = len(x.shape)
        d = self.rng.randrange(nd)
        kind = self.rng.choice(["index_select", "gather", "scatter", "scatter_value", "scatter_add", "index_add",
                                "masked_fill", "masked_fill_t", "masked_select", "index_put"])
        if kind in ("index_select", "index_add"):
            k = self.rng.randint(1, 4)
            idx = self.const("i64", [k], [self.rng.randrange(x.shape[d]) for _ in range(k)])
            s = list(x.shape)
            s[d] = k
            if kind == "index_select":
                return self.op("index_select", [x, d, idx], s)
            return self.op("index_add", [x, d, idx, self.source_like(s), self.rng.choice([1, -0.5, 2])], x.shape)
        if kind in ("gather", "scatter", "scatter_value", "scatter_add"):
            idx, ishape = self.dim_index(x, d, distinct=kind in ("scatter", "scatter_value"))
            if kind == "gather":
                return self.op("gather", [x, d, idx], ishape)
            if kind == "scatter_value":
                return self.op("scatter_value", [x, d, idx, round(self.rng.uniform(-2, 2), 3)], x.shape)
            return self.op(kind, [x, d, idx, self.source_like(ishape)], x.shape)
        if kind in ("masked_fill", "masked_fill_t", "masked_select"):
            mask, ms, values = self.mask_for(x.shape)
            if kind == "masked_fill":
                return self.op("masked_fill", [x, mask, round(self.rng.uniform(-2, 2), 3)], x.shape)
            if kind == "masked_fill_t":
                return self.op("masked_fill_t", [x, mask, self.source_like(())], x.shape)
            lead = len(x.shape) - len(ms)

            def mask_at(pos):  # the mask broadcast to x's shape, at x's position pos
                q = 0
                for j, s in enumerate(ms):
                    q = q * s + (pos[lead + j] if s > 1 else 0)
                return values[q]
            count = sum(mask_at(pos) for pos in itertools.product(*[range(s) for s in x.shape]))
            return self.op("masked_select", [x, mask], (count,))
        return self.index_put(x)

    def index_put(self, x, inplace=False):
        k = self.rng.randint(1, len(x.shape))
        acc = self.rng.random() < 0.5
        p = self.rng.randint(1, 4)
        cells = list(itertools.product(*[range(s) for s in x.shape[:k]]))
        # Without accumulate, distinct targets: gradsphere's last write and torch's unspecified one agree.
        chosen = [self.rng.choice(cells) for _ in range(p)] if acc else self.rng.sample(cells, min(p, len(cells)))
        p = len(chosen)
        idx = [self.const("i64", [p], [c[j] - (x.shape[j] if self.rng.random() < 0.3 else 0) for c in chosen])
               for j in range(k)]
        result = (p,) + tuple(x.shape[k:])
        values = self.source_like(result[self.rng.randint(0, len(result)):], avoid=x if inplace else None)
        if inplace:
            self.lines.append(f"inplace index_put_ {x.name} {int(acc)} {values.name} " + " ".join(idx))
            mark_written(x, values)
            return x
        return self.op("index_put", [x, int(acc), values] + idx, x.shape)

    def indexing_inplace(self):
        t = self.pick(lambda v: writable(v) and len(v.shape) >= 1 and 0 not in v.shape, cplx=False)
        if t is None:
            return None
        kind = self.rng.choice(["scatter_add_", "index_add_", "masked_fill_", "index_put_"])
        d = self.rng.randrange(len(t.shape))
        if kind == "scatter_add_":
            idx, ishape = self.dim_index(t, d)
            src = self.source_like(ishape, avoid=t)
            self.lines.append(f"inplace scatter_add_ {t.name} {d} {idx} {src.name}")
        elif kind == "index_add_":
            k = self.rng.randint(1, 4)
            idx = self.const("i64", [k], [self.rng.randrange(t.shape[d]) for _ in range(k)])
            s = list(t.shape)
            s[d] = k
            src = self.source_like(s, avoid=t)
            self.lines.append(f"inplace index_add_ {t.name} {d} {idx} {src.name} {self.rng.choice([1, -0.5, 2])}")
        elif kind == "masked_fill_":
            mask, _, _ = self.mask_for(t.shape)
            self.lines.append(f"inplace masked_fill_ {t.name} {mask} {round(self.rng.uniform(-2, 2), 3)}")
            return t
        else:
            return self.index_put(t, inplace=True)
        mark_written(t, src)
        return t

    # --- complex statements (--complex): made from real pairs, seen through real views
    def complex_of(self, shape):
        re = self.pick(lambda v: v.shape == tuple(shape)) or self.input(shape, True)
        im = self.pick(lambda v: v.shape == tuple(shape)) or self.input(shape, self.rng.random() < 0.5)
        return self.op("complex", [re, im], shape, cplx=True)

    def complex_make(self):
        return self.complex_of(self.pick().shape)

    def complex_unary(self):
        z = self.pick(cplx=True) or self.complex_make()
        kind = self.rng.choice(["neg", "exp", "square", "clone", "conj", "abs", "real", "imag", "view_as_real"])
        if kind == "exp":  # keep exp's argument small
            z = self.op("muls", [z, 0.3], z.shape, cplx=True)
        if kind == "abs":
            return self.op("abs", [z], z.shape)
        if kind in ("real", "imag"):
            return self.op(kind, [z], z.shape, view_of=z)
        if kind == "view_as_real":
            return self.op(kind, [z], z.shape + (2,), view_of=z)
        return self.op(kind, [z], z.shape, cplx=True)

    def complex_binary(self):
        a = self.pick(cplx=True) or self.complex_make()
        b = self.pick(lambda v: broadcast_ok(a.shape, v.shape), cplx=True) or self.complex_of(a.shape)
        out = tuple(max(x, y) for x, y in zip(((1,) * (len(b.shape) - len(a.shape)) + a.shape),
                                               ((1,) * (len(a.shape) - len(b.shape)) + b.shape)))
        return self.op(self.rng.choice(["add", "sub", "mul"]), [a, b], out, cplx=True)

    def view_as_complex(self):
        x = self.pick(lambda v: len(v.shape) >= 1 and v.shape[-1] == 2)
        if x is None:
            return None
        return self.op("view_as_complex", [x], x.shape[:-1], view_of=x, cplx=True)

    def graph(self, size):
        for _ in range(self.rng.randint(1, 3)):
            self.input(self.random_shape(), True)
        if self.rng.random() < 0.5:
            self.input(self.random_shape(), False)
        makers = [(self.unary, 3), (self.scalar, 2), (self.binary, 3), (self.reduce, 2), (self.view, 4),
                  (self.matmul, 1), (self.cat, 1), (self.inplace, 4), (self.along, 1), (self.classify, 1)]
        if self.indexing_mode:
            makers += [(self.indexing, 4), (self.indexing_inplace, 2)]
        if self.complex_mode:
            makers += [(self.complex_make, 1), (self.complex_unary, 3), (self.complex_binary, 2),
                       (self.view_as_complex, 1)]
        for _ in range(size):
            fn = self.rng.choices([m for m, _ in makers], [w for _, w in makers])[0]
            fn()
        # loss = sum_k sum(v_k * c_k) over the last few variables that need grad (or any)
        terms = [v for v in self.vars[-4:]] + self.rng.sample(self.vars, min(2, len(self.vars)))
        loss = None
        for v in terms:
            if v.cplx:  # a real loss: weigh the (re, im) pairs
                v = self.op("view_as_real", [v], v.shape + (2,), view_of=v)
            c = self.input(v.shape, False)
            term = self.op("sum", [self.op("mul", [v, c], v.shape), "-", 0], ())
            loss = term if loss is None else self.op("add", [loss, term], ())
        self.lines.append(f"loss {loss.name}")
        for v in self.vars:
            if v.leaf and v.requires_grad:
                n = 1
                for s in v.shape:
                    n *= s
                self.lines.append(f"probe {v.name} {self.value_text(n, edges=False)}")
        if self.jvp:  # drawn after the graph, so a seed's graphs are those without --jvp up to here
            for p in [line.split() for line in self.lines if line.startswith("input ")]:
                if p[4] == "1":  # declared so (a written constant leaf's Var requires grad too)
                    self.lines.append(f"tangent {p[1]} {self.value_text(len(p) - 5, edges=False)}")
        return "\n".join(self.lines) + "\n"


# ---------------------------------------------------------------- the PyTorch side

def has_tangents(text):
    """A --jvp program: forward mode on both sides (tangents of every variable, H v of the loss)."""
    return any(line.startswith("tangent ") for line in text.splitlines())


def run_torch(text, clone_saved=False, clone_operands=False):
    """Runs a program in PyTorch (with `tangent` lines: forward mode, as graph_runner --jvp: J v of
    every variable by torch.func.jvp and H v of the loss by torch.func.jvp of torch.func.grad, stages
    jvp and hvp). clone_saved: every tensor saved for backward is copied when it is
    saved (value semantics: torch's refusal of a saved tensor modified in place becomes the values
    the forward saw). clone_operands: an in-place op's tensor operand is cloned first (torch refuses
    one that partly overlaps the written tensor; gradsphere reads it as its value before the write)."""
    import contextlib
    import torch
    import torch.nn.functional as F

    out, env, inputs, probes, loss = [], {}, [], {}, None
    order, aliases = [], []
    jvp = has_tangents(text)
    dtypes = {"f64": torch.float64, "f32": torch.float32}

    def num(s):
        return float.fromhex(s) if "0x" in s else float(s)

    def ints(s):
        return [] if s == "-" else [int(float(d)) for d in s.split(",")]

    def reduce(fn_all, fn_dims, x, dims, keep):
        d = ints(dims)
        if not d:
            return fn_all(x) if keep != "1" else fn_dims(x, tuple(range(x.dim())), True)
        return fn_dims(x, tuple(d), keep == "1")

    def keyed_keep(x):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import philox_ref
        keep = philox_ref.keep_mask(*DROPOUT_KEY, tuple(x.shape), 0.5)
        return torch.from_numpy(keep.astype("float64")).to(x.dtype)

    unary = {"neg": torch.neg, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
             "abs": torch.abs, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu, "erf": torch.erf,
             "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
             "square": torch.square, "clone": torch.clone, "contiguous": lambda x: x.contiguous(),
             "squeeze_all": torch.squeeze,
             "dropout": lambda x: x * keyed_keep(x) / 0.5, "dropout_p1": lambda x: F.dropout(x, 1.0, training=True)}
    unary.update({op: getattr(torch, op) for op in ["sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
                                                     "asinh", "acosh", "atanh", "log1p", "expm1", "log2", "log10",
                                                     "exp2", "floor", "ceil", "round", "trunc"]})
    binary = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow,
              "matmul": torch.matmul, "maximum": torch.maximum, "minimum": torch.minimum, "atan2": torch.atan2}
    def prod_dims(x, dims, keep):
        # torch.prod takes one dim or all (the generator asks no more; several would go one by one).
        if len(dims) == x.dim():
            return x.prod().reshape([1] * x.dim()) if keep else x.prod()
        for d in sorted(dims, reverse=True):
            x = x.prod(d, keepdim=True)
        return x if keep else x.squeeze(tuple(dims)) if dims else x

    reductions = {"sum": (torch.sum, lambda x, d, k: torch.sum(x, d, keepdim=k)),
                  "mean": (torch.mean, lambda x, d, k: torch.mean(x, d, keepdim=k)),
                  "max": (torch.max, lambda x, d, k: torch.amax(x, d, keepdim=k)),
                  "min": (torch.min, lambda x, d, k: torch.amin(x, d, keepdim=k)),
                  "logsumexp": (lambda x: torch.logsumexp(x, tuple(range(x.dim()))),
                                lambda x, d, k: torch.logsumexp(x, d, keepdim=k)),
                  "prod": (torch.prod, prod_dims)}

    def apply(op, a):
        v = lambda i: env[a[i]]
        if op in unary:
            return unary[op](v(0))
        if op in binary:
            return binary[op](v(0), v(1))
        if op in reductions:
            fa, fd = reductions[op]
            return reduce(fa, fd, v(0), a[1], a[2])
        if op == "complex":
            return torch.complex(v(0), v(1))
        if op in ("real", "imag"):
            return getattr(torch, op)(v(0))
        if op == "conj":  # gradsphere's conj is a new tensor, not torch.conj's conjugate-bit view
            return torch.conj_physical(v(0))
        if op == "view_as_real":
            return torch.view_as_real(v(0).resolve_conj())
        if op == "view_as_complex":
            return torch.view_as_complex(v(0))
        if op == "softplus":
            return F.softplus(v(0), num(a[1]), num(a[2]))
        if op == "elu":
            return F.elu(v(0), num(a[1]))
        if op == "leaky_relu":
            return F.leaky_relu(v(0), num(a[1]))
        if op == "hardtanh":
            return F.hardtanh(v(0), num(a[1]), num(a[2]))
        if op == "clamps":
            return torch.clamp(v(0), None if a[1] == "-" else num(a[1]), None if a[2] == "-" else num(a[2]))
        if op == "clampt":
            return torch.clamp(v(0), None if a[1] == "-" else env[a[1]], None if a[2] == "-" else env[a[2]])
        if op == "adds":
            return v(0) + num(a[1])
        if op == "muls":
            return v(0) * num(a[1])
        if op == "pows":
            return torch.pow(v(0), num(a[1]))
        if op in ("var", "std"):
            return getattr(torch, op)(v(0), tuple(ints(a[1])), correction=int(a[2]), keepdim=a[3] == "1")
        if op == "norm":
            return torch.linalg.vector_norm(v(0), num(a[1]), tuple(ints(a[2])), keepdim=a[3] == "1")
        if op in ("cumsum", "cumprod"):
            d = int(a[1])
            if a[2] == "1":  # from the end
                return getattr(v(0).flip(d), op)(d).flip(d)
            return getattr(v(0), op)(d)
        if op in ("softmax", "log_softmax"):
            return getattr(torch, op)(v(0), int(a[1]))
        if op == "cross_entropy":
            return F.cross_entropy(v(0), v(1), env[a[5]] if len(a) > 5 else None, ignore_index=int(a[3]),
                                   reduction=a[2], label_smoothing=num(a[4]))
        if op == "nll_loss":
            return F.nll_loss(v(0), v(1), env[a[5]] if len(a) > 5 else None, ignore_index=int(a[3]), reduction=a[2])
        if op == "transpose":
            return v(0).transpose(int(a[1]), int(a[2]))
        if op == "permute":
            return v(0).permute(*ints(a[1]))
        if op == "select":
            return v(0).select(int(a[1]), int(a[2]))
        if op == "slice":
            d, s, e, st = (int(x) for x in a[1:5])
            return v(0)[(slice(None),) * d + (slice(s, e, st),)]
        if op == "narrow":
            return v(0).narrow(int(a[1]), int(a[2]), int(a[3]))
        if op == "expand":
            return v(0).expand(*ints(a[1]))
        if op == "reshape":
            return v(0).reshape(*ints(a[1]))
        if op == "view":
            return v(0).view(*ints(a[1]))
        if op == "flatten":
            return v(0).flatten(int(a[1]), int(a[2]))
        if op == "squeeze":
            return v(0).squeeze(int(a[1]))
        if op == "unsqueeze":
            return v(0).unsqueeze(int(a[1]))
        if op in ("cat", "stack"):
            ts = [env[n] for n in a[1:]]
            return torch.cat(ts, int(a[0])) if op == "cat" else torch.stack(ts, int(a[0]))
        if op in ("index_select", "gather"):
            return getattr(torch, op)(v(0), int(a[1]), v(2))
        if op in ("scatter", "scatter_add"):
            return getattr(v(0), op)(int(a[1]), v(2), v(3))
        if op == "scatter_value":
            return v(0).scatter(int(a[1]), v(2), num(a[3]))
        if op == "index_add":
            return v(0).index_add(int(a[1]), v(2), v(3), alpha=num(a[4]))
        if op == "masked_fill":
            return v(0).masked_fill(v(1), num(a[2]))
        if op == "masked_fill_t":
            return v(0).masked_fill(v(1), v(2))
        if op == "masked_select":
            return torch.masked_select(v(0), v(1))
        if op == "index_put":
            return v(0).index_put(tuple(env[n] for n in a[3:]), v(2), accumulate=a[1] == "1")
        raise ValueError(f"unknown op {op}")

    def fmt(kind, name, t):
        if t is None:
            return f"{kind} {name} none"
        if t._is_zerotensor():  # torch's efficient zeros (e.g. abs's second derivative) have no storage
            t = torch.zeros(t.shape, dtype=t.dtype)
        if t.is_complex():
            t = torch.view_as_real(t.detach().resolve_conj())
        vals = t.detach().contiguous().to(torch.float64).reshape(-1).tolist()
        return f"{kind} {name} " + " ".join(float.hex(x) for x in vals)

    stage = "build"
    saves, current = [], [None]  # (statement's op, tensor, its version when saved)

    def pack(t):
        saves.append((current[0], t, t._version))
        return t.clone()

    hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t) if clone_saved else contextlib.nullcontext()
    def plain(t):
        """The tensor inside torch.func's wrappers (--jvp), whose storage and view state are the real ones."""
        while torch._C._functorch.is_functorch_wrapped_tensor(t):
            t = torch._C._functorch.get_unwrapped(t)
        return t

    def values_tensor(vals, dtype, shape):
        return torch.tensor([num(x) for x in vals], dtype=dtype).reshape(shape)

    def input_tensor(a):  # the arguments of an `input` statement
        return values_tensor(a[4:], dtypes[a[1]], ints(a[2]))

    def dual_inputs():
        """--jvp: the inputs that require grad, and their tangents, in the program's order."""
        lines = [l.split() for l in text.splitlines()]
        primals = {p[1]: input_tensor(p[1:]) for p in lines if p[:1] == ["input"] and p[4] == "1"}
        tangents = {p[1]: values_tensor(p[2:], primals[p[1]].dtype, primals[p[1]].shape)
                    for p in lines if p[:1] == ["tangent"]}
        return tuple(primals.values()), tuple(tangents[n] for n in primals)

    def execute(xs=None):
        """Runs the statements. xs: the values of the inputs that require grad (torch.func's wrapped
        tensors); by default they are made here and require grad."""
        nonlocal loss
        env.clear(), order.clear(), inputs.clear(), aliases.clear()
        for line in text.splitlines():
            p = line.split()
            if not p or p[0].startswith("#"):
                continue
            kind, a = p[0], p[1:]
            if kind == "input":
                t = input_tensor(a)
                if a[3] == "1":
                    t = t.requires_grad_(True) if xs is None else xs[len(inputs)]
                    inputs.append(a[0])
                env[a[0]] = t
                order.append(a[0])
            elif kind == "const":  # i64 indices and bool masks: not printed, never differentiated
                dt = {"i64": torch.int64, "bool": torch.bool}[a[1]]
                env[a[0]] = torch.tensor([int(x) for x in a[3:]], dtype=dt).reshape(ints(a[2]))
            elif kind == "op":
                current[0] = a[1]
                r = apply(a[1], a[2:])
                if a[1] in MAYBE_VIEW_OPS:
                    aliases.append(f"alias {a[0]} {int(plain(r)._is_view() or plain(r) is plain(env[a[2]]))}")
                env[a[0]] = r
                order.append(a[0])
            elif kind == "inplace":
                current[0] = a[0]
                t = env[a[1]]
                # torch 2.14 takes a view made before its base gained history (through an in-place
                # op) for "a leaf Variable that requires grad" unless its grad_fn was read first,
                # which regenerates it: read it, so torch follows its own view semantics.
                t.grad_fn
                def operand(n):
                    o = env[n]
                    if clone_operands:
                        return o.clone()
                    po, pt = plain(o), plain(t)
                    same_memory = po.untyped_storage().data_ptr() == pt.untyped_storage().data_ptr()
                    identical = (po.data_ptr(), po.shape, po.stride()) == (pt.data_ptr(), pt.shape, pt.stride())
                    # With --jvp an identical operand too: torch's forward AD updates the target's
                    # tangent in place before it reads the operand's (y.mul_(y) at 3, tangent 1: 12, not 6).
                    if same_memory and (jvp or not identical):
                        # torch refuses most of these; the ones it misses (a broadcast view of part
                        # of the target) it reads while writing, so the result depends on its loop.
                        raise RuntimeError("some elements of the input tensor and the written-to tensor refer to "
                                           "a single memory location (diff_autograd: aliased operand)")
                    return o
                with torch.autograd.set_grad_enabled(True):
                    if a[0] == "add_":
                        t.add_(operand(a[2]), alpha=num(a[3]))
                    elif a[0] == "mul_":
                        t.mul_(operand(a[2]))
                    elif a[0] == "copy_":
                        t.copy_(operand(a[2]))
                    elif a[0] == "adds_":
                        t.add_(num(a[2]))
                    elif a[0] == "muls_":
                        t.mul_(num(a[2]))
                    elif a[0] == "scatter_add_":
                        t.scatter_add_(int(a[2]), env[a[3]], operand(a[4]))
                    elif a[0] == "index_add_":
                        t.index_add_(int(a[2]), env[a[3]], operand(a[4]), alpha=num(a[5]))
                    elif a[0] == "masked_fill_":
                        t.masked_fill_(env[a[2]], num(a[3]))
                    elif a[0] == "index_put_":
                        t.index_put_(tuple(env[n] for n in a[4:]), operand(a[3]), accumulate=a[2] == "1")
            elif kind == "loss":
                loss = a[0]
            elif kind == "probe":
                probes[a[0]] = torch.tensor([num(x) for x in a[1:]], dtype=env[a[0]].dtype).reshape(env[a[0]].shape)

    try:
        hooks.__enter__()
        if jvp:
            stage = "jvp"
            primals, tangents = dual_inputs()

            def every_variable(*xs):
                execute(xs)
                return tuple(env[n] for n in order)
            values, jv = torch.func.jvp(every_variable, primals, tangents)
            out += aliases + [fmt("value", n, v) for n, v in zip(order, values)]
            out += [fmt("tangent", n, t) for n, t in zip(order, jv)]
            if loss is None or not primals:
                return out
            stage = "hvp"

            def loss_of(*xs):
                execute(xs)
                return env[loss]
            grads = torch.func.grad(loss_of, argnums=tuple(range(len(primals))))
            _, hv = torch.func.jvp(grads, primals, tangents)
            out += [fmt("hvp", n, h) for n, h in zip(inputs, hv)]
            return out
        execute()
        out += aliases
        for n in order:
            out.append(fmt("value", n, env[n]))
        # Which ops saved a tensor that a later in-place write changed (what torch refuses).
        out += [f"note written-save {op}" for op in sorted({op for op, t, v in saves if t._version != v})]
        xs = [env[n] for n in inputs]
        if loss is None or not xs:
            return out
        stage = "backward"
        g = torch.autograd.grad(env[loss], xs, create_graph=True, allow_unused=True)
        out += [fmt("grad", n, gi) for n, gi in zip(inputs, g)]
        stage = "double"
        s = None
        for n, gi in zip(inputs, g):
            if gi is None or not gi.requires_grad or n not in probes:
                continue
            term = (gi * probes[n]).sum()
            s = term if s is None else s + term
        if s is None:
            return out
        gg = torch.autograd.grad(s, xs, allow_unused=True)
        out += [fmt("gradgrad", n, gi) for n, gi in zip(inputs, gg)]
    except Exception as e:  # torch.func refuses with other types too (NotImplementedError, ...)
        if not (jvp or isinstance(e, RuntimeError)):
            raise
        kind = "" if isinstance(e, RuntimeError) else type(e).__name__ + ": "
        out.append(f"error {stage} {kind}" + " ".join(str(e).split()))
    finally:
        hooks.__exit__(None, None, None)
    return out


# ---------------------------------------------------------------- comparison

def parse(lines):
    res, err = {}, None
    for line in lines:
        p = line.split()
        if not p:
            continue
        if p[0] == "error":
            err = (p[1], " ".join(p[2:]))
            continue
        if p[0] == "note":
            continue
        if p[0] == "alias":
            res[("alias", p[1])] = [float(p[2])]
            continue
        vals = None if p[2:] == ["none"] else [float.fromhex(x) for x in p[2:]]
        res[(p[0], p[1])] = vals
    return res, err


def compare(gs_lines, torch_lines, tol, atol, inputs=()):
    g, ge = parse(gs_lines)
    t, te = parse(torch_lines)
    problems = []
    if (ge is None) != (te is None):
        problems.append(("refused-by-gradsphere" if ge else "refused-by-torch",
                         f"gradsphere: {ge}  torch: {te}"))
    both_ran = ge is None and te is None
    # The largest magnitude the graph computed (inputs left out, at most 1e6): a tensor near zero
    # (a cancellation) is compared relative to it, since its rounding error is that of the terms
    # that cancelled; the cap keeps a 1e300 in --edges graphs from excusing every difference.
    graph_scale = min(1e6, max([abs(x) for (kind, name), vals in t.items()
                                if vals and kind != "alias" and not (kind == "value" and name in inputs)
                                for x in vals if math.isfinite(x)] + [0.0]))
    for key in sorted(set(g) | set(t)):
        if key not in g or key not in t:
            # No double-backward line means no first gradient had history: zeros, as None does.
            if key[0] == "gradgrad" and both_ran:
                g.setdefault(key, None), t.setdefault(key, None)
            else:
                if both_ran:
                    problems.append((key[0], f"{key[1]}: missing in {'gradsphere' if key not in g else 'torch'}"))
                continue
        a, b = g[key], t[key]
        if a is None and b is None:
            continue
        if a is None or b is None:
            a = a if a is not None else [0.0] * len(b)
            b = b if b is not None else [0.0] * len(a)
        if len(a) != len(b):
            problems.append((key[0], f"{key[1]}: {len(a)} values against torch's {len(b)}"))
            continue
        # Non-finite values must match exactly (NaN with NaN, an infinity with the same infinity).
        odd = [(i, x, y) for i, (x, y) in enumerate(zip(a, b))
               if not (math.isfinite(x) and math.isfinite(y)) and not (x == y or (x != x and y != y))]
        if odd:
            i, x, y = odd[0]
            problems.append((key[0], f"{key[1]}[{i}]: {x} against torch's {y} ({len(odd)} such)"))
            continue
        pairs = [(x, y) for x, y in zip(a, b) if math.isfinite(x) and math.isfinite(y)]
        scale = max([abs(y) for _, y in pairs] + [0.0])
        worst = max([abs(x - y) for x, y in pairs] + [0.0])
        if worst > max(tol * scale, tol * graph_scale, atol):
            problems.append((key[0], f"{key[1]}: max |diff| {worst:.3g} (scale {scale:.3g})"))
    return problems


def run_gs(runner, text):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        r = subprocess.run([runner] + ["--jvp"] * has_tangents(text) + [path], capture_output=True, text=True, timeout=60)
    finally:
        os.unlink(path)
    if r.returncode != 0:
        return [f"error runner exit {r.returncode}: {r.stderr.strip()}"]
    return r.stdout.splitlines()


def first_error(lines):
    return next((l for l in lines if l.startswith("error")), None)


def judge(runner, text, tol, atol):
    """Runs one program on both sides: (category, problems, torch's output)."""
    gs_out, th_out = run_gs(runner, text), run_torch(text)
    gs_err, th_err = first_error(gs_out), first_error(th_out)
    # view_as_complex of an elementwise result whose layout torch kept permuted (see below).
    if th_err and not gs_err and "must have a last dimension with stride 1" in th_err:
        return "layout: a view on one side only (not compared)", [], th_out
    extension = None
    if th_err and not gs_err:
        # Where torch refuses and gradsphere defines a meaning (engine/README.md, "Differences"),
        # compare with torch run under that meaning.
        if "refer to a single memory location" in th_err:
            extension, th_out = "aliased operand", run_torch(text, clone_operands=True)
        elif "modified by an inplace operation" in th_err:
            extension, th_out = "saved tensor written", run_torch(text, clone_saved=True)
        th_err = first_error(th_out)
        if extension and th_err and "modified by an inplace operation" in th_err:
            extension, th_out = extension + " + saved tensor written", run_torch(text, True, True)
            th_err = first_error(th_out)
    if th_err and not gs_err and has_tangents(text):
        # torch.func refuses (no forward-mode formula, a transform limit): nothing to compare with.
        return "torch refuses", [], th_out
    inputs = {l.split()[1] for l in text.splitlines() if l.startswith("input ")}
    problems = compare(gs_out, th_out, tol, atol, inputs)
    if any(kind == "alias" for kind, _ in problems):
        # torch's elementwise results keep their input's layout, gradsphere's are contiguous, so a
        # later reshape may be a view on one side and a copy on the other (torch: unspecified).
        return "layout: a view on one side only (not compared)", [], th_out
    if problems:
        return "mismatch", problems, th_out
    if extension:
        return f"agree where torch refuses ({extension})", [], th_out
    if gs_err and th_err and has_tangents(text):  # the stage: values and tangents before it still compared
        return f"both refused ({gs_err.split()[1]})", [], th_out
    return ("both refused" if gs_err and th_err else "agree"), [], th_out


def refusal_reason(error_line):
    """An error line without its variable parts (sizes, addresses), to count alike refusals together."""
    words = error_line.split()[1:]
    return " ".join(words[:14])


def edge_table(runner):
    """Each op alone at each edge value (pairs for binary ops and reductions): the cases that differ."""
    values = EDGE_VALUES + [float("nan")]

    def program(body, inputs):
        lines = [f"input {n} f64 {len(v)} 1 " + " ".join(float.hex(x) for x in v) for n, v in inputs]
        lines += body + ["input w f64 1 0 0x1p+0", "op m mul r w", "op l sum m - 0", "loss l"]
        lines += [f"probe {n} " + " ".join("0x1p+0" for _ in v) for n, v in inputs]
        return "\n".join(lines) + "\n"

    cases = [(f"{op}({x})", program([f"op r {op} x"], [("x", [x])]))
             for op in UNARY + POSITIVE_UNARY + sorted(DOMAIN_UNARY) for x in values]
    cases += [(f"{op}({x}, {', '.join(map(str, p))})", program([f"op r {op} x " + " ".join(map(str, p))], [("x", [x])]))
              for op in sorted(PARAM_UNARY) for p in PARAM_UNARY[op] for x in values + [10.0, 20.0, -0.5, 0.3]]
    cases += [(f"clampt({x}, {lo}, {hi})", program(["op r clampt x l h"], [("x", [x]), ("l", [lo]), ("h", [hi])]))
              for x, lo, hi in itertools.product([0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan")],
                                                 repeat=3)]
    cases += [(f"pow({x}, {e})", program([f"op r pows x {e}"], [("x", [x])]))
              for e in (2, 3, 0.5, -0.5, -1, -1.5, -2, 0, 1) for x in values]
    cases += [(f"{op}({x}, {y})", program([f"op r {op} x y"], [("x", [x]), ("y", [y])]))
              for op in BINARY + ["div", "pow"] for x in values for y in values]
    cases += [(f"{op}([{x}, {y}])", program([f"op r {op} x 0 {'1 ' if op in ('var', 'std') else ''}0"], [("x", [x, y])]))
              for op in REDUCE + ["var", "std"] for x in values for y in values]
    cases += [(f"norm{p}([{x}, {y}])", program([f"op r norm x {p} 0 0"], [("x", [x, y])]))
              for p in ("1", "2", "inf") for x in values for y in values]
    cases += [(f"{op}{'_rev' if rev else ''}([{x}, {y}])",
               program([f"op r {op} x 0" + (f" {rev}" if op.startswith("cum") else "")], [("x", [x, y])]))
              for op in ALONG for rev in (0, 1) if rev == 0 or op.startswith("cum") for x in values for y in values]
    # Class 1 of logits [x, y], with and without label smoothing.
    cases += [(f"cross_entropy{'_smoothed' if ls else ''}([{x}, {y}])",
               program(["const t i64 - 1", f"op r cross_entropy x t mean -100 {ls}"], [("x", [x, y])]))
              for ls in (0, 0.2) for x in values for y in values]
    # Indexing ops move values (and sum duplicates): each with edge values among its inputs. x and y
    # are 2-vectors, s a 0-dim fill value.
    indexing = [("index_select", ["const i i64 3 1 0 1", "op r index_select x 0 i"], "x"),
                ("gather", ["const i i64 3 1 1 0", "op r gather x 0 i"], "x"),
                ("scatter_add", ["const i i64 2 1 1", "op r scatter_add x 0 i y"], "xy"),
                ("index_add", ["const i i64 2 0 0", "op r index_add x 0 i y -0.5"], "xy"),
                ("index_put_acc", ["const i i64 2 -1 1", "op r index_put x 1 y i"], "xy"),
                ("masked_fill", ["const k bool 2 1 0", "op r masked_fill_t x k s"], "xs"),
                ("masked_select", ["const k bool 2 0 1", "op r masked_select x k"], "x")]
    for op, body, names in indexing:
        for x in values:
            for y in values:
                ins = {"x": [("x", [x, y])], "xy": [("x", [x, 1.5]), ("y", [y, -0.5])],
                       "xs": [("x", [1.5, x]), ("s", [y])]}[names]
                text = program(body, ins).replace("input s f64 1 1", "input s f64 - 1")  # s is 0-dim
                cases.append((f"{op}({x}, {y})", text))
    differing = 0
    for label, text in cases:
        category, problems, _ = judge(runner, text, 1e-9, 1e-12)
        if category == "mismatch":
            differing += 1
            print(label, "::", "; ".join(f"{k} {w}" for k, w in problems[:3]))
    print(f"\n{len(cases)} single-op cases at the edges: {differing} differ")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--size", type=int, default=10, help="statements per graph (before the loss)")
    ap.add_argument("--dtype", choices=["f64", "f32"], default="f64")
    ap.add_argument("--complex", action="store_true", help="also complex tensors (complex, real, imag, conj, "
                    "view_as_real, view_as_complex, complex arithmetic)")
    ap.add_argument("--edges", action="store_true", help="inputs at the edges of the ops' domains "
                    "(0, -0, infinities, subnormals) and domain-restricted ops on raw inputs")
    ap.add_argument("--indexing", action="store_true", help="also the indexing ops (index_select, gather, "
                    "scatter, scatter_add, index_add, masked_fill, masked_select, index_put and in-place forms) "
                    "with i64 indices and bool masks (`const` statements)")
    ap.add_argument("--jvp", action="store_true", help="forward mode instead of backward: random tangents for "
                    "the inputs that require grad; the tangent of every variable (torch.func.jvp) and the "
                    "Hessian-vector product of the loss, forward-over-reverse (jvp of torch.func.grad)")
    ap.add_argument("--runner", default="build/tools/graph_runner")
    ap.add_argument("--edge-table", action="store_true", help="instead of random graphs: every unary op, pow "
                    "with scalar exponents, the binary ops and the reductions alone at each edge value "
                    "(and pairs of them), values and first and second derivatives")
    ap.add_argument("--keep", default="/tmp/gs-diff-autograd")
    ap.add_argument("--replay", help="run one program file and print both sides' differences")
    args = ap.parse_args()
    tol, atol = (1e-9, 1e-12) if args.dtype == "f64" else (1e-4, 1e-6)
    if args.edge_table:
        return edge_table(args.runner)
    if args.replay:
        category, problems, _ = judge(args.runner, open(args.replay).read(), tol, atol)
        print(category)
        for p in problems:
            print(*p)
        return 0
    os.makedirs(args.keep, exist_ok=True)
    rng = random.Random(args.seed)
    counts, kinds = collections.Counter(), collections.Counter()
    written_saves = collections.Counter()  # ops whose tensor saved in torch was written later
    refusals = collections.Counter()  # --jvp: why torch.func refused
    statements = 0
    for i in range(args.graphs):
        text = Generator(rng, args.dtype, args.complex, args.edges, args.indexing, args.jvp).graph(args.size)
        for l in text.splitlines():
            p = l.split()
            statements += p[0] in ("op", "inplace")
            kinds[p[2] if p[0] == "op" else p[1] if p[0] == "inplace" else p[0]] += 1
        category, problems, th_out = judge(args.runner, text, tol, atol)
        counts[category] += 1
        if problems:
            path = os.path.join(args.keep, f"graph-{i}.txt")
            with open(path, "w") as f:
                f.write(text)
            for kind, what in problems[:3]:
                print(f"graph {i} ({path}): {kind}: {what}")
        if category == "torch refuses":
            refusals[refusal_reason(first_error(th_out))] += 1
        if "saved tensor written" in category:
            written_saves.update(l.split()[2] for l in th_out if l.startswith("note written-save"))
    print(f"\n{args.graphs} graphs ({args.dtype}{', complex' if args.complex else ''}{', edges' if args.edges else ''}"
          f"{', indexing' if args.indexing else ''}{', jvp' if args.jvp else ''}, "
          f"seed {args.seed}, "
          f"{statements} statements): " + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    if written_saves:
        print("where torch refused a saved tensor written in place, the ops that had saved it:",
              ", ".join(f"{k} {v}" for k, v in written_saves.most_common()))
    if refusals:
        print("torch refused:", "; ".join(f"{v}x {k}" for k, v in refusals.most_common()))
    print("statements by kind:", ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    return 1 if counts["mismatch"] else 0


if __name__ == "__main__":
    sys.exit(main())
