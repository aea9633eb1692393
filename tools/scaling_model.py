#!/usr/bin/env python3
"""The communication model of distributed SFNO training (distributed/NOTES.md, "Scaling model").

Step time of one optimizer step per GPU = compute / (h w) * imbalance + transposes + gradient
all-reduce, for an SFNO at 721x1440 (embed 384, 8 layers, scale factor 8: internal 91x180,
lmax = mmax = 90) with 73 input and output channels and one sample per data replica. Overlap is
credited where it is measured: the reducer launches every gradient bucket during backward
(ReducerStats::launched_in_backward == buckets_launched, distributed/BENCHMARKS.md), so the
all-reduce hides behind the backward pass up to its length (2/3 of compute), all but the last bucket; the share of
transpose time hidden by pipelining is an input, 0 until it is measured. The same formulas are
the C++ planner's (distributed/grid_planner.h, `gradsphere train --grid auto`).
Standard library only; a reference tool outside the build.  Usage: python3 tools/scaling_model.py
"""
import math

# ---- the problem
NLAT, NLON, C, CIO, LAYERS = 721, 1440, 384, 73, 8
H_INT, W_INT = (NLAT - 1) // 8 + 1, NLON // 8          # 91 x 180
L = M = min(H_INT, W_INT // 2)                          # 90
PAIRS = L * (L + 1) // 2                                # (l, m) with m <= l

# ---- assumptions (state them; change them here)
GPU_FLOPS = 50e12      # sustained FLOP/s of one H100/H200 on this mix (TF32 GEMMs, FFTs, Legendre)
NVLINK_BW = 350e9      # B/s per GPU per direction achieved by all-to-all inside an 8-GPU NVSwitch node
                       # (NVLink 4: 450 GB/s per direction, NVIDIA H100 datasheet; ~80% achieved)
IB_BW = 40e9           # B/s per GPU between nodes: one 400 Gb/s NDR InfiniBand port per GPU
                       # (50 GB/s, NVIDIA DGX H100 reference architecture; ~80% achieved)
ALPHA_NODE, ALPHA_NET = 5e-6, 10e-6   # s per collective inside a node / across nodes
GPUS_PER_NODE = 8
GLOBAL_BATCH_MAX = 64  # larger global batches are not used to train SFNOs: beyond it, split the sphere
ALLREDUCE_HIDDEN_SHARE = 1.0  # of the all-reduce overlapped with backward: every bucket launched in backward
BUCKET_BYTES = 25 * 2 ** 20  # the reducer's bucket (ReducerOptions::bucket_bytes, DDP's 25 MB)
TRANSPOSE_HIDDEN_SHARE = 0.0  # of transpose time hidden by pipelining the SHT: measured on the 2-vCPU VM,
                              # none (pipelining was 2-52% slower: distributed/BENCHMARKS.md); GPUs unmeasured


def forward_flops():
    """FLOPs of one forward pass of one sample."""
    hw, hw_int = NLAT * NLON, H_INT * W_INT
    fft = lambda rows, n: rows * C * 2.5 * n * math.log2(n)
    legendre = lambda rows: rows * PAIRS * 4 * C         # real table x complex data
    sht = lambda rows, n: fft(rows, n) + legendre(rows)
    mlp = lambda points: 2 * 2 * C * (2 * C) * points
    spectral = PAIRS * C * C * 8
    f = 2 * CIO * C * hw * 2                             # encoder and decoder
    f += sht(NLAT, NLON) + 2 * sht(H_INT, W_INT) + spectral + mlp(hw_int)          # block 0 (+ residual)
    f += (LAYERS - 2) * (2 * sht(H_INT, W_INT) + spectral + mlp(hw_int))            # inner blocks
    f += sht(H_INT, W_INT) + 2 * sht(NLAT, NLON) + spectral + mlp(hw)               # last block, full grid
    return f


def transpose_bytes(h, w):
    """Bytes one rank sends in the transposes of one step (forward and backward), f32 fields."""
    def one(nlat, nlon):  # sht or isht of C fields: dist::sht_min_bytes_sent
        tile = 1.0 / (h * w)
        b = 0.0
        if w > 1: b += (C * nlat * nlon * 4 + C * nlat * M * 8) * tile * (w - 1) / w
        if h > 1: b += (C * nlat * M * 8 + C * L * M * 8) * tile * (h - 1) / h
        return b
    full, internal = one(NLAT, NLON), one(H_INT, W_INT)
    per_forward = (full + 2 * internal) + (LAYERS - 2) * 2 * internal + (internal + 2 * full)
    return 2 * per_forward


def transposes_per_step(h, w):
    per_transform = 2 * (w > 1) + 2 * (h > 1)
    return 2 * (3 * LAYERS) * per_transform


def gradient_bytes(h):
    """Gradient bytes one rank all-reduces: replicated weights, and its degree shard of the spectral ones."""
    replicated = 4 * (2 * CIO * C + LAYERS * (2 * C * 2 * C + 4 * C))
    spectral = LAYERS * C * C * L * 8 / h
    return replicated + spectral


def imbalance(w):
    """Busiest rank's share of the Legendre work over the even share, for contiguous order blocks."""
    if w == 1: return 1.0
    work = [L - m for m in range(M)]
    per = math.ceil(M / w)
    return max(sum(work[i:i + per]) for i in range(0, M, per)) / (sum(work) / w)


def step_time(d, h, w, t1):
    s = h * w
    spans_nodes = s > GPUS_PER_NODE
    bw_spatial = IB_BW if spans_nodes else NVLINK_BW
    alpha_spatial = ALPHA_NET if spans_nodes else ALPHA_NODE
    compute = t1 / s * (1 + 0.15 * (imbalance(w) - 1))   # the Legendre part is ~15% of the work
    comm = transpose_bytes(h, w) / bw_spatial + transposes_per_step(h, w) * alpha_spatial if s > 1 else 0.0
    comm *= 1 - TRANSPOSE_HIDDEN_SHARE
    g = d * w  # the reduction group of the spectral weights (data x w)
    ar = 0.0
    if g > 1 or d > 1:
        n = max(g, d)
        bw = IB_BW if d * s > GPUS_PER_NODE else NVLINK_BW
        ar = 2 * (n - 1) / n * gradient_bytes(h) / bw + 2 * math.log2(n) * ALPHA_NET
        # Hidden behind backward, up to its length; the last bucket (25 MB) starts when backward ends.
        last = ar * min(1.0, BUCKET_BYTES / gradient_bytes(h))
        ar = max(ar - min(ALLREDUCE_HIDDEN_SHARE * ar, compute * 2 / 3), last)
    return compute + comm + ar, compute, comm, ar


def main():
    t1 = 3 * forward_flops() / GPU_FLOPS
    print(f"SFNO {NLAT}x{NLON}, embed {C}, {LAYERS} layers, internal {H_INT}x{W_INT}, lmax = mmax = {L}")
    print(f"one sample forward + backward: {3 * forward_flops() / 1e12:.2f} TFLOP -> {t1 * 1e3:.0f} ms on one GPU "
          f"at {GPU_FLOPS / 1e12:.0f} TFLOP/s")
    print(f"overlap credited: {ALLREDUCE_HIDDEN_SHARE:.0%} of the all-reduce (up to the backward pass, "
          f"the last bucket exposed), "
          f"{TRANSPOSE_HIDDEN_SHARE:.0%} of the transposes\n")
    print("| GPUs | best grid (D x h x w) | global batch | step ms | compute | transposes | all-reduce | samples/s | efficiency |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for p in [2 ** k for k in range(11)]:
        best = None
        for s in [2 ** k for k in range(0, 8)]:
            if p % s: continue
            d = p // s
            if d > GLOBAL_BATCH_MAX: continue
            for h in [2 ** k for k in range(0, 8)]:
                if s % h: continue
                w = s // h
                if h > H_INT or w > W_INT // 2: continue
                t, comp, comm, ar = step_time(d, h, w, t1)
                rate = d / t
                if best is None or rate > best[0]:
                    best = (rate, d, h, w, t, comp, comm, ar)
        rate, d, h, w, t, comp, comm, ar = best
        eff = rate / (p / t1)
        print(f"| {p} | {d}x{h}x{w} | {d} | {t * 1e3:.1f} | {comp * 1e3:.1f} | {comm * 1e3:.1f} | {ar * 1e3:.1f} | "
              f"{rate:.1f} | {eff * 100:.0f}% |")


if __name__ == "__main__":
    main()
