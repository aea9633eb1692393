"""Writes the torch-harmonics parity fixtures for tests/models/test_sfno.cpp.

Run with the reference environment (torch + torch-harmonics 0.9.3):
    /opt/gs-ref/bin/python tests/models/data/make_sfno_reference.py
It builds small torch-harmonics example SFNOs, gives every parameter random values (so that no
parameter sits at an initial constant that would hide a wrong use of it), runs one forward pass in
float32, and writes `sfno_ref_<name>.bin`:

    "gsref1\n", then per tensor a header line "name dtype d0,d1,...\n" followed by its raw
    little-endian values (f32; c64 as interleaved real/imaginary f32 pairs).

Tensors: every state-dict entry under its own name, then "input" and "output". The model's
options are repeated in `sfno_ref_<name>.txt` for the reader of the test.
It also prints the parameter counts of a few configurations, which test_sfno.cpp hard-codes.
"""
import os

import torch
from torch_harmonics.examples.models.sfno import SphericalFourierNeuralOperator as SFNO

HERE = os.path.dirname(os.path.abspath(__file__))

CONFIGS = {
    # equiangular input grid, layer_norm, learnable latlon embedding, biases, residual projection
    "a": dict(img_size=(16, 32), grid="equiangular", grid_internal="legendre-gauss", scale_factor=2,
              in_chans=3, out_chans=2, embed_dim=8, num_layers=3, normalization_layer="layer_norm",
              pos_embed="learnable latlon", bias=True, residual_prediction=True),
    # legendre-gauss input grid, instance_norm, spectral embedding, no scaling, relu, 2 layers
    "b": dict(img_size=(12, 24), grid="legendre-gauss", grid_internal="legendre-gauss", scale_factor=1,
              in_chans=2, out_chans=2, embed_dim=6, num_layers=2, normalization_layer="instance_norm",
              pos_embed="spectral", activation_function="relu", residual_prediction=True,
              hard_thresholding_fraction=0.75, mlp_ratio=1.5),
}


def write(path, tensors):
    with open(path, "wb") as f:
        f.write(b"gsref1\n")
        for name, t in tensors:
            t = t.detach().contiguous()
            if t.dtype == torch.complex64:
                dt, raw = "c64", torch.view_as_real(t).numpy().astype("<f4").tobytes()
            else:
                dt, raw = "f32", t.to(torch.float32).numpy().astype("<f4").tobytes()
            dims = ",".join(str(d) for d in t.shape)
            f.write(f"{name} {dt} {dims}\n".encode())
            f.write(raw)


def main():
    for key, cfg in CONFIGS.items():
        torch.manual_seed(1234)
        model = SFNO(**cfg).eval()
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(0.4 * torch.randn_like(p) + (0.5 if name.endswith("norm.weight") else 0.0))
            x = torch.randn(2, cfg["in_chans"], *cfg["img_size"])
            y = model(x)
        tensors = list(model.state_dict().items()) + [("input", x), ("output", y)]
        write(os.path.join(HERE, f"sfno_ref_{key}.bin"), tensors)
        with open(os.path.join(HERE, f"sfno_ref_{key}.txt"), "w") as f:
            f.write(f"{cfg}\nparameters {sum(p.numel() for p in model.parameters())}\n")
        print(key, "written; parameters", sum(p.numel() for p in model.parameters()))

    # parameter counts for the count test
    for cfg in [dict(img_size=(32, 64), in_chans=2, out_chans=2, embed_dim=16, num_layers=4),
                dict(img_size=(32, 64), in_chans=3, out_chans=1, embed_dim=8, num_layers=2, bias=True,
                     normalization_layer="layer_norm", pos_embed="learnable lat", residual_prediction=True),
                dict(img_size=(128, 256), embed_dim=256, num_layers=4)]:
        m = SFNO(**cfg)
        print(cfg, "->", sum(p.numel() for p in m.parameters()))


if __name__ == "__main__":
    main()
