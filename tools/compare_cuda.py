#!/usr/bin/env python3
"""GPU side by side: torch-harmonics on CUDA against `gradsphere bench sht|train --device cuda`.

A reference tool for a machine with a GPU (tools/gpu_check.sh runs it there); not part of the build
or the tests, and it writes nothing into the repository. Needs torch with CUDA and torch-harmonics
0.9.x importable (gpu_check.sh carries torch-harmonics' Python sources; its compiled extensions are
not needed: RealSHT, InverseRealSHT and the example SFNO are plain torch; where they do not load,
see import_torch_harmonics).

    python3 tools/compare_cuda.py sht   --gs-csv SHT.csv    # SHT.csv from `bench sht --device cuda --csv`
    python3 tools/compare_cuda.py train --gs-csv TRAIN.csv  # TRAIN.csv from `bench train --device cuda --csv`

sht    torch-harmonics RealSHT / InverseRealSHT (the module cast to the dtype) on the same cases,
       f32 and f64, timed with CUDA events (median after warm-ups); peak MB is
       torch.cuda.max_memory_allocated over the timed calls (the module's tables, input, output and
       intermediates), beside gradsphere's device-allocator peak.
train  torch-harmonics' example SFNO (its defaults; the cases of bench train --device cuda), f32, MSE
       loss, Adam lr 1e-3; ms/step with a synchronize after the step (as gradsphere's), peak MB from
       max_memory_allocated over the timed steps.
"""
from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys

SHT_CASES = [("equiangular", 64, 128, 64), ("equiangular", 181, 360, 16), ("equiangular", 181, 360, 1),
             ("equiangular", 361, 720, 4), ("equiangular", 721, 1440, 1), ("legendre-gauss", 64, 128, 64),
             ("legendre-gauss", 180, 360, 16), ("legendre-gauss", 180, 360, 1), ("legendre-gauss", 360, 720, 4),
             ("legendre-gauss", 720, 1440, 1)]
TRAIN_CASES = [(32, 64, 16, 4, 2), (64, 128, 32, 4, 4), (128, 256, 64, 4, 2), (721, 1440, 256, 8, 1)]
QUICK_SHT = [("legendre-gauss", 16, 32, 4)]
QUICK_TRAIN = [(16, 32, 8, 2, 1)]


def cuda_median_ms(torch, fn, reps=21):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def stand_in(name, why):
    """A module whose every attribute is a placeholder that raises when used, and whose
    `*_is_available` answers False."""
    import types

    module = types.ModuleType(name)

    def attr(attr_name):
        if attr_name.startswith("__"):
            raise AttributeError(attr_name)
        if attr_name.endswith("_is_available"):
            return lambda *a, **k: False

        def unavailable(*a, **k):
            raise RuntimeError(f"compare_cuda: {name}.{attr_name} is a stand-in ({why})")
        return unavailable

    module.__getattr__ = attr
    return module


def import_torch_harmonics():
    """torch-harmonics 0.9 imports its compiled helpers (attention_helpers, disco_helpers) and its
    attention and DISCO subpackages at import time, and the attention subpackage cannot import
    without the compiled kernels. The copies built for the reference venv do not load under another
    Python or torch (the GPU machine's), and the comparison uses none of them (RealSHT,
    InverseRealSHT and the example SFNO are plain torch): when the plain import fails, those four
    modules are replaced by stand-ins that fail loudly if anything in them is used, and it is said."""
    try:
        import torch_harmonics
        return torch_harmonics
    except ImportError as e:
        first_error = e
    replaced = ("attention_helpers", "disco_helpers", "torch_harmonics.attention", "torch_harmonics.disco")
    for key in list(sys.modules):
        if key in replaced or key == "torch_harmonics" or key.startswith("torch_harmonics."):
            del sys.modules[key]
    why = f"torch-harmonics' compiled kernels did not load: {first_error}"
    for name in replaced:
        sys.modules[name] = stand_in(name, why)
    import torch_harmonics
    print(f"compare_cuda: {why}; attention and DISCO replaced by stand-ins (not used here)")
    return torch_harmonics


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def compare_sht(torch, th, cases, gs):
    print("| grid | nlat x nlon | B | dir | dt | gradsphere ms | torch-harmonics ms | th / gs | gs peak MB | th peak MB |")
    print("|---|---:|---:|---|---|---:|---:|---:|---:|---:|")
    for grid, nlat, nlon, batch in cases:
        for dt in ("f32", "f64"):
            tdt = torch.float32 if dt == "f32" else torch.float64
            th_ms, th_peak = {}, {}
            try:
                with torch.no_grad():
                    fwd = th.RealSHT(nlat, nlon, grid=grid).to(tdt).cuda()
                    inv = th.InverseRealSHT(nlat, nlon, grid=grid).to(tdt).cuda()
                    x = torch.randn(batch, nlat, nlon, dtype=tdt, device="cuda")
                    a = fwd(x)
                    for d, mod, arg in (("sht", fwd, x), ("isht", inv, a)):
                        torch.cuda.synchronize()
                        torch.cuda.reset_peak_memory_stats()
                        th_ms[d] = cuda_median_ms(torch, lambda: mod(arg))
                        th_peak[d] = torch.cuda.max_memory_allocated() / 1e6
                del fwd, inv, x, a
                torch.cuda.empty_cache()
            except RuntimeError as e:
                print(f"torch-harmonics {grid} {nlat}x{nlon} {dt}: failed ({e})", file=sys.stderr)
            for d in ("sht", "isht"):
                g = gs.get((grid, nlat, nlon, batch, d, dt), {})
                t = th_ms.get(d)
                print(f"| {grid} | {nlat}x{nlon} | {batch} | {d} | {dt} | {fmt(g.get('ms'), '.4f')} | {fmt(t, '.4f')} | "
                      f"{fmt(ratio(t, g.get('ms')), '.2f')} | {fmt(g.get('peak'), '.1f')} | {fmt(th_peak.get(d), '.1f')} |",
                      flush=True)


def compare_train(torch, cases, gs):
    from torch_harmonics.examples.models import SphericalFourierNeuralOperator

    print("| nlat x nlon | embed | layers | B | gradsphere ms/step | torch-harmonics ms/step | th / gs | gs peak MB | "
          "th peak MB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in cases:
        nlat, nlon, embed, layers, batch = c
        t_ms = t_peak = None
        try:
            torch.manual_seed(0)
            model = SphericalFourierNeuralOperator(img_size=(nlat, nlon), in_chans=3, out_chans=3, embed_dim=embed,
                                                   num_layers=layers).cuda()
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            x = torch.randn(batch, 3, nlat, nlon, device="cuda")
            y = torch.randn(batch, 3, nlat, nlon, device="cuda")

            def step():
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)

            step()
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            t_ms = cuda_median_ms(torch, step, reps=11)
            t_peak = torch.cuda.max_memory_allocated() / 1e6
            del model, opt, x, y
            torch.cuda.empty_cache()
        except RuntimeError as e:
            print(f"torch-harmonics SFNO {c}: failed ({e})", file=sys.stderr)
        g = gs.get(c, {})
        print(f"| {nlat}x{nlon} | {embed} | {layers} | {batch} | {fmt(g.get('ms'), '.2f')} | {fmt(t_ms, '.2f')} | "
              f"{fmt(ratio(t_ms, g.get('ms')), '.2f')} | {fmt(g.get('peak'), '.1f')} | {fmt(t_peak, '.1f')} |", flush=True)


def read_gs(path, what):
    out = {}
    if path is None:
        return out
    if not os.path.exists(path):
        print(f"({path} not found: the torch-harmonics side only)", file=sys.stderr)
        return out
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if what == "sht":
                k = (r["grid"], int(r["nlat"]), int(r["nlon"]), int(r["batch"]), r["dir"], r["dtype"])
                out[k] = {"ms": float(r["ms_call"]), "peak": float(r["peak_mb"])}
            else:
                if r.get("mlp_storage", "f32") != "f32":  # the --bf16-mlp rows have no torch twin
                    continue
                k = (int(r["nlat"]), int(r["nlon"]), int(r["embed_dim"]), int(r["num_layers"]), int(r["batch"]))
                out[k] = {"ms": float(r["ms_step"]), "peak": float(r["peak_mb"])}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("sht", "train"))
    ap.add_argument("--gs-csv", default=None, help="gradsphere's CSV of the same benchmark on the same GPU")
    ap.add_argument("--quick", action="store_true", help="only the smallest case (a smoke run)")
    args = ap.parse_args()
    try:
        import torch
        th = import_torch_harmonics()
    except Exception as e:  # noqa: BLE001
        sys.exit(f"compare_cuda: torch and torch-harmonics are needed ({e})")
    if not torch.cuda.is_available():
        sys.exit("compare_cuda: torch sees no GPU")
    print(f"torch {torch.__version__}, torch-harmonics {getattr(th, '__version__', '?')}, "
          f"{torch.cuda.get_device_name(0)}; TF32 matmul {torch.backends.cuda.matmul.allow_tf32}\n")
    gs = read_gs(args.gs_csv, args.what)
    if args.what == "sht":
        compare_sht(torch, th, QUICK_SHT if args.quick else SHT_CASES, gs)
    else:
        compare_train(torch, QUICK_TRAIN if args.quick else TRAIN_CASES, gs)


if __name__ == "__main__":
    main()
