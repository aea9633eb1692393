#!/usr/bin/env python3
"""Writes the ensemble-loss golden file: fme's CRPS and energy score on fixed inputs, in f64.

A reference tool like make_golden_ace.py (same venv and torch-harmonics 0.8.0, which fme pins;
fme replaces its RealSHT with fme/sht_fix.py's, which is what runs here),
run once by hand; tests/models/test_ensemble_golden.cpp reads its committed output:

    PYTHONPATH=/opt/gs-ref-th080:<fme source> /opt/gs-ref/bin/python tools/make_golden_ensemble.py

tests/models/data/golden_ensemble_loss.safetensors, under "crps.K<k>.a<alpha>." and "energy.":
    gen (B, K, C, H, W) and target (B, 1, C, H, W), the members and the truth (fme's layout);
    crps: value = fme.core.ensemble.get_crps(gen, target, alpha) (B, C, H, W), the per-point CRPS,
          loss = sum(value * weight) for the random weight given, and grad = d loss / d gen;
    energy (K = 2, the only K fme's energy score takes, on a legendre-gauss 8x16 grid, fme's
          get_real_sht = torch-harmonics RealSHT defaults): value = fme.core.loss.EnergyScoreLoss's
          pre-weighted (B, C, L, M) tensor, loss = its mean over (L, M), then over B and C (fme's
          StandardLoss, LossOutput.total), grad = d loss / d gen, and target_coeffs = the target's
          transform (B, C, L, M) complex.
"""
import os

import torch
import torch_harmonics as th

from fme.core.ensemble import get_crps
from fme.core.loss import EnergyScoreLoss
from make_golden import ROOT, Writer, f64_throughout

B, C, H, W = 2, 2, 8, 16


def main():
    torch.manual_seed(20261203)
    w = Writer()
    for K in (2, 3, 5):
        for alpha in (1.0, 0.9):
            pre = f"crps.K{K}.a{alpha:g}."
            gen = torch.randn(B, K, C, H, W, dtype=torch.float64, requires_grad=True)
            target = torch.randn(B, 1, C, H, W, dtype=torch.float64)
            weight = torch.rand(B, C, H, W, dtype=torch.float64)
            value = get_crps(gen, target, alpha=alpha)
            loss = (value * weight).sum()
            (grad,) = torch.autograd.grad(loss, gen)
            for name, t in dict(gen=gen, target=target, weight=weight, value=value, loss=loss, grad=grad).items():
                w.add(pre + name, t)
    # fme replaces torch-harmonics' RealSHT (fme/sht_fix.py), whose forward casts to f32: the f64
    # reference runs under f64_throughout (make_golden.py), where .float() keeps f64.
    with f64_throughout():
        sht = th.RealSHT(H, W, grid="legendre-gauss")
        gen = torch.randn(B, 2, C, H, W, dtype=torch.float64, requires_grad=True)
        target = torch.randn(B, 1, C, H, W, dtype=torch.float64)
        (component,) = EnergyScoreLoss(sht=sht)(gen, target)
        # (1, 1, B, C, L, M): fme's mode weights carry the members' dim too and broadcast two leading 1s
        value = component.loss.reshape(B, C, H, W // 2 + 1)  # pre-weighted
        assert value.dtype == torch.float64, value.dtype
        loss = value.mean(dim=(-2, -1)).mean()
        (grad,) = torch.autograd.grad(loss, gen)
        target_coeffs = sht(target[:, 0])
        assert target_coeffs.dtype == torch.complex128, target_coeffs.dtype
    for name, t in dict(gen=gen, target=target, value=value, loss=loss, grad=grad, target_coeffs=target_coeffs).items():
        w.add("energy." + name, t)
    w.save(os.path.join(ROOT, "tests/models/data/golden_ensemble_loss.safetensors"),
           {"fme": "fme/core/ensemble.py get_crps, fme/core/loss.py EnergyScoreLoss",
            "torch_harmonics": th.__version__, "grid": f"legendre-gauss {H}x{W}"})


if __name__ == "__main__":
    main()
