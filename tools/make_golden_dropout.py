#!/usr/bin/env python3
"""Writes tests/models/data/golden_sfno_dropout.safetensors: torch-harmonics' example SFNO with
dropout and stochastic depth in train mode, with gradsphere's masks, so that the C++ test
(tests/models/test_sfno_dropout.cpp) checks WHERE the masks act, not the random numbers.

torch's generator differs from gradsphere's, so the masks here are gradsphere's own, drawn in
Python (tools/philox_ref.py): Philox-4x32-10 (engine/philox.h) of the key sfno_dropout_key(noise key, site) (the noise
key's stream XOR the FNV-1a hash of the site's name: models/sfno.cpp) at each element's row-major
index in the mask (ops/dropout.h: element, (sample, channel), or sample), kept when the 53-bit
uniform is >= p. They are put into torch-harmonics' own modules:
  pos_drop (nn.Dropout)                 -> x * keep / (1 - p), one decision per element
  blocks.i.mlp.fwd.2 / .4 (nn.Dropout2d) -> x * keep / (1 - p), one per (sample, channel)
  blocks.i.drop_path (DropPath)          -> torch-harmonics' drop_path itself, with torch.rand
                                            answering the sample uniforms
so the net, its order of operations, its MLP layout (fwd.3) and its per-block rates
(linspace(0, drop_path_rate, num_layers)) are torch-harmonics'. The weights, input and target
are golden_sfno.safetensors' configuration "a" (written by tools/make_golden.py), with
drop_rate 0.3 and drop_path_rate 0.5 and the noise key (77, 1); f32 and f64 as there.

    /opt/gs-ref/bin/python tools/make_golden_dropout.py     (torch-harmonics >= 0.9.3 installed), or
    TORCH_HARMONICS_SRC=<checkout of NVIDIA/torch-harmonics> /opt/gs-ref/bin/python tools/make_golden_dropout.py

The committed file was written from the source tree at v0.9.2-12-g9e9fa53 (2026-08-19; 0.8.0's
sfno.py lacks the DropPath import and builds another position embedding). The script first checks
that the torch-harmonics it runs reproduces the 0.9.3 golden output of configuration "a" without
dropout (f64 to 1e-12, f32 to 1e-5), so the nets agree.
"""
import contextlib
import json
import os
import sys

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file




def load_torch_harmonics():
    """The example SFNO of the installed torch-harmonics, or of the source tree named by
    TORCH_HARMONICS_SRC (a checkout of NVIDIA/torch-harmonics) without its compiled extensions: the
    package __init__ files, which load the attention and DISCO kernels, are skipped."""
    src = os.environ.get("TORCH_HARMONICS_SRC")
    if src:
        import importlib
        import types
        for name in ("torch_harmonics", "torch_harmonics.examples", "torch_harmonics.examples.models"):
            pkg = types.ModuleType(name)
            pkg.__path__ = [os.path.join(src, *name.split("."))]
            sys.modules[name] = pkg
        sht = importlib.import_module("torch_harmonics.sht")
        for cls in ("RealSHT", "InverseRealSHT", "RealVectorSHT", "InverseRealVectorSHT"):
            setattr(sys.modules["torch_harmonics"], cls, getattr(sht, cls))
    import torch_harmonics.examples.models._layers as layers
    import torch_harmonics.examples.models.sfno as sfno
    return layers, sfno


th_layers, th_sfno = load_torch_harmonics()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import philox_ref  # noqa: E402
from make_golden import ROOT, SFNO_CONFIGS, Writer, f64_throughout  # noqa: E402

NOISE_KEY = (77, 1)
DROP_RATE, DROP_PATH_RATE = 0.3, 0.5
def site_uniforms(site, count):
    seed, stream = NOISE_KEY
    return philox_ref.uniforms(seed, stream ^ philox_ref.fnv1a(site), count)


class KeyedDropout(torch.nn.Module):
    """nn.Dropout (per element) or nn.Dropout2d (per sample and channel) with gradsphere's mask."""

    def __init__(self, site, p, per_channel):
        super().__init__()
        self.site, self.p, self.per_channel = site, p, per_channel

    def forward(self, x):
        shape = tuple(x.shape[:2]) + (1,) * (x.dim() - 2) if self.per_channel else tuple(x.shape)
        u = site_uniforms(self.site, int(np.prod(shape))).reshape(shape)
        keep = torch.from_numpy((u >= self.p).astype(np.float64)).to(x.dtype)
        return x * keep / (1 - self.p)


@contextlib.contextmanager
def rand_answers(uniforms):
    saved = torch.rand
    torch.rand = lambda shape, dtype=None, device=None: torch.from_numpy(uniforms.reshape(shape)).to(dtype)
    try:
        yield
    finally:
        torch.rand = saved


class KeyedDropPath(torch.nn.Module):
    """torch-harmonics' DropPath, its torch.rand answering gradsphere's per-sample uniforms."""

    def __init__(self, site, inner):
        super().__init__()
        self.site, self.inner = site, inner

    def forward(self, x):
        with rand_answers(site_uniforms(self.site, x.shape[0])):
            return self.inner(x)


def keyed(model):
    model.pos_drop = KeyedDropout("pos_drop", DROP_RATE, per_channel=False)
    for i, blk in enumerate(model.blocks):
        fwd = blk.mlp.fwd
        assert isinstance(fwd[2], torch.nn.Dropout2d) and fwd[2] is fwd[4]
        fwd[2] = KeyedDropout(f"blocks.{i}.mlp.fwd.2", DROP_RATE, per_channel=True)
        fwd[4] = KeyedDropout(f"blocks.{i}.mlp.fwd.4", DROP_RATE, per_channel=True)
        if isinstance(blk.drop_path, th_layers.DropPath):
            blk.drop_path = KeyedDropPath(f"blocks.{i}.drop_path", blk.drop_path)
    return model


def golden_state(golden, pre, dropout):
    state = {k[len(pre) + 6:]: v for k, v in golden.items() if k.startswith(pre + "param.")}
    state.update({k[len(pre) + 7:]: v for k, v in golden.items() if k.startswith(pre + "buffer.")})
    if dropout:
        state = {k.replace("mlp.fwd.2.", "mlp.fwd.3."): v for k, v in state.items()}
    return state


def run(golden, pre, cfg, dt, dropout):
    model = th_sfno.SphericalFourierNeuralOperator(**cfg).train()
    if dropout:
        keyed(model)
    state = golden_state(golden, pre, dropout)
    if dt == torch.float64:
        state = {k: (v if not v.is_complex() else v.to(torch.complex128)) for k, v in state.items()}
    model.load_state_dict(state, strict=True)
    if dt == torch.float64:
        model = model.double()
        for p in model.parameters():
            if p.dtype == torch.complex64:
                p.data = p.data.to(torch.complex128)
    x = golden[pre + "input"].clone().to(dt).requires_grad_(True)
    y = model(x)
    loss = torch.mean((y - golden[pre + "target"].to(dt)) ** 2)
    loss.backward()
    return model, x, y, loss


def main():
    philox_ref.check()
    path = os.path.join(ROOT, "tests/models/data/golden_sfno.safetensors")
    golden = load_file(path)
    with safe_open(path, "pt") as f:  # c128 entries are stored as (re, im) pairs, listed here
        for k in json.loads(f.metadata()["gradsphere.complex128"]):
            golden[k] = torch.view_as_complex(golden[k].contiguous())
    w = Writer()
    cfg = dict(SFNO_CONFIGS["a"])
    for dt_name, dt in (("f32", torch.float32), ("f64", torch.float64)):
        pre = f"a.{dt_name}."
        g = golden
        with f64_throughout() if dt == torch.float64 else contextlib.nullcontext():
            _, _, y0, _ = run(g, pre, cfg, dt, dropout=False)
            ref = golden[pre + "output"].to(dt)
            err = ((y0 - ref).abs().max() / ref.abs().max()).item()
            print(f"  {dt_name}: this torch-harmonics against the 0.9.3 golden output: {err:.3g}")
            assert err < (1e-12 if dt == torch.float64 else 1e-5)
            model, x, y, loss = run(g, pre, {**cfg, "drop_rate": DROP_RATE, "drop_path_rate": DROP_PATH_RATE}, dt,
                                    dropout=True)
        for name, p in model.named_parameters():
            w.add(pre + "grad." + name, p.grad)
        for name, t in (("output", y), ("loss", loss.reshape(1)), ("grad_input", x.grad)):
            w.add(pre + name, t)
        print(f"  {dt_name}: loss {loss.item():.17g}, output differs from no dropout by "
              f"{(y - y0).abs().max().item():.3g}")
    meta = {"generator": "tools/make_golden_dropout.py", "torch": torch.__version__,
            "torch_harmonics": getattr(sys.modules["torch_harmonics"], "__version__", "source tree"),
            "noise_key": str(NOISE_KEY), "drop_rate": str(DROP_RATE), "drop_path_rate": str(DROP_PATH_RATE)}
    w.save(os.path.join(ROOT, "tests/models/data/golden_sfno_dropout.safetensors"), meta)


if __name__ == "__main__":
    main()
