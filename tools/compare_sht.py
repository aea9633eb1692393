#!/usr/bin/env python3
"""Side-by-side SHT timings: gradsphere against SHTns, ducc0 and torch-harmonics.

Not part of the build or the tests, and writes nothing into the repository. The references live
in a virtual environment OUTSIDE the repository (only PyPI is reachable; plain `pip install
torch` brings the CUDA wheels, several GB, and torch-harmonics 0.9.3 pins torch 2.14.x):

    python3 -m venv /opt/gs-ref
    /opt/gs-ref/bin/pip install "torch==2.14.1" "torch-harmonics==0.9.3" numpy
    /opt/gs-ref/bin/pip install shtns ducc0     # shtns builds from source against libfftw3-dev

Run from the repository root, after `ninja -C build`:

    OMP_NUM_THREADS=2 /opt/gs-ref/bin/python tools/compare_sht.py --threads 2

Cases (the issue's): equiangular 64x128/B64, 181x360/B16, 361x720/B4, 721x1440/B1 and
legendre-gauss 64x128/B64, 180x360/B16, 360x720/B4, 720x1440/B1; forward and inverse; f32 and
f64. Truncation is torch-harmonics' default (RealSHT(nlat, nlon, grid=...)), which gradsphere's
make_sht_spec reproduces; SHTns and ducc0 get the same bounds (their lmax/mmax are inclusive).

  torch-harmonics  RealSHT / InverseRealSHT on the whole batch, the module cast to the dtype
                   (module.to(dtype), so its f32 table is f32 and the call does not cast it);
                   table memory = the bytes of its precomputed buffers (weights / pct).
  SHTns            f64 only (as the issue's reference figures), on-the-fly Legendre
                   (sht_gauss on Gauss grids, sht_reg_poles on equiangular ones), orthonormal,
                   native (theta-contiguous) layout, one field per call, nthreads = --threads.
  ducc0            analysis_2d / synthesis_2d (geometry "GL" or "CC"), f32 and f64, one field per
                   call, nthreads = --threads.
  gradsphere       `build/tools/gradsphere bench sht --csv FILE --case GRID:NLATxNLON` run by this
                   script (same threads via OMP_NUM_THREADS), or --gs-csv FILE to reuse a CSV
                   written earlier.

Every timing is the median of repeated calls after a warm-up; table construction is excluded. The
cases run one at a time, gradsphere then each reference, so that a row's two sides are timed
within seconds of each other (--no-interleave: all of gradsphere's first, then each reference's);
--repeat N runs the whole sequence N times and reports each timing's median over them (the
machine's speed drops by 10-30% for seconds at a time).
"""
from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time

CASES = [
    ("equiangular", 64, 128, 64),
    ("equiangular", 181, 360, 16),
    ("equiangular", 361, 720, 4),
    ("equiangular", 721, 1440, 1),
    ("legendre-gauss", 64, 128, 64),
    ("legendre-gauss", 180, 360, 16),
    ("legendre-gauss", 360, 720, 4),
    ("legendre-gauss", 720, 1440, 1),
]
QUICK_CASES = [("legendre-gauss", 16, 32, 4)]
DTYPES = ("f32", "f64")


def median_seconds(fn, budget=1.0, lo=3, hi=21):
    fn()  # warm-up (twice: first calls allocate, plan, spin up thread pools)
    fn()
    t0 = time.perf_counter()
    fn()
    one = time.perf_counter() - t0
    reps = max(lo, min(hi, int(budget / max(one, 1e-9)))) | 1
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def truncation(grid, nlat, nlon):
    """torch-harmonics' default (triangular) truncation; exclusive bounds."""
    lmax = nlat if grid == "legendre-gauss" else (nlat + 1) // 2
    mmax = min(lmax, nlon // 2 + 1)
    return min(lmax, mmax), min(lmax, mmax)


def th_grid(grid):
    return "legendre-gauss" if grid == "legendre-gauss" else "equiangular"


# ---------------------------------------------------------------------------------------------
def bench_torch_harmonics(cases, threads, results):
    try:
        import torch
        import torch_harmonics as th
    except Exception as e:  # noqa: BLE001
        print(f"torch-harmonics: not available ({e})", file=sys.stderr)
        return
    torch.set_num_threads(threads)
    print(f"torch {torch.__version__}, torch-harmonics {th.__version__}, {torch.get_num_threads()} threads",
          file=sys.stderr)
    for grid, nlat, nlon, batch in cases:
        for dt in DTYPES:
            tdt = torch.float32 if dt == "f32" else torch.float64
            try:
                with torch.no_grad():
                    t0 = time.perf_counter()
                    fwd = th.RealSHT(nlat, nlon, grid=th_grid(grid)).to(tdt)
                    inv = th.InverseRealSHT(nlat, nlon, grid=th_grid(grid)).to(tdt)
                    build = time.perf_counter() - t0
                    x = torch.randn(batch, nlat, nlon, dtype=tdt)
                    a = fwd(x)
                    for d, mod, arg in (("sht", fwd, x), ("isht", inv, a)):
                        s = median_seconds(lambda: mod(arg))
                        tb = sum(b.numel() * b.element_size() for b in mod.buffers())
                        results[("torch-harmonics", grid, nlat, nlon, batch, d, dt)] = {
                            "ms_call": 1e3 * s, "ms_field": 1e3 * s / batch, "table_mb": tb / 1e6,
                            "build_ms": 1e3 * build}
                del fwd, inv, x, a
            except (RuntimeError, MemoryError) as e:
                print(f"torch-harmonics {grid} {nlat}x{nlon} {dt}: failed ({e})", file=sys.stderr)
            print(f"  torch-harmonics {grid} {nlat}x{nlon} {dt} done", file=sys.stderr, flush=True)


def bench_shtns(cases, threads, results):
    try:
        import numpy as np
        import shtns
    except Exception as e:  # noqa: BLE001
        print(f"SHTns: not available ({e})", file=sys.stderr)
        return
    for grid, nlat, nlon, batch in cases:
        lmax, mmax = truncation(grid, nlat, nlon)
        # SHTns 3 computes the Legendre functions on the fly (as far as we know, with every grid
        # flag); sht_gauss_fly hangs in set_grid with SHTns 3.7.5 here (180x360), so sht_gauss.
        flags = shtns.sht_gauss if grid == "legendre-gauss" else shtns.sht_reg_poles
        if nlat < 32:  # SHTns exits the process (not an exception) below 32 rows
            print(f"SHTns {grid} {nlat}x{nlon}: skipped (SHTns needs nlat >= 32)", file=sys.stderr)
            continue
        try:
            sh = shtns.sht(lmax - 1, mmax - 1, 1, shtns.sht_orthonormal, threads)
            sh.set_grid(nlat, nlon, flags)
        except Exception as e:  # noqa: BLE001
            print(f"SHTns {grid} {nlat}x{nlon}: cannot set up ({e})", file=sys.stderr)
            continue
        rng = np.random.default_rng(0)
        fields = [rng.standard_normal(sh.spat_array().shape) for _ in range(batch)]
        coeffs = [sh.analys(f) for f in fields]
        fwd = lambda: [sh.analys(f) for f in fields]  # noqa: E731
        inv = lambda: [sh.synth(c) for c in coeffs]  # noqa: E731
        for d, fn in (("sht", fwd), ("isht", inv)):
            s = median_seconds(fn)
            results[("SHTns", grid, nlat, nlon, batch, d, "f64")] = {"ms_call": 1e3 * s, "ms_field": 1e3 * s / batch}
        del sh
        print(f"  SHTns {grid} {nlat}x{nlon} done", file=sys.stderr, flush=True)


def bench_ducc0(cases, threads, results):
    try:
        import ducc0
        import numpy as np
    except Exception as e:  # noqa: BLE001
        print(f"ducc0: not available ({e})", file=sys.stderr)
        return
    for grid, nlat, nlon, batch in cases:
        lmax, mmax = truncation(grid, nlat, nlon)
        geom = "GL" if grid == "legendre-gauss" else "CC"
        for dt in DTYPES:
            ndt = np.float32 if dt == "f32" else np.float64
            rng = np.random.default_rng(0)
            fields = [rng.standard_normal((1, nlat, nlon)).astype(ndt) for _ in range(batch)]
            kw = dict(spin=0, lmax=lmax - 1, mmax=mmax - 1, geometry=geom, nthreads=threads)
            try:
                coeffs = [ducc0.sht.analysis_2d(map=f, **kw) for f in fields]
            except Exception as e:  # noqa: BLE001
                print(f"ducc0 {grid} {nlat}x{nlon} {dt}: failed ({e})", file=sys.stderr)
                continue
            fwd = lambda: [ducc0.sht.analysis_2d(map=f, **kw) for f in fields]  # noqa: E731
            inv = lambda: [ducc0.sht.synthesis_2d(alm=c, ntheta=nlat, nphi=nlon, **kw) for c in coeffs]  # noqa: E731
            for d, fn in (("sht", fwd), ("isht", inv)):
                s = median_seconds(fn)
                results[("ducc0", grid, nlat, nlon, batch, d, dt)] = {"ms_call": 1e3 * s, "ms_field": 1e3 * s / batch}
        print(f"  ducc0 {grid} {nlat}x{nlon} done", file=sys.stderr, flush=True)


def run_gradsphere(exe, threads, quick, gs_csv, results, case=None):
    tmp = None
    if gs_csv is None:
        if not os.path.exists(exe):
            print(f"gradsphere: {exe} not built; skipping", file=sys.stderr)
            return
        fd, gs_csv = tempfile.mkstemp(suffix=".csv")  # outside the repository
        tmp = gs_csv
        os.close(fd)
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        cmd = [exe, "bench", "sht", "--csv", gs_csv] + (["--quick"] if quick else [])
        if case is not None:
            cmd += ["--case", f"{case[0]}:{case[1]}x{case[2]}"]
        print("running: " + " ".join(cmd), file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True, env=env, stdout=sys.stderr)
    with open(gs_csv) as f:
        for r in csv.DictReader(f):
            key = ("gradsphere", r["grid"], int(r["nlat"]), int(r["nlon"]), int(r["batch"]), r["dir"], r["dtype"])
            results[key] = {"ms_call": float(r["ms_call"]), "ms_field": float(r["ms_field"]),
                            "table_mb": float(r["table_mb"]), "peak_mb": float(r["peak_mb"]),
                            "gflops": float(r["gflops"]), "sgemm": float(r["sgemm_gflops"])}
    if tmp is not None:
        os.remove(tmp)


def fmt(v, spec=".3f", suffix=""):
    return "—" if v is None else format(v, spec) + suffix


def print_table(cases, results):
    def get(lib, *k, field="ms_field"):
        r = results.get((lib,) + k)
        return None if r is None else r.get(field)

    print("| grid | nlat x nlon | B | dir | dt | gradsphere ms/field | SHTns ms/field (f64) | ducc0 ms/field | "
          "torch-harmonics ms/field | gs vs SHTns | th / gs | gs table MB | th table MB | gs / th table |")
    print("|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for grid, nlat, nlon, batch in cases:
        for dt in DTYPES:
            for d in ("sht", "isht"):
                k = (grid, nlat, nlon, batch, d, dt)
                gs = get("gradsphere", *k)
                sh = get("SHTns", grid, nlat, nlon, batch, d, "f64")
                du = get("ducc0", *k)
                tht = get("torch-harmonics", *k)
                gtab = get("gradsphere", *k, field="table_mb")
                ttab = get("torch-harmonics", *k, field="table_mb")
                vs_sh = None if gs is None or sh is None else gs / sh
                th_gs = None if gs is None or tht is None else tht / gs
                tab = None if gtab is None or ttab is None else gtab / ttab
                print(f"| {grid} | {nlat}x{nlon} | {batch} | {d} | {dt} | {fmt(gs, '.4f')} | {fmt(sh, '.4f')} | "
                      f"{fmt(du, '.4f')} | {fmt(tht, '.4f')} | {fmt(vs_sh, '.2f', 'x')} | {fmt(th_gs, '.1f', 'x')} | "
                      f"{fmt(gtab, '.2f')} | {fmt(ttab, '.2f')} | {fmt(tab, '.3f')} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="only the smallest case (a smoke run)")
    ap.add_argument("--max-nlat", type=int, default=10**9, help="skip cases with more rows")
    ap.add_argument("--gradsphere", default="build/tools/gradsphere", help="the gradsphere executable")
    ap.add_argument("--gs-csv", default=None, help="reuse this `gradsphere bench sht --csv` output")
    ap.add_argument("--no-gradsphere", action="store_true")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run everything this many times and report each timing's median over them")
    ap.add_argument("--no-interleave", action="store_true",
                    help="run gradsphere's cases in one process first, then each reference (the old order)")
    ap.add_argument("--skip", default="", help="comma list of references to skip: th,shtns,ducc0")
    ap.add_argument("--json", default=None, help="also dump all results to this file")
    args = ap.parse_args()

    if args.repeat < 1:
        ap.error(f"--repeat: expected a count of at least 1, got {args.repeat}")
    cases = [c for c in (QUICK_CASES if args.quick else CASES) if c[1] <= args.max_nlat]
    skip = set(s for s in args.skip.split(",") if s)
    results = {}
    print(f"threads {args.threads}; load {os.getloadavg()}", file=sys.stderr)
    # One case at a time, gradsphere then each reference, so that the two sides of a row are timed
    # within seconds of each other (this machine's speed drifts over minutes); with --gs-csv, or
    # --no-interleave, every gradsphere case first, then each reference's.
    # --repeat N: the whole sequence N times, each timing then the median of its N values.
    interleave = args.gs_csv is None and not args.no_interleave and not args.no_gradsphere
    runs = []
    for _ in range(args.repeat):
        one = {}
        for group in ([[c] for c in cases] if interleave else [cases]):
            if not args.no_gradsphere:
                if interleave:
                    run_gradsphere(args.gradsphere, args.threads, args.quick, None, one, case=group[0])
                elif group is cases:
                    run_gradsphere(args.gradsphere, args.threads, args.quick, args.gs_csv, one)
            if "shtns" not in skip:
                bench_shtns(group, args.threads, one)
            if "ducc0" not in skip:
                bench_ducc0(group, args.threads, one)
            if "th" not in skip:
                bench_torch_harmonics(group, args.threads, one)
        runs.append(one)
    for key in {k for one in runs for k in one}:
        values = [one[key] for one in runs if key in one]
        results[key] = dict(values[0])
        for field in ("ms_call", "ms_field", "gflops"):  # the timings (gflops from ms_call); the rest from pass 1
            if all(field in v for v in values):
                results[key][field] = statistics.median(v[field] for v in values)
    print(f"load after: {os.getloadavg()}", file=sys.stderr)

    print(f"\nms per field (median), {args.threads} threads; 'gs vs SHTns' < 1 means gradsphere is faster; "
          "'th / gs' is torch-harmonics' time over gradsphere's.\n")
    print_table(cases, results)
    if args.json:
        import json
        with open(args.json, "w") as f:
            json.dump([{"lib": k[0], "grid": k[1], "nlat": k[2], "nlon": k[3], "batch": k[4], "dir": k[5],
                        "dtype": k[6], **v} for k, v in results.items()], f, indent=1)


if __name__ == "__main__":
    main()
