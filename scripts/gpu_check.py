#!/usr/bin/env python3
"""One GPU check: parity of the torch, Triton and tiny-cuda-nn paths, then a throughput table.

    scripts/gpu_check.sh [--repeats 5] [--batches 18 20]

Parity: outputs, input gradients and table gradients of every path against the torch path (HashGrid 2D/3D,
Frequency 2D/3D, SphericalHarmonics; Triton also on Dense/Tiled grids, other interpolations, 1D and float64),
as max abs differences relative to the torch path's largest magnitude. Triton exists for grids only; tcnn is
tried where tinycudann imports. Throughput: M samples/s, medians of ``--repeats`` timed runs after a warm-up,
forward and forward+backward (to the table for grids, to the inputs otherwise) at 2^18 and 2^20 samples.
tcnn's params layout (inr_enc/field/tcnn_layout.py) is checked against tinycudann where it imports.
Exits 1 on a parity failure; where no CUDA device exists it prints a notice and exits 0.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inr_enc import build_encoder, load_tcnn_params, tcnn_params
from inr_enc.encoders.grid import Grid
from inr_enc.encoders.tcnn import tcnn_unavailable_reason, tinycudann
from inr_enc.field import Field
from inr_enc.ops.grid import torch_grid_encoding
from inr_enc.ops.grid.triton_kernel import triton_grid_encoding, triton_unavailable_reason

HASHGRID = {"otype": "HashGrid", "n_levels": 16, "n_features_per_level": 2, "log2_hashmap_size": 19,
            "base_resolution": 16, "per_level_scale": 2.0}
CASES = [  # (name, config, d): parity on all, throughput on these
    ("HashGrid", HASHGRID, 2), ("HashGrid", HASHGRID, 3),
    ("Frequency", {"otype": "Frequency", "n_frequencies": 12}, 2),
    ("Frequency", {"otype": "Frequency", "n_frequencies": 12}, 3),
    ("SphericalHarmonics", {"otype": "SphericalHarmonics", "degree": 4}, 3),
]
EXTRA_GRIDS = [  # (name, config, d, dtype): Triton against torch only
    ("DenseGrid Nearest", {"otype": "DenseGrid", "n_levels": 8, "interpolation": "Nearest"}, 2, torch.float32),
    ("TiledGrid Smoothstep F=4", {"otype": "TiledGrid", "n_levels": 8, "n_features_per_level": 4,
                                  "interpolation": "Smoothstep"}, 3, torch.float32),
    ("HashGrid 1D F=1", {**HASHGRID, "n_features_per_level": 1, "log2_hashmap_size": 12}, 1, torch.float32),
    ("HashGrid 4D F=8", {**HASHGRID, "n_levels": 8, "n_features_per_level": 8}, 4, torch.float32),
    ("HashGrid 3D float64", HASHGRID, 3, torch.float64),
]
TOLERANCE = {"triton": 1e-5, "triton float64": 1e-12, "tcnn": 1e-3}  # relative to the torch path's max |value|
PARITY_BATCH = 1 << 14


Path = tuple[Callable[[torch.Tensor], torch.Tensor], list[torch.Tensor]]


def paths(config: dict, d: int) -> tuple[dict[str, Path], int]:
    """({name: (x [N, d] -> [N, n_out], the parameters it reads)} for each path that runs this config here, n_out)."""
    gen = torch.Generator().manual_seed(0)
    encoder = build_encoder(config, d, backend="torch").cuda()
    params = list(encoder.parameters())
    with torch.no_grad():  # O(1) table values, so that differences are visible
        for p in params:
            p.copy_(torch.randn(p.shape, generator=gen))
    result = {}
    if isinstance(encoder, Grid):
        args = encoder.params, encoder.levels, encoder.n_features_per_level, encoder.interpolation
        result["torch"] = (lambda x: torch_grid_encoding(x, *args), params)
        result["triton"] = (lambda x: triton_grid_encoding(x, *args), params)
    else:
        result["torch"] = (encoder, params)
    probe = torch.zeros(1, d, device="cuda")
    if tinycudann() is not None and tcnn_unavailable_reason(encoder, probe) is None:
        tcnn_encoder = build_encoder(config, d, backend="tcnn").cuda()
        tcnn_encoder.load_state_dict(encoder.state_dict())
        result["tcnn"] = (tcnn_encoder, list(tcnn_encoder.parameters()))
    return result, encoder.n_output_dims


def evaluate(fn: Callable, params: list[torch.Tensor], x: torch.Tensor,
             grad: torch.Tensor) -> list[torch.Tensor | None]:
    """[output, input gradient, parameter gradients...] of sum(fn(x) * grad)."""
    x = x.clone().requires_grad_()
    out = fn(x)
    grads = torch.autograd.grad(out, [x, *params], grad.to(out.dtype), allow_unused=True)
    return [out.detach(), *grads]


def check_parity(name: str, config: dict, d: int, dtype: torch.dtype,
                 only: tuple[str, ...] = ("triton", "tcnn")) -> bool:
    """Print each path's max abs differences against the torch path; False when one is beyond its tolerance."""
    all_paths, n_out = paths(config, d)
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(PARITY_BATCH, d, generator=gen, dtype=dtype)
    grad = torch.randn(PARITY_BATCH, n_out, generator=gen, dtype=dtype).cuda()
    ok = True
    if not any(p in all_paths for p in only):
        print(f"SKIP  {name:26s} {d}D: only the torch path runs here", flush=True)
    for path in [p for p in only if p in all_paths]:
        inputs = x.cuda()
        if path == "triton":  # the Triton and torch paths agree outside [0, 1] too (cells wrap); tcnn is checked inside
            inputs[: PARITY_BATCH // 4] = inputs[: PARITY_BATCH // 4] * 6 - 3
        reference = evaluate(*all_paths["torch"], inputs, grad)
        actual = evaluate(*all_paths[path], inputs.float() if path == "tcnn" else inputs, grad)
        key = f"{path} float64" if dtype == torch.float64 else path
        diffs, path_ok = [], True
        for label, a, r in zip(["out", "d/dx", "d/dparams"], actual, reference):
            if a is None or r is None:
                diffs.append(f"{label} n/a")
                continue
            diff = (a.double() - r.double()).abs().max().item() / max(r.abs().max().item(), 1e-30)
            path_ok = path_ok and diff <= TOLERANCE[key]
            diffs.append(f"{label} {diff:.2e}")
        ok = ok and path_ok
        print(f"{'PASS' if path_ok else 'FAIL'}  {name:26s} {d}D {str(dtype)[6:]:8s} {path:7s} "
              f"max abs diff / max abs torch (tolerance {TOLERANCE[key]:.0e}): {', '.join(diffs)}", flush=True)
    return ok


LAYOUT_CASES = [  # (n_input_dims, n_output_dims, encoding, network): tcnn's params in inr_enc and back
    (3, 4, HASHGRID, {"otype": "FullyFusedMLP", "n_neurons": 64, "n_hidden_layers": 2}),
    (2, 3, {"otype": "Frequency", "n_frequencies": 6}, {"otype": "CutlassMLP", "n_neurons": 48, "n_hidden_layers": 1,
                                                        "activation": "Softplus", "output_activation": "Sigmoid"}),
    (5, 1, {"otype": "Identity"}, {"otype": "CutlassMLP", "n_neurons": 32, "n_hidden_layers": 3, "activation": "Sine"}),
    (3, 3, {"otype": "SphericalHarmonics", "degree": 3},
     {"otype": "FullyFusedMLP", "n_neurons": 16, "n_hidden_layers": 1}),
]


def check_tcnn_layout(tcnn) -> bool:
    """tcnn's NetworkWithInputEncoding against inr_enc's Field of the same config: the initial network weights
    (the first n_params of the network, drawn from PCG32(seed) by both) bit for bit, then each one's params loaded
    into the other and the outputs compared (tcnn computes in float16: 1e-2 of the largest output)."""
    ok = True
    for n_in, n_out, encoding, network in LAYOUT_CASES:
        theirs = tcnn.NetworkWithInputEncoding(n_in, n_out, encoding, network, seed=7)
        ours = Field(n_in, n_out, {"encoding": encoding, "network": {**network, "seed": 7}}).cuda()
        n_net = sum(layer.weight.numel() for layer in ours.network.layers)
        init_equal = torch.equal(theirs.params.detach()[:n_net].cpu(), tcnn_params(ours.network))
        x = torch.rand(1 << 12, n_in, device="cuda")
        try:
            load_tcnn_params(ours, theirs.params.detach())
            into_ours = (ours(x) - theirs(x).float()).abs().max().item() / ours(x).abs().max().item()
            for layer in ours.network.layers:  # weights tcnn did not draw, into tcnn
                layer.weight.data.mul_(1.5)
            theirs.params.data.copy_(tcnn_params(ours).cuda())
            into_theirs = (ours(x) - theirs(x).float()).abs().max().item() / ours(x).abs().max().item()
        except (ValueError, RuntimeError) as error:
            print(f"FAIL  tcnn layout {encoding['otype']} + {network['otype']}: {error}")
            ok = False
            continue
        passed = init_equal and max(into_ours, into_theirs) < 1e-2
        ok &= passed
        print(f"{'PASS' if passed else 'FAIL'}  tcnn layout {encoding['otype']} + {network['otype']}: n_params "
              f"{theirs.params.numel()} (inr_enc {tcnn_params(ours).numel()}), initial network weights "
              f"{'equal' if init_equal else 'DIFFER'}, tcnn->inr_enc {into_ours:.1e}, inr_enc->tcnn {into_theirs:.1e}")
    return ok


def median_seconds(step: Callable[[], object], repeats: int) -> float:
    step()  # warm-up (and Triton's compile)
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def forward(fn: Callable, x: torch.Tensor) -> None:
    with torch.no_grad():
        fn(x)


def forward_backward(fn: Callable, x: torch.Tensor, targets: list[torch.Tensor], grad: torch.Tensor) -> None:
    torch.autograd.grad(fn(x), targets, grad)


def throughput(name: str, config: dict, d: int, batches: list[int], repeats: int) -> list[str]:
    """Markdown rows: | encoder | d | path | batch | forward M/s | forward+backward M/s |."""
    rows = []
    all_paths, n_out = paths(config, d)
    for path, (fn, params) in all_paths.items():
        for batch in batches:
            x = torch.rand(batch, d, device="cuda")
            grad = torch.randn(batch, n_out, device="cuda")
            targets = params if params else [x.requires_grad_()]
            fwd = batch / median_seconds(functools.partial(forward, fn, x), repeats) / 1e6
            fwd_bwd = batch / median_seconds(functools.partial(forward_backward, fn, x, targets, grad), repeats) / 1e6
            rows.append(f"| {name} | {d} | {path} | 2^{batch.bit_length() - 1} | {fwd:.1f} | {fwd_bwd:.1f} |")
            print(rows[-1], flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batches", type=int, nargs="+", default=[18, 20], help="log2 batch sizes")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device here (torch.cuda.is_available() is False); nothing checked.")
        return 0
    import triton

    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
          f"tinycudann {'imports' if tinycudann() is not None else 'not available'}")
    reason = triton_unavailable_reason(torch.zeros(1, 3, device="cuda"))
    if reason is not None:
        print(f"FAIL  triton: {reason}")
        return 1
    start = time.perf_counter()
    print("\n## Parity against the torch path")
    results = [check_parity(name, config, d, torch.float32) for name, config, d in CASES]  # every check runs
    results += [check_parity(name, config, d, dtype, ("triton",)) for name, config, d, dtype in EXTRA_GRIDS]
    if tinycudann() is not None:
        print("\n## tcnn's params layout (inr_enc/field/tcnn_layout.py)")
        results.append(check_tcnn_layout(tinycudann()))
    ok = all(results)
    print(f"\nparity: {'PASS' if ok else 'FAIL'} ({time.perf_counter() - start:.0f} s)")
    print("\n## Throughput (M samples/s, median of", args.repeats, "runs)\n")
    print("| encoder | d | path | batch | forward | forward+backward |\n|---|---|---|---|---|---|")
    for name, config, d in CASES:
        throughput(name, config, d, [1 << b for b in args.batches], args.repeats)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
