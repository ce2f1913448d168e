"""Hash grid compute paths side by side on this CPU, in one run: encoder throughput of the pure-PyTorch path, the
fused C++ kernel with dense and with sparse table gradients, and nerfstudio's torch HashEncoding (3D, when it
imports), each also as a fraction of the hardware ceiling of scripts/bench_limits.py; a full training step of
tcnn's image sample (HashGrid 2D + 64x2 ReLU MLP, RelativeL2, Adam); and peak memory per sample.

    python scripts/bench_grids.py [--repeats 5] [--quick] [--out docs/bench_grids.md]

Rates are medians over ``--repeats`` timed runs after one warm-up, at batch 2^16 and 2^18 (``--quick``: 2^10 and
2^12, ceilings from 2^16 lookups). Forward+backward is a forward and a backward of sum(out * g) to the table
only, from no gradient (set to None before each run, like zero_grad(set_to_none=True)). The training step is
forward, RelativeL2 loss (fitting.py's), backward, optimiser step and zero_grad(set_to_none=True): inr_enc's
default (backend "auto", i.e. the C++ kernel, with GridAdam.for_model's lazy Adam and sparse table gradients)
against the pure-torch path with torch.optim.Adam. Memory: in a fresh subprocess per path and grid, the rise of
the peak RSS during one forward+backward at the largest batch (after building, nothing warmed), per sample. On
Linux the peak is /proc/self/status VmHWM, reset just before the step: a child's ru_maxrss starts at its
parent's peak (exec keeps it), so it would hide the step. Elsewhere ru_maxrss.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the peer and the ceilings live in sibling scripts
from bench_encoders import HASHGRID_3D, machine_line, nerfstudio_hash_encoding
from bench_limits import GRIDS as LIMIT_GRIDS
from bench_limits import ceilings

from inr_enc import build_encoder
from inr_enc.field import Field, build_field
from inr_enc.fitting.training import elementwise_loss
from inr_enc.io import write_text_atomically
from inr_enc.ops.grid import cpu_kernel
from inr_enc.ops.grid.cpu_kernel import cpu_extension
from inr_enc.optim import GridAdam, enable_sparse_gradients

HASHGRID_2D = {**HASHGRID_3D, "log2_hashmap_size": 15, "per_level_scale": 1.5}
GRIDS = {"2D": ("HashGrid 2D (L=16, F=2, T=2^15, scale 1.5)", HASHGRID_2D, 2),
         "3D": ("HashGrid 3D (L=16, F=2, T=2^19, scale 2.0)", HASHGRID_3D, 3)}
CEILING_KEY = {name.split()[1]: name for name, _, _ in LIMIT_GRIDS}  # "2D" -> bench_limits' grid name
PATHS = ("torch", "cpp-dense", "cpp-sparse", "nerfstudio")
NETWORK = {"otype": "FullyFusedMLP", "n_neurons": 64, "n_hidden_layers": 2, "activation": "ReLU",
           "output_activation": "None"}
ADAM = {"lr": 1e-2, "betas": (0.9, 0.99), "eps": 1e-15}  # inr_enc/configs/hashgrid.yaml
TARGET = 1e6  # samples/s of a training step
DEFAULT_SPARSE_RULE = cpu_kernel.SPARSE_BELOW_READS_PER_ROW


def pow2(n: int) -> str:
    return f"2^{n.bit_length() - 1}" if n & (n - 1) == 0 else str(n)


def make_encoder(path: str, grid: str) -> torch.nn.Module | None:
    """The encoder of ``grid`` computed by ``path``; None where that path does not apply or is not installed."""
    _, config, n_dims = GRIDS[grid]
    if path == "nerfstudio":
        return nerfstudio_hash_encoding() if grid == "3D" else None
    if path.startswith("cpp") and cpu_extension() is None:
        return None
    encoder = build_encoder(config, n_dims, backend="torch" if path == "torch" else "cpp")
    # cpp-sparse: sparse table gradients at any batch size (the library's rule turns them on below one lookup
    # per table row only); this path measures what they cost where the default gives dense ones
    cpu_kernel.SPARSE_BELOW_READS_PER_ROW = float("inf") if path == "cpp-sparse" else DEFAULT_SPARSE_RULE
    if path == "cpp-sparse":
        enable_sparse_gradients(encoder)
    return encoder


def inputs(batch: int, n_dims: int, module: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """Uniform coordinates [batch, d] and an output gradient g [batch, outputs], seeded."""
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(batch, n_dims, generator=gen)
    with torch.no_grad():
        n_out = module(x[:2]).shape[-1]
    return x, torch.randn(batch, n_out, generator=gen)


def median_seconds(step: Callable[[], object], repeats: int, setup: Callable[[], object] = lambda: None) -> float:
    """Median wall seconds of ``step`` over ``repeats`` runs after one warm-up; ``setup`` runs untimed before each."""
    setup()
    step()
    times = []
    for _ in range(repeats):
        setup()
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def grid_rates(module: torch.nn.Module, n_dims: int, batch: int, repeats: int) -> tuple[float, float, str]:
    """(forward samples/s, forward+backward samples/s, layout of the table gradient the backward produced)."""
    x, g = inputs(batch, n_dims, module)

    def forward() -> None:
        with torch.no_grad():
            module(x)

    def clear() -> None:
        for param in module.parameters():
            param.grad = None

    forward_s = median_seconds(forward, repeats)
    train_s = median_seconds(lambda: (module(x).float() * g).sum().backward(), repeats, clear)
    layout = "sparse" if any(p.grad is not None and p.grad.is_sparse for p in module.parameters()) else "dense"
    return batch / forward_s, batch / train_s, layout


def training_step(default: bool, batch: int, repeats: int) -> dict[str, float]:
    """Seconds per phase (medians) and samples/s of a training step of HashGrid 2D + the 64x2 ReLU MLP:
    ``default`` inr_enc's defaults (C++ kernel, lazy GridAdam), else the torch path with torch.optim.Adam."""
    config = {"encoding": HASHGRID_2D, "network": NETWORK}
    cpu_kernel.SPARSE_BELOW_READS_PER_ROW = DEFAULT_SPARSE_RULE  # the library's own rule
    if default:
        model = build_field(2, 3, config)
        optimizer: torch.optim.Optimizer = GridAdam.for_model(model, lazy=True, **ADAM)
    else:
        model = Field(2, 3, config, backend="torch")  # build_field has no backend argument
        optimizer = torch.optim.Adam(model.parameters(), **ADAM)
    gen = torch.Generator().manual_seed(0)
    x, target = torch.rand(batch, 2, generator=gen), torch.rand(batch, 3, generator=gen)
    phases: dict[str, list[float]] = {"forward": [], "backward": [], "step": [], "zero_grad": [], "total": []}
    for run in range(repeats + 1):  # run 0 warms up (and creates the optimiser's state)
        marks = [time.perf_counter()]
        loss = elementwise_loss("RelativeL2", model(x).float(), target).mean()
        marks.append(time.perf_counter())
        loss.backward()
        marks.append(time.perf_counter())
        optimizer.step()
        marks.append(time.perf_counter())
        optimizer.zero_grad(set_to_none=True)
        marks.append(time.perf_counter())
        if run:
            for name, start, end in zip(phases, marks, marks[1:]):
                phases[name].append(end - start)
            phases["total"].append(marks[-1] - marks[0])
    result = {name: statistics.median(times) for name, times in phases.items()}
    result["samples_per_s"] = batch / result["total"]
    return result


def peak_rss(reset: bool = False) -> tuple[int, str]:
    """(peak resident bytes of this process, how it was read); ``reset`` first lowers Linux's VmHWM to VmRSS."""
    try:
        if reset:
            with open("/proc/self/clear_refs", "w") as clear_refs:
                clear_refs.write("5")
        with open("/proc/self/status") as status:
            kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
        return kib * 1024, "VmHWM" + " reset" * reset
    except (OSError, StopIteration):
        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return maxrss * (1 if sys.platform == "darwin" else 1024), "ru_maxrss"


def memory_probe(path: str, grid: str, batch: int) -> None:
    """Print the rise of the peak RSS in bytes during one forward+backward (run in a fresh process)."""
    module = make_encoder(path, grid)
    if module is None:
        return
    x, g = inputs(batch, GRIDS[grid][2], module)
    before, method = peak_rss(reset=True)
    (module(x).float() * g).sum().backward()
    print(peak_rss()[0] - before, method)


def probe_memory(path: str, grid: str, batch: int) -> tuple[int, str] | None:
    """(peak RSS rise in bytes, method) from a fresh subprocess, or None (with a notice) where it gave none."""
    run = subprocess.run([sys.executable, __file__, "--memory-probe", path, grid, str(batch)],
                         capture_output=True, text=True, check=False)
    if run.returncode:
        print(f"notice: memory probe {path} {grid} failed: {run.stderr.strip()[-300:]}", flush=True)
    if run.returncode or not run.stdout.strip():
        return None
    rise, _, method = run.stdout.strip().splitlines()[-1].partition(" ")
    return int(rise), method


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test, not a measurement")
    parser.add_argument("--out", type=Path, help="write the markdown report here")
    parser.add_argument("--memory-probe", nargs=3, metavar=("PATH", "GRID", "BATCH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_probe:
        path, grid, batch = args.memory_probe
        memory_probe(path, grid, int(batch))
        return

    batches = (2**10, 2**12) if args.quick else (2**16, 2**18)
    command = "python scripts/bench_grids.py" + " --quick" * args.quick + f" --repeats {args.repeats}"
    machine = machine_line()
    print(machine, flush=True)
    notes = []
    if cpu_extension() is None:
        notes.append("The C++ kernel did not build: no cpp rows; the default training step ran the torch path.")
    if nerfstudio_hash_encoding() is None:
        notes.append("nerfstudio did not import: no peer rows.")
    for note in notes:
        print("notice: " + note, flush=True)

    limits = ceilings(2**16 if args.quick else 2**22, args.repeats)["samples_per_s"]
    lines = [f"Command: `{command}`  ", machine, "", *(f"{note}\n" for note in notes), "## Grid encoder throughput", "",
             ("M samples/s (in brackets: % of the bench_limits ceiling, forward vs forward, fwd+bwd vs fwd+bwd); "
              "the gradient column is the table gradient the backward actually produced."), "",
             "| grid | batch | path | forward | fwd+bwd | table gradient |", "|---|---|---|---|---|---|"]
    for grid, (name, _, n_dims) in GRIDS.items():
        ceiling = limits[CEILING_KEY[grid]]
        print(f"\n{name}: ceiling {ceiling['forward'] / 1e6:.2f} forward, "
              f"{ceiling['forward+backward'] / 1e6:.2f} fwd+bwd M samples/s", flush=True)
        for batch in batches:
            rates: dict[str, tuple[float, float, str]] = {}
            for path in PATHS:
                module = make_encoder(path, grid)
                if module is None:
                    continue
                fwd, train, layout = rates[path] = grid_rates(module, n_dims, batch, args.repeats)
                cells = [f"{r / 1e6:.3f} ({100 * r / ceiling[k]:.0f}%)" for r, k in
                         ((fwd, "forward"), (train, "forward+backward"))]
                lines.append(f"| {name} | {pow2(batch)} | {path} | {cells[0]} | {cells[1]} | {layout} |")
                print(f"  batch {pow2(batch):5s} {path:11s} forward {cells[0]:16s} fwd+bwd {cells[1]:16s} "
                      f"({layout} table gradient)", flush=True)
                del module
            cpp = [rates[p] for p in ("cpp-dense", "cpp-sparse") if p in rates]
            for peer in ("torch", "nerfstudio"):
                if cpp and peer in rates:
                    best = [max(r[i] for r in cpp) / rates[peer][i] for i in (0, 1)]
                    lines.append(f"| {name} | {pow2(batch)} | **cpp best / {peer}** | {best[0]:.2f}x | "
                                 f"{best[1]:.2f}x | |")
                    print(f"  batch {pow2(batch):5s} cpp best / {peer}: forward {best[0]:.2f}x, "
                          f"fwd+bwd {best[1]:.2f}x", flush=True)

    lines += ["", "## Training step (HashGrid 2D + FullyFusedMLP 64x2 ReLU, RelativeL2, Adam)", "",
              f"Milliseconds per phase (medians); target {TARGET / 1e6:.0f} M samples/s.", "",
              "| batch | setup | M samples/s | forward + loss | backward | optimiser step | zero_grad | target |",
              "|---|---|---|---|---|---|---|---|"]
    print("\nTraining step (HashGrid 2D + 64x2 ReLU MLP, RelativeL2, Adam)", flush=True)
    setups = {"inr_enc default (cpp kernel, lazy GridAdam)": True, "torch path, torch.optim.Adam": False}
    for batch in batches:
        for label, default in setups.items():
            step = training_step(default, batch, args.repeats)
            ms = [f"{1e3 * step[k]:.1f}" for k in ("forward", "backward", "step", "zero_grad")]
            met = "met" if step["samples_per_s"] >= TARGET else "not met"
            lines.append(f"| {pow2(batch)} | {label} | {step['samples_per_s'] / 1e6:.3f} | {' | '.join(ms)} | {met} |")
            print(f"  batch {pow2(batch):5s} {label:44s} {step['samples_per_s'] / 1e6:7.3f} M samples/s "
                  f"(ms: forward+loss {ms[0]}, backward {ms[1]}, step {ms[2]}, zero_grad {ms[3]}; 1 M/s {met})",
                  flush=True)

    batch = batches[-1]
    lines += ["", f"## Peak memory per sample (batch {pow2(batch)}, one fwd+bwd, fresh process each)", "",
              ("Rise of the process's peak RSS during the step (in a fresh process, after building) over the "
               "batch size; VmHWM reset: Linux's peak, lowered to the current RSS just before the step."), "",
              "| grid | path | bytes/sample | peak read from |", "|---|---|---|---|"]
    print(f"\nPeak RSS rise per sample, one fwd+bwd at batch {pow2(batch)}", flush=True)
    for grid, (name, _, _) in GRIDS.items():
        for path in PATHS:
            probe = probe_memory(path, grid, batch)
            if probe is not None:
                lines.append(f"| {name} | {path} | {probe[0] / batch:.0f} | {probe[1]} |")
                print(f"  {name:45s} {path:11s} {probe[0] / batch:8.0f} bytes/sample ({probe[1]})", flush=True)

    if args.out:
        write_text_atomically(args.out, "\n".join(lines) + "\n")
        print(f"\nwrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
