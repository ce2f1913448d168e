"""Throughput of every encoder (forward, forward+backward) on this machine, and HashGrid 3D against
nerfstudio's pure-torch HashEncoding in the same run when nerfstudio is importable.

    python scripts/bench_encoders.py [--batch 65536] [--repeats 5] [--out docs/benchmarks.md]

Samples/s are medians over ``--repeats`` timed runs after one warm-up. Forward+backward is one forward and
a backward of sum(out * g), to the parameters only (a training step's encoder work) and also to the inputs.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from inr_enc import build_encoder
from inr_enc.io import write_text_atomically

HASHGRID_3D = {"otype": "HashGrid", "n_levels": 16, "n_features_per_level": 2, "log2_hashmap_size": 19,
               "base_resolution": 16, "per_level_scale": 2.0}
CASES = [
    ("HashGrid 3D (L=16, F=2, T=2^19)", HASHGRID_3D, 3),
    ("HashGrid 2D (L=16, F=2, T=2^15, scale 1.5)", {**HASHGRID_3D, "log2_hashmap_size": 15, "per_level_scale": 1.5}, 2),
    ("DenseGrid 2D (8 levels)", {"otype": "DenseGrid", "n_levels": 8}, 2),
    ("TiledGrid 3D (8 levels, base 16)", {"otype": "TiledGrid", "n_levels": 8}, 3),
    ("Frequency 3D (12 frequencies)", {"otype": "Frequency"}, 3),
    ("NeRF 3D (10 frequencies)", {"otype": "NeRF"}, 3),
    ("TriangleWave 3D (12 frequencies)", {"otype": "TriangleWave"}, 3),
    ("OneBlob 3D (16 bins)", {"otype": "OneBlob"}, 3),
    ("SphericalHarmonics (degree 4)", {"otype": "SphericalHarmonics"}, 3),
    ("RandomFourier 2D (256 features)", {"otype": "RandomFourier"}, 2),
    ("LearnableFourier 2D (128 features)", {"otype": "LearnableFourier"}, 2),
    ("Identity 3D", {"otype": "Identity"}, 3),
]


def time_module(module: torch.nn.Module, n_dims: int, batch: int, repeats: int) -> tuple[float, float, float]:
    """Samples/s (medians of ``repeats`` runs) of: forward; forward+backward to the parameters (training);
    forward+backward to the parameters and the input coordinates."""
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(batch, n_dims, generator=gen)
    grad = torch.randn(batch, module(x[:2]).shape[-1], generator=gen)

    def forward() -> None:
        with torch.no_grad():
            module(x)

    def backward(input_grad: bool) -> None:
        xg = x.clone().requires_grad_(input_grad)
        out = (module(xg).float() * grad).sum()
        if out.requires_grad:
            out.backward()

    rates = []
    for step in (forward, lambda: backward(False), lambda: backward(True)):
        step()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        rates.append(batch / statistics.median(times))
    return rates[0], rates[1], rates[2]


def machine_line(threads: int | None = None) -> str:
    """The reports' machine line: CPU, core count, torch and its thread count, Python, date."""
    threads = torch.get_num_threads() if threads is None else threads
    return (f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
            f"torch {torch.__version__} with {threads} threads, Python {sys.version.split()[0]}, "
            f"{time.strftime('%Y-%m-%d')}")


def nerfstudio_hash_encoding() -> torch.nn.Module | None:
    """nerfstudio's HashEncoding(implementation="torch") configured like HASHGRID_3D, or None if not importable."""
    try:
        from nerfstudio.field_components.encodings import HashEncoding
    except Exception:  # nerfstudio is an optional extra
        return None
    levels, base, scale = HASHGRID_3D["n_levels"], HASHGRID_3D["base_resolution"], HASHGRID_3D["per_level_scale"]
    return HashEncoding(num_levels=levels, min_res=base, max_res=int(base * scale ** (levels - 1)),
                        log2_hashmap_size=HASHGRID_3D["log2_hashmap_size"], features_per_level=2,
                        implementation="torch")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2**16)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, help="write the markdown report here")
    args = parser.parse_args()

    time_module(build_encoder(CASES[0][1], CASES[0][2]), CASES[0][2], args.batch, 1)  # warm the allocator up
    rows = []
    for name, config, n_dims in CASES:
        rates = time_module(build_encoder(config, n_dims), n_dims, args.batch, args.repeats)
        rows.append((name, *rates))
        print(f"{name:45s} " + "  ".join(f"{r / 1e6:8.3f}" for r in rates) + "  M samples/s", flush=True)

    peer = nerfstudio_hash_encoding()
    if peer is not None:
        theirs = time_module(peer, 3, args.batch, args.repeats)
        ratios = [ours / other for ours, other in zip(rows[0][1:], theirs)]
        rows += [("nerfstudio HashEncoding(implementation='torch'), HashGrid 3D config", *theirs),
                 ("**ratio inr_enc / nerfstudio** (HashGrid 3D)", *ratios)]
        print("nerfstudio torch HashEncoding: " + "  ".join(f"{r / 1e6:8.3f}" for r in theirs)
              + "  M samples/s; ratio " + "  ".join(f"{r:.1f}x" for r in ratios), flush=True)

    if args.out:
        header = (f"Command: `python scripts/bench_encoders.py --batch {args.batch} --repeats {args.repeats}`  \n"
                  f"{machine_line()}\n\nM samples/s; ratios are inr_enc over nerfstudio.\n\n"
                  "| encoder | forward | fwd+bwd (params) | fwd+bwd (params + input) |\n|---|---|---|---|\n")
        cells = [(name, [f"{r:.1f}x" if name.startswith("**ratio") else f"{r / 1e6:.3f}" for r in rates])
                 for name, *rates in rows]
        body = "".join(f"| {name} | {' | '.join(values)} |\n" for name, values in cells)
        write_text_atomically(args.out, header + body)


if __name__ == "__main__":
    main()
