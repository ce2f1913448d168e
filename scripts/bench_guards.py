"""What the input guards cost (finite outputs for every finite input: encoders' ``guard_input`` and the
``inr_enc/ops/phase.py`` tools): each encoder timed with its guard on and off, alternating in one process.

    python scripts/bench_guards.py [--batch 65536] [--rounds 7]

Prints the throughput with the guard as a fraction of the throughput without it (medians of ``--rounds``
alternating timings; 1.00 = free), for a forward and a forward+backward to the inputs.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Iterator

import torch

import inr_enc
from inr_enc.encoders import nerf, random_fourier

# name -> (config, input dims, module whose guard functions are inlined in its formula, their names)
CASES = {
    "Frequency 3D (12 frequencies)": ({"otype": "Frequency", "n_frequencies": 12}, 3, None, ()),
    "TriangleWave 3D (12 frequencies)": ({"otype": "TriangleWave", "n_frequencies": 12}, 3, None, ()),
    "OneBlob 3D (16 bins)": ({"otype": "OneBlob"}, 3, None, ()),
    "SphericalHarmonics (degree 4)": ({"otype": "SphericalHarmonics", "degree": 4}, 3, None, ()),
    "NeRF 3D (10 frequencies)": ({"otype": "NeRF"}, 3, nerf, ("reduce_period", "saturate")),
    "RandomFourier 2D (256 features)": ({"otype": "RandomFourier"}, 2, random_fourier, ("saturate",)),
    "LearnableFourier 2D (128 features)": ({"otype": "LearnableFourier"}, 2, random_fourier, ("saturate",)),
}


def unguarded(x: torch.Tensor, *args: object) -> torch.Tensor:
    return x


@contextlib.contextmanager
def guard_off(encoder: torch.nn.Module, module: object, names: tuple[str, ...]) -> Iterator[None]:
    """The encoder without its guard: ``guard_input`` shadowed on the instance, inlined guard functions replaced."""
    saved = {name: getattr(module, name) for name in names}
    object.__setattr__(encoder, "guard_input", unguarded)
    for name in names:
        setattr(module, name, unguarded)
    try:
        yield
    finally:
        object.__delattr__(encoder, "guard_input")
        for name, function in saved.items():
            setattr(module, name, function)


def seconds(encoder: torch.nn.Module, x: torch.Tensor, backward: bool, calls: int = 5) -> float:
    x = x.detach().requires_grad_(backward)
    start = time.perf_counter()
    for _ in range(calls):
        out = encoder(x)
        if backward:
            out.sum().backward()
    return (time.perf_counter() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2**16)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {args.batch}, CPU")
    print("| encoder | forward, guarded / unguarded | forward+backward, guarded / unguarded |\n|---|---|---|")
    for name, (config, dims, module, names) in CASES.items():
        encoder, x = inr_enc.build_encoder(config, dims), torch.rand(args.batch, dims)
        ratios = []
        for backward in (False, True):
            seconds(encoder, x, backward)  # warm-up
            on, off = [], []
            for _ in range(args.rounds):
                on.append(seconds(encoder, x, backward))
                with guard_off(encoder, module, names):
                    off.append(seconds(encoder, x, backward))
            ratios.append(statistics.median(off) / statistics.median(on))
        print(f"| {name} | {ratios[0]:.2f} | {ratios[1]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
