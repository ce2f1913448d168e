"""Training of two checkouts side by side: each RUN (a name, a checkout of inr_enc, then any ns-train options)
trains METHOD on a scene for ``--budget`` seconds with scripts/bench_nerf.py in a fresh process (``PYTHONPATH``
choosing the checkout), the runs taking turns for ``--rounds`` rounds, so that two commits meet the same machine
state. Prints each run's iterations, training rays/s, test PSNR and render rays/s per round, and the ratio of each
run's median iterations to the first run's. Each round's results.json stays in OUT/NAME/round-K.

    git worktree add /tmp/old 0808601
    .venv-test/bin/python scripts/train_ab.py inr-hashgrid --data data/scenes/forward --budget 300 --rounds 2 \\
        --run before /tmp/old --run after .
"""

from __future__ import annotations

import argparse
import functools
import json
import shlex
import sys
from pathlib import Path

from render_ab import alternate, run_with_checkout  # scripts/, this script's folder

SCRIPT = Path(__file__).resolve().parent / "bench_nerf.py"


def train(method: str, data: Path, budget: float, checkout: Path, options: list[str], out: Path) -> dict:
    """One fresh process: bench_nerf.py's results for ``method`` on ``data`` with ``checkout``'s inr_enc."""
    command = [sys.executable, str(SCRIPT), method, "--data", str(data), "--budget", str(budget), "--out", str(out),
               *(["--", *options] if options else [])]
    run_with_checkout(command, checkout, "train_ab.py")
    return json.loads((out / method / "results.json").read_text())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("method", help="registered ns-train method, e.g. inr-hashgrid")
    parser.add_argument("--data", type=Path, required=True, help="scene folder")
    parser.add_argument("--budget", type=float, default=300.0, help="training-loop seconds per run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("out/train-ab"), help="each round's results go here")
    parser.add_argument("--run", nargs="+", action="append", required=True, metavar="NAME CHECKOUT [OPTIONS]",
                        help="OPTIONS: one quoted string of ns-train options, split as a shell would")
    args = parser.parse_args(argv)
    if any(len(run) not in (2, 3) for run in args.run):
        parser.error("--run takes NAME CHECKOUT [OPTIONS]")
    if args.rounds < 1 or args.budget <= 0:
        parser.error("--rounds must be at least 1 and --budget positive")
    rounds = {name: 0 for name, *_ in args.run}

    def measure(name: str, checkout: str, options: list[str]) -> dict:
        rounds[name] += 1
        return train(args.method, args.data, args.budget, Path(checkout), options,
                     args.out / name / f"round-{rounds[name]}")

    runs = [(name, functools.partial(measure, name, checkout, shlex.split(options[0]) if options else []))
            for name, checkout, *options in args.run]
    alternate(args.rounds, runs, "iterations", lambda result: (
        f"{result['iterations']} iterations, {result['train_rays_per_s']:,.0f} train rays/s, PSNR "
        f"{result['psnr']:.2f}, {result['render_rays_per_s']:,.0f} render rays/s"))


if __name__ == "__main__":
    main()
