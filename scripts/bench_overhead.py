"""Per-call cost of encoder forwards at small batches, where Python-side work (input checks, backend choice)
shows; uses only inr_enc's public API, so two versions can be compared by running it with each on PYTHONPATH:

    PYTHONPATH=. python scripts/bench_overhead.py                  # this tree
    git worktree add /tmp/before 8d2dfae && PYTHONPATH=/tmp/before python scripts/bench_overhead.py

Prints microseconds per forward (the fastest of ``--repeats`` timings of ``--calls`` calls each: the least disturbed
by anything else on the machine, as timeit advises) and per forward+backward (to the parameters and the input), for a
3D HashGrid on backend "auto" (the C++ kernel on CPU), the same grid in
a Composite with a Frequency encoding, and a Frequency encoding alone.
"""

from __future__ import annotations

import argparse
import time

import torch

import inr_enc

ENCODERS = {
    "HashGrid 3D (L=16)": ({"otype": "HashGrid", "n_levels": 16, "log2_hashmap_size": 15}, 3),
    "Composite(HashGrid 2D, Frequency 1D)": ({"otype": "Composite", "nested": [
        {"otype": "HashGrid", "n_levels": 16, "log2_hashmap_size": 15, "n_dims_to_encode": 2},
        {"otype": "Frequency", "n_frequencies": 4}]}, 3),
    "Frequency 3D": ({"otype": "Frequency", "n_frequencies": 6}, 3),
}


def per_call_us(step, calls: int, repeats: int) -> float:
    step()  # warm-up (and a first kernel build)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            step()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 256, 4096])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(f"inr_enc at {inr_enc.__file__}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    for name, (config, d) in ENCODERS.items():
        encoder = inr_enc.build_encoder(config, d)
        for batch in args.batches:
            x = torch.rand(batch, d, generator=torch.Generator().manual_seed(0))
            x_grad = x.clone().requires_grad_()

            def forward_backward():
                encoder(x_grad).sum().backward()

            with torch.no_grad():
                forward = per_call_us(lambda: encoder(x), args.calls, args.repeats)
            both = per_call_us(forward_backward, args.calls // 5, args.repeats)
            print(f"{name:40s} batch {batch:6d}   forward {forward:9.1f} us   fwd+bwd {both:9.1f} us")


if __name__ == "__main__":
    main()
