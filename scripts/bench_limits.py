"""Hardware ceiling for multiresolution grid encodings on this CPU: how many random F=2 float32 rows per second
one can gather from (forward) and scatter-add into (backward) tables of 2^15 or 2^19 rows, and what that caps a
16-level hash grid at in samples/s.

    python scripts/bench_limits.py [--lookups 4194304] [--repeats 5] [--out docs/limits.md]

Each rate is the median over ``--repeats`` timed runs of ``--lookups`` int64 row indices, after one warm-up, in two
layouts: one table of T rows with indices uniform over it, and 16 level tables of T rows stacked into one
[16 T, 2] table like a grid's parameters, the lookups split into 16 equal contiguous chunks, chunk l uniform over
level l (each level then sees lookups / 16 indices per pass, as a grid level sees 2^d x batch; at T=2^19 the stack
is 64 MiB, more than L3). Each is timed as torch ops (``index_select`` / ``index_add_`` on the [rows, 2] table and
``index_select`` / ``scatter_add_`` on it viewed as a complex64 vector) and as plain C++ loops compiled with
``torch.utils.cpp_extension.load_inline``, run with ``at::parallel_for`` at 1 and at ``torch.get_num_threads()``
threads. ``at::parallel_for`` is a header template that parallelises only when compiled with OpenMP, so the loops
are built with ``-fopenmp`` (compile and link); without it they run on one thread.

The C++ gather splits the lookups over threads and writes rows to an output like ``index_select``. The C++
scatter-adds never let two threads write one row. With 16 tables each thread owns whole tables (contiguous row
ranges) and runs only their chunks: this assumes chunk l touches only table l and chunks are equal, as in a grid
where every sample visits every level's own table. With one table thread p of P owns rows [T p/P, T (p+1)/P), scans
all lookups and skips the others': this assumes indices spread evenly over the rows, and it costs every thread a
full scan with unpredictable branches.

CPU/wall (in brackets) is process CPU seconds per wall second: on a machine shared with other jobs, a multithreaded
run whose CPU/wall stays near 1 did not get its cores. The ceiling is the best rate per operation and T over both
layouts; a grid doing ``g`` gathers and ``s`` scatter-adds per sample runs at most 1 / (g / gather_rate +
s / scatter_rate) samples/s (16 levels of 2^d corners: 64 in 2D, 128 in 3D).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from bench_encoders import machine_line  # a sibling script: scripts/ is on sys.path when these run
from torch.utils.cpp_extension import load_inline

from inr_enc.io import write_text_atomically

N_LEVELS = 16
TABLE_LOG2_ROWS = (15, 19)
GRIDS = [("HashGrid 2D (L=16, F=2)", 15, 64), ("HashGrid 3D (L=16, F=2)", 19, 128)]  # name, log2 rows, lookups/sample

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <atomic>
#include <cstring>

// How many chunks at::parallel_for splits [0, threads) into: 1 when it was compiled without OpenMP.
int64_t team_size() {
  std::atomic<int64_t> chunks{0};
  at::parallel_for(0, at::get_num_threads(), 1, [&](int64_t, int64_t) { ++chunks; });
  return chunks.load();
}

// out[i, :] = table[idx[i], :] for a [rows, 2] float32 table; threads split the lookups.
void gather(const torch::Tensor& table, const torch::Tensor& idx, torch::Tensor& out) {
  const float* t = table.data_ptr<float>();
  const int64_t* ix = idx.data_ptr<int64_t>();
  float* o = out.data_ptr<float>();
  at::parallel_for(0, idx.size(0), 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) std::memcpy(o + 2 * i, t + 2 * ix[i], 2 * sizeof(float));
  });
}

// table[idx[i], :] += src[i, :] for lookups in n_tables equal contiguous chunks, chunk l touching only table l's
// rows: threads own whole tables.
void scatter_add_tables(torch::Tensor& table, const torch::Tensor& idx, const torch::Tensor& src, int64_t n_tables) {
  float* t = table.data_ptr<float>();
  const int64_t* ix = idx.data_ptr<int64_t>();
  const float* s = src.data_ptr<float>();
  const int64_t n = idx.size(0);
  at::parallel_for(0, n_tables, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = n * begin / n_tables; i < n * end / n_tables; ++i) {
      t[2 * ix[i]] += s[2 * i];
      t[2 * ix[i] + 1] += s[2 * i + 1];
    }
  });
}

// table[idx[i], :] += src[i, :] for any indices: thread p of P owns rows [T p/P, T (p+1)/P), scans every lookup
// and applies those in its rows.
void scatter_add_rows(torch::Tensor& table, const torch::Tensor& idx, const torch::Tensor& src) {
  float* t = table.data_ptr<float>();
  const int64_t* ix = idx.data_ptr<int64_t>();
  const float* s = src.data_ptr<float>();
  const int64_t rows = table.size(0), n = idx.size(0), parts = at::get_num_threads();
  at::parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
    const uint64_t lo = rows * begin / parts, width = rows * end / parts - lo;
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t r = ix[i];
      if (r - lo < width) {
        t[2 * r] += s[2 * i];
        t[2 * r + 1] += s[2 * i + 1];
      }
    }
  });
}
"""


def compile_loops() -> ModuleType | None:
    """The C++ loops, or None (with a one-line notice) when they cannot be compiled."""
    try:
        return load_inline(name="inr_enc_bench_limits", cpp_sources=CPP_SOURCE,
                           functions=["team_size", "gather", "scatter_add_tables", "scatter_add_rows"],
                           extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])
    except (OSError, RuntimeError) as error:
        print(f"notice: C++ loops not compiled ({str(error).partition(chr(10))[0]}); torch ops only", flush=True)
        return None


def time_rate(step: Callable[[], object], n: int, repeats: int) -> tuple[float, float]:
    """(rows/s, process CPU seconds per wall second) of ``step`` doing ``n`` lookups, medians after one warm-up."""
    step()
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        step()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return n / statistics.median(walls), statistics.median(cpus) / statistics.median(walls)


def table_rows(log2_rows: int, n_tables: int, lookups: int, gen: torch.Generator) -> torch.Tensor:
    """``lookups`` row indices into ``n_tables`` stacked tables of 2^log2_rows rows: ``n_tables`` contiguous chunks,
    split at ``lookups * l // n_tables`` like ``scatter_add_tables``, chunk l uniform over table l's rows."""
    bounds = torch.tensor([lookups * table // n_tables for table in range(n_tables + 1)])
    tables = torch.repeat_interleave(torch.arange(n_tables), bounds.diff())
    return torch.randint(0, 2**log2_rows, (lookups,), generator=gen) + tables * 2**log2_rows


def check_loops(loops: ModuleType) -> None:
    """Fail loudly if the C++ loops disagree with torch on small random cases."""
    gen = torch.Generator().manual_seed(1)
    for n_tables in (1, N_LEVELS):
        table, src, idx = torch.randn(n_tables * 64, 2), torch.randn(5000, 2), table_rows(6, n_tables, 5000, gen)
        out = torch.empty(5000, 2)
        loops.gather(table, idx, out)
        torch.testing.assert_close(out, table[idx], rtol=0, atol=0)
        expected = table.index_add(0, idx, src)
        loops.scatter_add_rows(table, idx, src)
        torch.testing.assert_close(table, expected)
        expected = table.index_add(0, idx, src)
        loops.scatter_add_tables(table, idx, src, n_tables)
        torch.testing.assert_close(table, expected)


def steps_for(table: torch.Tensor, n_tables: int, idx: torch.Tensor, src: torch.Tensor, out: torch.Tensor,
              loops: ModuleType | None, threads: int) -> list[tuple[str, str, int, Callable[[], object]]]:
    """(operation, method, threads, step) for every way of gathering ``table[idx]`` into ``out`` and scatter-adding
    ``src`` at ``idx`` into ``table`` (``n_tables`` stacked tables indexed by ``table_rows``); the C++ loops at 1
    and at ``threads`` threads."""
    flat, flat_src, flat_out = (torch.view_as_complex(t) for t in (table, src, out))
    steps = [("gather", "torch index_select [rows,2]", threads, lambda: torch.index_select(table, 0, idx, out=out)),
             ("gather", "torch index_select complex64", threads,
              lambda: torch.index_select(flat, 0, idx, out=flat_out)),
             ("scatter-add", "torch index_add_ [rows,2]", threads, lambda: table.index_add_(0, idx, src)),
             ("scatter-add", "torch scatter_add_ complex64", threads, lambda: flat.scatter_add_(0, idx, flat_src))]
    if loops is not None:
        owners = "rows" if n_tables == 1 else "tables"
        for n_threads in sorted({1, threads}):
            method = f"C++ loop, {n_threads} thread" + "s" * (n_threads > 1)
            scatter = (lambda: loops.scatter_add_rows(table, idx, src)) if n_tables == 1 else (
                lambda: loops.scatter_add_tables(table, idx, src, n_tables))
            steps += [("gather", method, n_threads, lambda: loops.gather(table, idx, out)),
                      ("scatter-add", f"{method}, threads own {owners}", n_threads, scatter)]
    return steps


def ceilings(lookups: int = 2**22, repeats: int = 5, verbose: bool = False) -> dict[str, Any]:
    """Measure gather and scatter-add rates and the grid ceilings they imply, at ``torch.get_num_threads()`` threads.

    Returns ``{"threads", "cpp_chunks", "rates", "ceiling", "samples_per_s"}``: ``cpp_chunks``, how many threads
    the C++ loops' ``at::parallel_for`` really splits into (None without the loops); ``rates[(op, log2_rows,
    n_tables)][method]`` = (rows/s, CPU/wall) for op "gather" / "scatter-add"; ``ceiling[(op, log2_rows)]``, the
    best rows/s over methods and layouts; ``samples_per_s[grid]`` = {"forward", "forward+backward"} for GRIDS.
    """
    threads, loops = torch.get_num_threads(), compile_loops()
    if loops is not None:
        check_loops(loops)
    gen = torch.Generator().manual_seed(0)
    src, out = torch.randn(lookups, 2, generator=gen), torch.empty(lookups, 2)
    rates: dict[tuple[str, int, int], dict[str, tuple[float, float]]] = {}
    for log2_rows in TABLE_LOG2_ROWS:
        for n_tables in (1, N_LEVELS):
            table = torch.randn(n_tables * 2**log2_rows, 2, generator=gen)  # written pages: no shared zero page
            idx = table_rows(log2_rows, n_tables, lookups, gen)
            for op, method, n_threads, step in steps_for(table, n_tables, idx, src, out, loops, threads):
                torch.set_num_threads(n_threads)
                try:
                    rate = rates.setdefault((op, log2_rows, n_tables), {})[method] = time_rate(step, lookups, repeats)
                finally:
                    torch.set_num_threads(threads)
                if verbose:
                    print(f"{op:11s} T=2^{log2_rows} x{n_tables:<2d} {method:42s} {rate[0] / 1e6:7.1f} M rows/s "
                          f"({rate[1]:.2f} CPU/wall)", flush=True)
    ceiling: dict[tuple[str, int], float] = {}
    for (op, log2_rows, _), by_method in rates.items():
        ceiling[op, log2_rows] = max(ceiling.get((op, log2_rows), 0.0), *(rate for rate, _ in by_method.values()))
    samples_per_s = {name: {"forward": ceiling["gather", k] / n,
                            "forward+backward": 1 / (n / ceiling["gather", k] + n / ceiling["scatter-add", k])}
                     for name, k, n in GRIDS}
    return {"threads": threads, "cpp_chunks": None if loops is None else loops.team_size(), "rates": rates,
            "ceiling": ceiling, "samples_per_s": samples_per_s}


def markdown(result: dict[str, Any], lookups: int, repeats: int) -> str:
    """The report: machine line, rows/s per method, C++ scaling, and the grid ceilings in samples/s."""
    threads = result["threads"]
    lines = [f"Command: `python scripts/bench_limits.py --lookups {lookups} --repeats {repeats}`  ",
             machine_line(threads), "",
             "M rows/s of F=2 float32 rows (in brackets: process CPU seconds per wall second); bold: the ceiling.", "",
             "| operation | rows per table | tables | method | M rows/s |", "|---|---|---|---|---|"]
    speedups = []
    for (op, log2_rows, n_tables), by_method in result["rates"].items():
        for method, (rate, cpu) in by_method.items():
            best = "**" if rate == result["ceiling"][op, log2_rows] else ""
            lines.append(f"| {op} | 2^{log2_rows} | {n_tables} | {method} | {best}{rate / 1e6:.1f}{best} ({cpu:.2f}) |")
        cpp = [rate for method, (rate, _) in by_method.items() if method.startswith("C++")]
        if threads > 1 and len(cpp) == 2:
            speedups.append(f"{op} 2^{log2_rows} x{n_tables} {cpp[1] / cpp[0]:.2f}x")
    if result["cpp_chunks"] is not None:
        lines += ["", (f"C++ loops: at::parallel_for runs {result['cpp_chunks']} chunk(s) at {threads} threads; "
                       f"speedup of {threads} threads over 1: {', '.join(speedups) or 'n/a'}.")]
    lines += ["", "Ceiling in M samples/s = 1 / (gathers / gather rate + scatter-adds / scatter-add rate).", "",
              "| grid | rows per table | forward (gathers) | forward+backward (gathers + scatter-adds) |",
              "|---|---|---|---|"]
    for name, log2_rows, n in GRIDS:
        sps = result["samples_per_s"][name]
        lines.append(f"| {name} | 2^{log2_rows} | {sps['forward'] / 1e6:.2f} ({n}) "
                     f"| {sps['forward+backward'] / 1e6:.2f} ({n} + {n}) |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lookups", type=int, default=2**22)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, help="write the markdown report here")
    args = parser.parse_args()

    start = time.perf_counter()
    report = markdown(ceilings(args.lookups, args.repeats, verbose=True), args.lookups, args.repeats)
    print("\n" + report + f"\n({time.perf_counter() - start:.0f} s)", flush=True)
    if args.out:
        write_text_atomically(args.out, report)


if __name__ == "__main__":
    main()
