#!/usr/bin/env python3
"""Side-by-side SFNO training-step timings: PyTorch + torch-harmonics against `gradsphere bench train`.

A reference tool: not part of the build or the tests, and it writes nothing into the repository.
The reference lives in a virtual environment outside the repository (see tools/compare_sht.py):

    python3 -m venv /opt/gs-ref
    /opt/gs-ref/bin/pip install "torch==2.14.1" "torch-harmonics==0.9.3" numpy

Run from the repository root, after `ninja -C build`:

    /opt/gs-ref/bin/python tools/compare_train.py --threads 2

The model is torch-harmonics' example SFNO, torch_harmonics.examples.models.SphericalFourierNeuralOperator
(0.9.3), with its defaults (equiangular input grid, legendre-gauss internal grid, scale_factor 3,
3 -> 3 channels, gelu, mlp_ratio 2, no normalisation, no position embedding), f32, MSE loss, Adam
(lr 1e-3). Cases (nlat x nlon, embed_dim, num_layers, batch): 32x64/16/4/2, 64x128/32/4/4,
128x256/64/4/2; --quick runs 16x32/8/2/1 (gradsphere's --quick case).

  ms/step   forward + loss + backward + Adam step + zero_grad, median of repeated steps after two
            warm-up steps (SHT tables, allocator and thread pools are set up by then).
  peak MB   each case runs in a fresh Python process; peak MB is that process's peak resident set
            (getrusage(RUSAGE_SELF).ru_maxrss) after the timed steps minus its value just before
            the model is built (torch and torch-harmonics already imported, thread pool started).
            It covers parameters, Adam state, activations saved for backward, gradients, the SHT
            tables, and what the allocator keeps, plus pages of library code first touched by the
            step, so it is an upper bound on the tensor memory. tracemalloc cannot see torch's CPU
            tensors, which are allocated in C++. MB = 1e6 bytes. gradsphere reports its allocator's
            high-water mark instead (tensor bytes only), so the two peak columns are not the same
            measure: read torch's as an upper bound next to gradsphere's exact figure.
  steps     as many as fit in --budget seconds (5 to 41), cut at 4x the budget if steps slow down.
  threads   torch.set_num_threads(--threads) and OMP_NUM_THREADS / MKL_NUM_THREADS for both sides.

gradsphere: `build/tools/gradsphere bench train --csv FILE` is run with the same OMP_NUM_THREADS
(or --gs-csv FILE reuses a CSV written earlier). Its CSV is matched to the torch cases on
(nlat, nlon, embed, layers, batch); both column spellings are read (ms_per_step or ms_step,
peak_bytes or peak_mb, embed or embed_dim, layers or num_layers). Without a gradsphere binary
(or if its train benchmark fails) only the torch side is printed.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

CASES = [(32, 64, 16, 4, 2), (64, 128, 32, 4, 4), (128, 256, 64, 4, 2)]
QUICK_CASES = [(16, 32, 8, 2, 1)]
CHANNELS = 3  # torch-harmonics' default in_chans = out_chans


def case_name(c):
    nlat, nlon, embed, layers, batch = c
    return f"{nlat}x{nlon} e{embed} l{layers} b{batch}"


# ---- worker: one case, in its own process so ru_maxrss belongs to that case alone.

def run_worker(c, threads, budget):
    import torch
    from torch_harmonics.examples.models import SphericalFourierNeuralOperator

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    nlat, nlon, embed, layers, batch = c
    torch.randn(64, 64) @ torch.randn(64, 64)  # start the thread pool before the baseline
    base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux

    model = SphericalFourierNeuralOperator(img_size=(nlat, nlon), in_chans=CHANNELS, out_chans=CHANNELS,
                                           embed_dim=embed, num_layers=layers)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch, CHANNELS, nlat, nlon)
    target = torch.randn(batch, CHANNELS, nlat, nlon)

    def step():
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()  # warm-up twice: tables, Adam state, allocator
    step()
    t0 = time.perf_counter()
    step()
    once = time.perf_counter() - t0
    reps = max(5, min(41, int(budget / max(once, 1e-6)))) | 1
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
        if len(times) >= 5 and sum(times) > 4 * budget:
            break  # steps slowed down after the first (a busy machine): keep the run bounded
    reps = len(times)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps({"ms": 1e3 * statistics.median(times), "peak_bytes": (peak_kb - base_kb) * 1024,
                      "params": params, "reps": reps}))


def thread_env(threads):
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[k] = str(threads)
    return env


def torch_case(c, threads, budget):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", ",".join(map(str, c)), "--threads", str(threads),
           "--budget", str(budget)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=thread_env(threads))
    if r.returncode != 0:
        sys.exit(f"torch case {case_name(c)} failed:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


# ---- gradsphere side

def read_gs_csv(path):
    def pick(row, *names):
        for n in names:
            if n in row and row[n] != "":
                return row[n]
        return None

    out = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row.get("mlp_storage", "f32") != "f32":  # the --bf16-mlp rows have no torch twin
                continue
            key = tuple(int(pick(row, k1, k2)) for k1, k2 in
                        (("nlat", "nlat"), ("nlon", "nlon"), ("embed", "embed_dim"), ("layers", "num_layers"),
                         ("batch", "batch")))
            ms = float(pick(row, "ms_per_step", "ms_step"))
            peak = pick(row, "peak_bytes")
            peak = float(peak) if peak is not None else float(pick(row, "peak_mb")) * 1e6
            out[key] = {"ms": ms, "peak_bytes": peak}
    return out


def run_gradsphere(exe, threads, quick):
    if not os.path.exists(exe):
        print(f"({exe} not found: torch side only)\n")
        return {}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "train.csv")
        cmd = [exe, "bench", "train", "--csv", path] + (["--quick"] if quick else [])
        r = subprocess.run(cmd, capture_output=True, text=True, env=thread_env(threads))
        if r.returncode != 0 or not os.path.exists(path):
            print(f"(`{' '.join(cmd)}` failed, torch side only: {r.stderr.strip()[:300]})\n")
            return {}
        return read_gs_csv(path)


def load_average():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "load: " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--quick", action="store_true", help="one small case (a smoke run, not a measurement)")
    ap.add_argument("--budget", type=float, default=3.0, help="seconds of timed steps per case (5 to 41 steps)")
    ap.add_argument("--gradsphere", default="build/tools/gradsphere")
    ap.add_argument("--gs-csv", help="reuse a CSV from `gradsphere bench train --csv` instead of running it")
    ap.add_argument("--no-gradsphere", action="store_true")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        run_worker(tuple(int(v) for v in args.worker.split(",")), args.threads, args.budget)
        return

    import torch
    import torch_harmonics

    cases = QUICK_CASES if args.quick else CASES
    print(f"torch {torch.__version__}, torch-harmonics {torch_harmonics.__version__}, {args.threads} threads")
    print(f"before: {load_average()}\n")
    load_before = os.getloadavg()[0]  # the "after" figure includes this script's own threads
    torch_res = {}
    for c in cases:
        torch_res[c] = torch_case(c, args.threads, args.budget)
        r = torch_res[c]
        print(f"  torch {case_name(c):<24} {r['ms']:9.2f} ms/step  peak +{r['peak_bytes'] / 1e6:8.1f} MB  "
              f"({r['params']} params, {r['reps']} steps)", flush=True)
    gs = {}
    if args.gs_csv:
        gs = read_gs_csv(args.gs_csv)
    elif not args.no_gradsphere:
        gs = run_gradsphere(args.gradsphere, args.threads, args.quick)
    print(f"\nafter: {load_average()}\n")
    ncpu = os.cpu_count() or 1
    if load_before + args.threads > ncpu + 1:
        # OpenMP threads that wait for one another at every parallel region suffer most from
        # sharing cores: on a busy machine, multi-thread timings can be inflated many times over.
        print(f"warning: busy machine (1-min load {load_before:.2f} before the run on {ncpu} CPUs, "
              f"{args.threads} threads asked): timings are inflated, multi-threaded ones most; "
              "compare with --threads 1 or rerun when idle\n")

    print("| case (nlat x nlon, embed, layers, batch) | torch ms/step | gradsphere ms/step | torch / gradsphere "
          "| torch peak MB | gradsphere peak MB |")
    print("|---|--:|--:|--:|--:|--:|")
    for c in cases:
        t, g = torch_res[c], gs.get(c)
        gms = f"{g['ms']:.2f}" if g else "-"
        ratio = f"{t['ms'] / g['ms']:.2f}x" if g and g["ms"] > 0 else "-"
        gpk = f"{g['peak_bytes'] / 1e6:.1f}" if g else "-"
        print(f"| {c[0]}x{c[1]}, {c[2]}, {c[3]}, {c[4]} | {t['ms']:.2f} | {gms} | {ratio} | "
              f"{t['peak_bytes'] / 1e6:.1f} | {gpk} |")


if __name__ == "__main__":
    main()
