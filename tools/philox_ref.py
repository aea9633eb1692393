"""gradsphere's counter-based random numbers in numpy, for reference scripts that must draw what
the C++ code draws (tools/make_golden_dropout.py, tools/diff_autograd.py's dropout): Philox-4x32-10
(engine/philox.h), its 53-bit uniform, FNV-1a (models::param_key) and a dropout mask
(ops/dropout.h: an element is kept when the uniform at its index is >= p)."""
import numpy as np

M64 = (1 << 64) - 1


def philox(seed, stream, index):
    """The four words of engine/philox.h for each uint64 index (numpy arrays)."""
    index = np.asarray(index, dtype=np.uint64)
    c0 = (index & np.uint64(0xFFFFFFFF)).astype(np.uint64)
    c1 = (index >> np.uint64(32)).astype(np.uint64)
    c2 = np.full_like(c0, stream & 0xFFFFFFFF)
    c3 = np.full_like(c0, (stream >> 32) & 0xFFFFFFFF)
    k0, k1 = seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF
    m0, m1, lo = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57), np.uint64(0xFFFFFFFF)
    for _ in range(10):
        p0, p1 = m0 * c0, m1 * c2
        hi0, lo0 = p0 >> np.uint64(32), p0 & lo
        hi1, lo1 = p1 >> np.uint64(32), p1 & lo
        c0, c1, c2, c3 = hi1 ^ c1 ^ np.uint64(k0), lo1, hi0 ^ c3 ^ np.uint64(k1), lo0
        k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
    return c0, c1, c2, c3


def uniforms(seed, stream, count):
    """gs::rand(f64) of key (seed, stream) at indices 0 .. count - 1."""
    w = philox(seed, stream, np.arange(count, dtype=np.uint64))
    bits = ((w[0] << np.uint64(21)) ^ (w[1] >> np.uint64(11))) & np.uint64((1 << 53) - 1)
    return bits.astype(np.float64) / 9007199254740992.0


def fnv1a(name):
    h = 1469598103934665603
    for c in name.encode():
        h = ((h ^ c) * 1099511628211) & M64
    return h


def keep_mask(seed, stream, shape, p):
    """ops/dropout.h's decisions for a whole tensor of `shape` (row-major indices): True = kept."""
    return (uniforms(seed, stream, int(np.prod(shape, dtype=np.int64))) >= p).reshape(shape)


def check():
    """Random123's known answer (tests/engine/test_random.cpp)."""
    w = philox(0, 0, [0])
    assert tuple(int(x[0]) for x in w) == (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)
