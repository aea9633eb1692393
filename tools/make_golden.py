#!/usr/bin/env python3
"""Writes the torch-harmonics golden files that the C++ tests compare gradsphere with.

A reference tool, run once by hand; the tests read its committed output and need no Python:

    python3 -m venv /opt/gs-ref
    /opt/gs-ref/bin/pip install "torch==2.14.1" "torch-harmonics==0.9.3" safetensors numpy
    /opt/gs-ref/bin/python tools/make_golden.py

tests/models/data/golden_sfno.safetensors (tests/models/test_sfno_golden.cpp)
    For two small torch-harmonics 0.9.3 example SFNOs ("a": equiangular input, layer norm,
    learnable latlon embedding, biases, residual projection; "b": legendre-gauss, instance norm,
    spectral embedding, relu, 0.75 thresholding), in f32 and in f64, under "<cfg>.<dtype>.":
      param.<name>   every parameter, random (so no weight sits at an initial constant)
      buffer.<name>  torch's persistent buffers (the spectral position table)
      input, target  (2, in_chans, H, W) and (2, out_chans, H, W)
      output         the model's output in train mode
      loss           mean((output - target)^2), shape (1,)
      grad.<name>    d loss / d parameter;  grad_input  d loss / d input
    The f64 reference is torch-harmonics' code run in f64 throughout. A stock model.double() is not:
    the example net builds its SHTs with .float() (f32-rounded Legendre tables), computes the
    spectral position table in the default dtype and stores it with .float(), SpectralConvS2.forward
    casts its input with x.float(), and model.double() keeps complex weights complex64. So the f64
    model is built and run with torch's default dtype f64 and torch.Tensor.float / nn.Module.float
    as the identity (see f64_throughout), and its complex weights are converted to complex128.

tests/ops/data/golden_sht.safetensors (tests/ops/test_sht_golden.cpp)
    torch-harmonics' RealSHT / InverseRealSHT / RealVectorSHT / InverseRealVectorSHT in f64, for
    every normalisation (ortho, four-pi, schmidt) and csphase (True, False), on an equiangular
    13 x 24 grid (lmax = mmax = 7) and a legendre-gauss 12 x 24 grid (lmax = mmax = 12), under
    "<grid>.<norm>.<csphase>.":
      scalar.x (1, nlat, nlon) -> scalar.sht (1, lmax, mmax);  scalar.c -> scalar.isht
      vector.x (1, 2, nlat, nlon) -> vector.sht (1, 2, lmax, mmax);  vector.c -> vector.isht
    The inverse inputs are random coefficients with the l < m entries and the imaginary parts of
    m = 0 zero. These are values computed by code independent of gradsphere's recurrence. They are
    computed with torch's default dtype set to f64: RealVectorSHT builds its 1 / (l (l + 1)) factor
    from an int64 arange, so in the default dtype, and in f32 it is off by up to 6e-8 relative.

c128 tensors are stored as F64 with a trailing (re, im) dim and listed in the metadata key
"gradsphere.complex128", as gradsphere's own files do (safetensors has no 128-bit complex type).
"""
import contextlib
import json
import os

import torch
from safetensors.torch import save_file
from torch_harmonics import InverseRealSHT, InverseRealVectorSHT, RealSHT, RealVectorSHT
from torch_harmonics.examples.models.sfno import SphericalFourierNeuralOperator as SFNO

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SFNO_CONFIGS = {
    "a": dict(img_size=(16, 32), grid="equiangular", grid_internal="legendre-gauss", scale_factor=2,
              in_chans=3, out_chans=2, embed_dim=8, num_layers=3, normalization_layer="layer_norm",
              pos_embed="learnable latlon", bias=True, residual_prediction=True),
    "b": dict(img_size=(12, 24), grid="legendre-gauss", grid_internal="legendre-gauss", scale_factor=1,
              in_chans=2, out_chans=2, embed_dim=6, num_layers=2, normalization_layer="instance_norm",
              pos_embed="spectral", activation_function="relu", residual_prediction=True,
              hard_thresholding_fraction=0.75, mlp_ratio=1.5),
}

SHT_GRIDS = {"equiangular": (13, 24, 7), "legendre-gauss": (12, 24, 12)}
NORMS = ("ortho", "four-pi", "schmidt")


class Writer:
    def __init__(self):
        self.tensors, self.c128 = {}, []

    def add(self, name, t):
        t = t.detach().contiguous().clone()
        if t.dtype == torch.complex128:
            self.c128.append(name)
            t = torch.view_as_real(t).contiguous()
        self.tensors[name] = t

    def save(self, path, metadata):
        meta = dict(metadata)
        meta["gradsphere.complex128"] = json.dumps(sorted(self.c128))
        save_file(self.tensors, path, metadata=meta)
        print(f"{os.path.relpath(path, ROOT)}: {len(self.tensors)} tensors, {os.path.getsize(path)} bytes")


@contextlib.contextmanager
def f64_throughout(no_float_casts=True):
    """torch's default dtype f64; torch.zeros / torch.randn asked for complex64 give complex128
    (the spectral position table is built from complex64 zeros); torch.Tensor.float and
    nn.Module.float as the identity."""
    saved = torch.Tensor.float, torch.nn.Module.float, torch.zeros, torch.randn, torch.get_default_dtype()

    def widen(factory):
        def make(*a, **k):
            if k.get("dtype") == torch.complex64:
                k["dtype"] = torch.complex128
            return factory(*a, **k)
        return make

    torch.set_default_dtype(torch.float64)
    torch.zeros, torch.randn = widen(saved[2]), widen(saved[3])
    if no_float_casts:
        torch.Tensor.float = lambda self, *a, **k: self
        torch.nn.Module.float = lambda self: self
    try:
        yield
    finally:
        torch.Tensor.float, torch.nn.Module.float, torch.zeros, torch.randn = saved[:4]
        torch.set_default_dtype(saved[4])


def sfno_case(w, pre, cfg, state, x32, target32, dt):
    model = SFNO(**cfg).train()
    params = dict(model.named_parameters())
    if dt == torch.float64:  # the f32 model's buffers are f32-rounded: keep the f64 ones built here
        state = {k: v for k, v in state.items() if k in params}
    model.load_state_dict(state, strict=dt == torch.float32)
    if dt == torch.float64:
        model = model.double()
        for p in model.parameters():  # .double() leaves complex64 weights as they are
            if p.dtype == torch.complex64:
                p.data = p.data.to(torch.complex128)
    x = x32.detach().clone().to(dt).requires_grad_(True)
    target = target32.to(dt)
    y = model(x)
    loss = torch.mean((y - target) ** 2)
    loss.backward()
    for name, t in model.state_dict().items():
        w.add(pre + ("param." if name in params else "buffer.") + name, t)
    for name, p in params.items():
        w.add(pre + "grad." + name, p.grad)
    for name, t in (("input", x), ("target", target), ("output", y), ("loss", loss.reshape(1)), ("grad_input", x.grad)):
        w.add(pre + name, t)
    return loss.item()


def sfno_golden():
    w = Writer()
    for key, cfg in SFNO_CONFIGS.items():
        torch.manual_seed(1234)
        model32 = SFNO(**cfg).train()
        with torch.no_grad():
            for name, p in model32.named_parameters():
                p.copy_(0.4 * torch.randn_like(p) + (0.5 if name.endswith("norm.weight") else 0.0))
        x32 = torch.randn(2, cfg["in_chans"], *cfg["img_size"])
        target32 = torch.randn(2, cfg["out_chans"], *cfg["img_size"])
        for dt_name, dt in (("f32", torch.float32), ("f64", torch.float64)):
            with f64_throughout() if dt == torch.float64 else contextlib.nullcontext():
                loss = sfno_case(w, f"{key}.{dt_name}.", cfg, model32.state_dict(), x32, target32, dt)
            print(f"  {key} {dt_name}: loss {loss:.17g}")
    meta = {"generator": "tools/make_golden.py", "torch": torch.__version__,
            "torch_harmonics": __import__("torch_harmonics").__version__,
            "configs": json.dumps({k: {**v, "img_size": list(v["img_size"])} for k, v in SFNO_CONFIGS.items()})}
    w.save(os.path.join(ROOT, "tests/models/data/golden_sfno.safetensors"), meta)


def random_coeffs(shape, lmax, mmax, gen):
    c = torch.complex(torch.randn(shape, dtype=torch.float64, generator=gen),
                      torch.randn(shape, dtype=torch.float64, generator=gen))
    l = torch.arange(lmax).reshape(lmax, 1)
    m = torch.arange(mmax).reshape(1, mmax)
    c = torch.where(l >= m, c, torch.zeros_like(c))
    c[..., 0] = c[..., 0].real.to(torch.complex128)
    return c


def sht_golden():
    w = Writer()
    gen = torch.Generator().manual_seed(7)
    for grid, (nlat, nlon, lmax) in SHT_GRIDS.items():
        for norm in NORMS:
            for cs in (True, False):
                pre = f"{grid}.{norm}.{'cs' if cs else 'nocs'}."
                kw = dict(lmax=lmax, mmax=lmax, grid=grid, norm=norm, csphase=cs)
                fwd, inv = RealSHT(nlat, nlon, **kw).double(), InverseRealSHT(nlat, nlon, **kw).double()
                vfwd, vinv = RealVectorSHT(nlat, nlon, **kw).double(), InverseRealVectorSHT(nlat, nlon, **kw).double()
                assert (fwd.lmax, fwd.mmax) == (lmax, lmax)
                x = torch.randn(1, nlat, nlon, dtype=torch.float64, generator=gen)
                c = random_coeffs((1, lmax, lmax), lmax, lmax, gen)
                w.add(pre + "scalar.x", x)
                w.add(pre + "scalar.sht", fwd(x))
                w.add(pre + "scalar.c", c)
                w.add(pre + "scalar.isht", inv(c))
                vx = torch.randn(1, 2, nlat, nlon, dtype=torch.float64, generator=gen)
                vc = random_coeffs((1, 2, lmax, lmax), lmax, lmax, gen)
                vc[..., 0, 0] = 0  # degree 0 has no vector harmonic
                w.add(pre + "vector.x", vx)
                w.add(pre + "vector.sht", vfwd(vx))
                w.add(pre + "vector.c", vc)
                w.add(pre + "vector.isht", vinv(vc))
    meta = {"generator": "tools/make_golden.py", "torch": torch.__version__,
            "torch_harmonics": __import__("torch_harmonics").__version__,
            "grids": json.dumps({k: {"nlat": v[0], "nlon": v[1], "lmax": v[2], "mmax": v[2]} for k, v in SHT_GRIDS.items()})}
    w.save(os.path.join(ROOT, "tests/ops/data/golden_sht.safetensors"), meta)


def print_parameter_counts():
    """The counts tests/models/test_sfno.cpp asserts for torch-harmonics' configurations."""
    for cfg in [dict(img_size=(32, 64), in_chans=2, out_chans=2, embed_dim=16, num_layers=4),
                dict(img_size=(32, 64), in_chans=3, out_chans=1, embed_dim=8, num_layers=2, bias=True,
                     normalization_layer="layer_norm", pos_embed="learnable lat", residual_prediction=True),
                dict(img_size=(128, 256), embed_dim=256, num_layers=4)]:
        print(cfg, "-> parameters", sum(p.numel() for p in SFNO(**cfg).parameters()))


if __name__ == "__main__":
    torch.set_num_threads(2)
    print_parameter_counts()
    os.makedirs(os.path.join(ROOT, "tests/ops/data"), exist_ok=True)
    sfno_golden()
    with f64_throughout(no_float_casts=False):
        sht_golden()
