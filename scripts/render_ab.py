"""Render speed of trained runs side by side: each RUN (a name, a checkout of inr_enc, a run's config.yml, then
any render_cost.py options) renders every test view in a fresh process (scripts/render_cost.py, ``PYTHONPATH``
choosing the checkout), the runs taking turns for ``--rounds`` rounds, so two commits meet the same machine state.
Prints each run's render rays/s per round, the field shares, and the ratio of each run's median to the first run's.

    git worktree add /tmp/old 0808601
    .venv-test/bin/python scripts/render_ab.py --rounds 3 --run before /tmp/old out/run/config.yml \\
        --run after . out/run/config.yml "--proposal-counts 64 32 48"
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shlex
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "render_cost.py"


def run_with_checkout(command: list[str], checkout: Path, script: str) -> str:
    """``command`` in a fresh process importing ``checkout``'s inr_enc (``PYTHONPATH``); its stdout. A failure
    ends this script (``script`` names it) with the command's last lines of stderr."""
    env = {**os.environ, "PYTHONPATH": str(checkout.resolve())}
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{script}: {shlex.join(command)} with {checkout} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def measure(checkout: Path, config: Path, options: list[str]) -> dict:
    """One fresh process: render_cost.py's JSON for ``config`` (and ``options``) with ``checkout``'s inr_enc."""
    out = run_with_checkout([sys.executable, str(SCRIPT), str(config), *options], checkout, "render_ab.py")
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", nargs="+", action="append", required=True,
                        metavar="NAME CHECKOUT CONFIG [OPTIONS]", help="OPTIONS: one quoted string, split on spaces")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if any(len(run) not in (3, 4) for run in args.run):
        parser.error("--run takes NAME CHECKOUT CONFIG [OPTIONS]")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    runs = [(name, functools.partial(measure, Path(checkout), Path(config), options[0].split() if options else []))
            for name, checkout, config, *options in args.run]
    alternate(args.rounds, runs, "render_rays_per_s", lambda cost: f"{cost['render_rays_per_s']:,.0f} rays/s, "
              f"field share {cost['field_share']:.2f}, with proposal fields {cost['fields_share']:.2f}")


def alternate(rounds: int, runs: list[tuple[str, Callable[[], dict]]], key: str, describe: Callable[[dict], str]
              ) -> dict[str, list[dict]]:
    """Each run's measure() in turn, ``rounds`` times (so all runs meet the same machine state); prints each
    result (``describe``) and each run's median ``key`` with its ratio to the first run's; returns the results."""
    results: dict[str, list[dict]] = {name: [] for name, _ in runs}
    for round_ in range(rounds):
        for name, measure_run in runs:
            results[name].append(measure_run())
            print(f"round {round_ + 1} {name}: {describe(results[name][-1])}", flush=True)
    first = statistics.median(result[key] for result in results[runs[0][0]])
    for name, values in results.items():
        median = statistics.median(result[key] for result in values)
        print(f"{name}: median {key} {median:,.1f}, {median / first:.2f}x")
    return results


if __name__ == "__main__":
    main()
