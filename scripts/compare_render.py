"""Render speed of today's code against another checkout's (a `git worktree` of an older commit), side by side.

Each measurement is a fresh process that loads a run's config.yml and checkpoint (nerfstudio's eval_setup) with
one checkout's inr_enc first on the path and renders the first test views (scripts/render_cost.py: render rays/s,
field share, density and kept points per ray); the two checkouts alternate, --repeats times per run, so a change
of the machine's speed shows in both. The checkpoints are today's runs (e.g. bench_nerf_set.py's under out/).

    git worktree add /tmp/base COMMIT
    .venv-test/bin/python scripts/compare_render.py --baseline /tmp/base --repeats 3 \\
        out/nerf-set/inr-hashgrid/*/inr-hashgrid/*/*/config.yml
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(config: Path, views: int) -> dict:
    """In this process: render the first ``views`` test views of the run (see render_cost)."""
    import torch
    from nerfstudio.utils.eval_utils import eval_setup
    from render_cost import render_cost  # scripts/, this script's folder

    _, pipeline, _, _ = eval_setup(config, test_mode="test")
    result = render_cost(pipeline, views)
    import inr_enc

    return {**(result or {}), "inr_enc": str(Path(inr_enc.__file__).parents[1]), "threads": torch.get_num_threads()}


def run_one(tree: Path, config: Path, views: int) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(ROOT / "scripts")])}
    done = subprocess.run([sys.executable, __file__, "measure", str(config), "--views", str(views)], cwd=ROOT,
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"compare_render.py: {config} with {tree} failed:\n{done.stderr[-2000:]}")
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    if Path(measured["inr_enc"]).resolve() != tree.resolve():
        sys.exit(f"compare_render.py: imported inr_enc from {measured['inr_enc']}, not {tree}")
    return measured


def compare(baseline: Path, configs: list[Path], repeats: int, views: int) -> str:
    lines = ["| run | render rays/s, baseline | today | ratio (medians) | field share, baseline / today | "
             "density points per ray, baseline / today | kept per ray |", "|---|---|---|---|---|---|---|"]
    for config in configs:
        found: dict[str, list[dict]] = {"baseline": [], "today": []}
        for _ in range(repeats):
            for label, tree in (("baseline", baseline), ("today", ROOT)):
                found[label].append(run_one(tree, config, views))
        speed = {label: statistics.median(r["render_rays_per_s"] for r in runs) for label, runs in found.items()}
        rates = {label: ", ".join(f"{r['render_rays_per_s']:,.0f}" for r in runs) for label, runs in found.items()}
        base, today = found["baseline"][-1], found["today"][-1]
        lines.append(f"| {config.parents[2].name} | {rates['baseline']} | {rates['today']} "
                     f"| {speed['today'] / speed['baseline']:.2f}x | {base['field_share']:.2f} / "
                     f"{today['field_share']:.2f} | {base['density_points_per_ray']:.1f} / "
                     f"{today['density_points_per_ray']:.1f} | {today['kept_samples_per_ray']:.1f} |")
        print(lines[-1], flush=True)
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    if argv[:1] == ["measure"]:
        parser = argparse.ArgumentParser()
        parser.add_argument("config", type=Path)
        parser.add_argument("--views", type=int, default=4)
        args = parser.parse_args(argv[1:])
        print(json.dumps(measure(args.config, args.views)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", type=Path, nargs="+", help="runs' config.yml")
    parser.add_argument("--baseline", type=Path, required=True, help="the other checkout (its repository root)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--views", type=int, default=4, help="test views rendered per measurement")
    args = parser.parse_args(argv)
    print(compare(args.baseline, args.configs, args.repeats, args.views))


if __name__ == "__main__":
    main(sys.argv[1:])
