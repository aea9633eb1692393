#!/usr/bin/env python3
"""Writes the ACE golden file: NoiseConditionedSFNO against ACE's own code (the fme package).

A reference tool like make_golden.py, run once by hand; tests/models/test_noise_sfno_golden.cpp
reads its committed output and needs no Python. fme pins torch-harmonics 0.8.0 (it patches that
version's SHT), so 0.8.0 goes into a folder of its own, ahead of 0.9.3 on PYTHONPATH:

    /opt/gs-ref/bin/pip install --no-deps fme==2026.10.0 tensorly tensorly-torch einops dacite \\
        xarray zarr cftime netCDF4 omegaconf wandb matplotlib
    /opt/gs-ref/bin/pip install --no-deps --target /opt/gs-ref-th080 torch-harmonics==0.8.0
    PYTHONPATH=/opt/gs-ref-th080 /opt/gs-ref/bin/python tools/make_golden_ace.py

tests/models/data/golden_noise_sfno.safetensors
    For two small NoiseConditionedSFNOBuilder models (below), in f32 and in f64, under
    "<cfg>.<dtype>.": param.<name> (every parameter, random, so the conditional norms' zero
    initialisation hides nothing), input, noise (the gaussian noise field, given to both sides:
    ACE's draw is replaced by it), labels (one-hot, when the model has labels), target, output,
    loss = mean((output - target)^2), grad.<name> and grad_input.
    The f64 reference runs in f64 throughout, as in make_golden.py (f64_throughout).
"""
import contextlib
import json
import os

import torch

import fme.ace.registry.stochastic_sfno as stochastic_sfno
from fme.ace.registry.stochastic_sfno import NoiseConditionedSFNOBuilder
from fme.core.dataset_info import DatasetInfo
from make_golden import ROOT, Writer, f64_throughout

CONFIGS = {
    # position (context) and label conditioning, affine norms, the ACE defaults otherwise (legendre-gauss)
    "c": dict(builder=dict(embed_dim=8, noise_embed_dim=4, num_layers=2, context_pos_embed_dim=3, pos_embed=False,
                           affine_norms=True),
              img_shape=(8, 16), in_chans=3, out_chans=2, labels=["a", "b"]),
    # the net's own position embedding, global layer norm, filtered residual and output, grouped filter,
    # silu, two encoder layers
    "d": dict(builder=dict(embed_dim=8, noise_embed_dim=2, num_layers=3, global_layer_norm=True,
                           filter_residual=True, filter_output=True, filter_num_groups=2, activation_function="silu",
                           encoder_layers=2, mlp_ratio=1.5),
              img_shape=(6, 12), in_chans=2, out_chans=2, labels=[]),
}


@contextlib.contextmanager
def given_noise(noise):
    """ACE's NoiseConditionedModel draws its gaussian noise with fme.core.rand.randn; return ours."""
    saved = stochastic_sfno.randn

    def fixed(shape, device=None, dtype=None):
        assert tuple(shape) == tuple(noise.shape), (shape, noise.shape)
        return noise.to(dtype)

    stochastic_sfno.randn = fixed
    try:
        yield
    finally:
        stochastic_sfno.randn = saved


def build(cfg):
    info = DatasetInfo(img_shape=cfg["img_shape"], all_labels=set(cfg["labels"]))
    return NoiseConditionedSFNOBuilder(**cfg["builder"]).build(cfg["in_chans"], cfg["out_chans"], info)


def case(w, pre, cfg, state, inputs, dt):
    model = build(cfg).train()
    model.load_state_dict(state)
    model = model.to(dt)
    x = inputs["input"].detach().clone().to(dt).requires_grad_(True)
    labels = inputs["labels"].to(dt) if "labels" in inputs else None
    with given_noise(inputs["noise"].to(dt)):
        y = model(x, labels=labels)
    loss = torch.mean((y - inputs["target"].to(dt)) ** 2)
    loss.backward()
    for name, p in model.named_parameters():
        w.add(pre + "param." + name, p)
        w.add(pre + "grad." + name, p.grad)
    for name, t in inputs.items():
        w.add(pre + name, t.to(dt))
    for name, t in (("output", y), ("loss", loss.reshape(1)), ("grad_input", x.grad)):
        w.add(pre + name, t)
    return loss.item()


def main():
    torch.set_num_threads(2)
    w = Writer()
    for key, cfg in CONFIGS.items():
        torch.manual_seed(4321)
        model = build(cfg)
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(0.4 * torch.randn_like(p))
        B, (H, W) = 2, cfg["img_shape"]
        inputs = {"input": torch.randn(B, cfg["in_chans"], H, W),
                  "noise": torch.randn(B, cfg["builder"]["noise_embed_dim"], H, W),
                  "target": torch.randn(B, cfg["out_chans"], H, W)}
        if cfg["labels"]:
            inputs["labels"] = torch.nn.functional.one_hot(torch.arange(B) % len(cfg["labels"]),
                                                           len(cfg["labels"])).float()
        state = model.state_dict()
        for dt_name, dt in (("f32", torch.float32), ("f64", torch.float64)):
            with f64_throughout() if dt == torch.float64 else contextlib.nullcontext():
                loss = case(w, f"{key}.{dt_name}.", cfg, state, inputs, dt)
            print(f"  {key} {dt_name}: loss {loss:.17g}")
    import fme
    meta = {"generator": "tools/make_golden_ace.py", "torch": torch.__version__, "fme": fme.__version__,
            "torch_harmonics": __import__("torch_harmonics").__version__,
            "configs": json.dumps({k: {**v, "img_shape": list(v["img_shape"])} for k, v in CONFIGS.items()})}
    w.save(os.path.join(ROOT, "tests/models/data/golden_noise_sfno.safetensors"), meta)


if __name__ == "__main__":
    main()
