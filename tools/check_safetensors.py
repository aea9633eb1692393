#!/usr/bin/env python3
"""Checks that gradsphere's safetensors files and the reference implementation agree.

A reference tool: not part of the build or the tests. It needs the `safetensors`, `torch` and `numpy`
packages, e.g. in the reference environment outside the repository:

    /opt/gs-ref/bin/pip install safetensors torch numpy

Two directions:

    check_safetensors.py read FILE    FILE was written by gradsphere (save_safetensors or
                                      save_checkpoint). Loads it with safetensors' torch and numpy
                                      back ends, verifies every "gradsphere.checksum" entry with
                                      zlib.crc32 over the tensor's bytes, rebuilds the complex128
                                      tensors listed in "gradsphere.complex128" with
                                      torch.view_as_complex, and prints one line per tensor.
    check_safetensors.py write FILE   Writes FILE with safetensors.torch.save_file: the tensors of
                                      reference_tensors() below (f32, f64, i64, bool, c64, a 0-dim
                                      and an empty tensor) and metadata {"writer": "python"}, for
                                      gradsphere's load_safetensors to read and compare.

Exit status 0 when every check passes, 1 otherwise.
"""
import json
import struct
import sys
import zlib


def reference_tensors():
    """Values a C++ reader can recompute: element i of each tensor is a simple function of i."""
    import torch

    return {
        "f32": (torch.arange(6, dtype=torch.float32) * 0.5 - 1.0).reshape(2, 3),
        "f64": torch.tensor([1.0 / 3.0, -0.0, 1e-310, -2.5e300], dtype=torch.float64),
        "i64": torch.tensor([-(2**63), -1, 0, 2**63 - 1], dtype=torch.int64),
        "bool": torch.tensor([True, False, True]),
        "c64": torch.complex(torch.arange(4, dtype=torch.float32), -torch.arange(4, dtype=torch.float32)),
        "scalar": torch.tensor(7.25, dtype=torch.float64),
        "empty": torch.zeros((0, 4), dtype=torch.float32),
        # Stored transposed, so the writer has to make it contiguous.
        "transposed": torch.arange(12, dtype=torch.float64).reshape(3, 4).t().contiguous(),
    }


def read_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    return n, header, data


def check_read(path):
    import numpy as np
    import torch
    from safetensors import safe_open
    from safetensors.numpy import load_file as load_numpy
    from safetensors.torch import load_file as load_torch

    ok = True
    n, header, data = read_header(path)
    meta = header.get("__metadata__", {})
    if n % 8 != 0:
        print(f"FAIL header length {n} is not a multiple of 8")
        ok = False
    tensors = load_torch(path)
    with safe_open(path, framework="pt") as f:
        if f.metadata() != meta:
            print("FAIL safe_open metadata differs from the raw header")
            ok = False
    try:
        arrays = load_numpy(path)
    except Exception as e:  # numpy has no bfloat16 etc.; our dtypes should all load
        print(f"FAIL numpy back end: {e}")
        ok = False
        arrays = {}

    sums = json.loads(meta.get("gradsphere.checksum", "{}"))
    for name, expected in sorted(sums.items()):
        begin, end = header[name]["data_offsets"]
        actual = "crc32:%08x" % zlib.crc32(data[begin:end])
        if actual != expected:
            print(f"FAIL {name}: stored {expected}, zlib.crc32 gives {actual}")
            ok = False
    complex128 = set(json.loads(meta.get("gradsphere.complex128", "[]")))

    for name in sorted(tensors):
        t = tensors[name]
        if name in complex128:
            t = torch.view_as_complex(t)
        if name in arrays and not np.array_equal(arrays[name], tensors[name].numpy(), equal_nan=True):
            print(f"FAIL {name}: numpy and torch back ends disagree")
            ok = False
        magnitude = t.abs() if t.is_complex() else t.double().abs()
        summary = magnitude.double().sum().item()
        print(f"{name:40s} {str(t.dtype):16s} {str(tuple(t.shape)):20s} sum|x| = {summary!r}")
    for key, value in sorted(meta.items()):
        shown = value if len(value) < 60 else value[:57] + "..."
        print(f"metadata {key} = {shown!r}")
    print(f"checked {len(sums)} checksums, {len(complex128)} complex128 tensors: {'OK' if ok else 'FAILED'}")
    return ok


def check_write(path):
    from safetensors.torch import save_file

    save_file(reference_tensors(), path, metadata={"writer": "python"})
    print(f"wrote {path}")
    return True


def main(argv):
    if len(argv) != 3 or argv[1] not in ("read", "write"):
        print(__doc__)
        return 2
    return 0 if (check_read if argv[1] == "read" else check_write)(argv[2]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
