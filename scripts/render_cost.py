"""How much of a render is the field's own work (scripts/bench_nerf.py's "field share").

Renders test views of an evaluated pipeline while timing, on the model's field instance, every call of
``_density`` (position encoder + density network, whether the sampler's marching or the model calls it) and of
``get_outputs`` (direction encoding + colour network), and, with proposal sampling, every call of each proposal
field's ``density_fn`` (its grid + network). The rest of a render (ray generation, marching, occupancy lookups,
resampling, contraction, compositing, nerfstudio's camera loop) is overhead. CPU only: the timers read the wall
clock around synchronous calls.

Reported: ``field_share`` (radiance-field seconds / render seconds), ``fields_share`` (radiance and proposal
fields together), ``field_points_per_ray`` (points the field evaluated per ray: every density evaluation plus
every colour evaluation), ``proposal_points_per_ray``, ``kept_samples_per_ray`` (samples composited), and the
seconds of each part. ``None`` for a model without such a field (nerfacto).

Run alone, it renders every test view of a trained run (a fresh process per call, for side-by-side timings of
two checkouts: scripts/render_ab.py):

    .venv-test/bin/python scripts/render_cost.py outputs/.../config.yml [--proposal-counts 64 32 48]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch


class CallTimer:
    """Wraps a bound method on one instance: total seconds over all calls, and ``count_rows(first argument)``
    summed over them."""

    def __init__(self, owner: Any, name: str, count_rows: Callable[[Any], int]) -> None:
        self.owner, self.name, self.method, self.count_rows = owner, name, getattr(owner, name), count_rows
        self.seconds, self.rows = 0.0, 0

    def __enter__(self) -> CallTimer:
        def timed(x: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            out = self.method(x, *args, **kwargs)
            self.seconds += time.perf_counter() - start
            self.rows += self.count_rows(x)
            return out

        setattr(self.owner, self.name, timed)  # an instance attribute: self._density(...) inside the field finds it
        return self

    def __exit__(self, *exc: object) -> None:
        delattr(self.owner, self.name)


def points(x: torch.Tensor) -> int:  # _density's positions [..., 3]
    return int(x.shape[:-1].numel())


def samples(ray_samples: Any) -> int:  # get_outputs' RaySamples [...]
    return int(ray_samples.frustums.starts.shape[:-1].numel())


def render_cost(pipeline: Any, n_views: int = 4) -> dict[str, float] | None:
    """Render the first ``n_views`` test views of ``pipeline`` (eval mode) and split the time (see the module)."""
    field = getattr(pipeline.model, "field", None)
    if field is None or not all(callable(getattr(field, n, None)) for n in ("_density", "get_outputs")):
        return None
    cameras = pipeline.datamanager.eval_dataset.cameras
    n_views = min(n_views, len(cameras))
    pipeline.eval()
    rays, total = 0, 0.0
    proposal = getattr(pipeline.model, "proposal", None)
    with CallTimer(field, "_density", points) as density, CallTimer(field, "get_outputs", samples) as colour, \
            contextlib.ExitStack() as stack, torch.no_grad():
        proposals = [stack.enter_context(CallTimer(f, "density_fn", points))
                     for f in ([] if proposal is None else proposal.fields)]
        for i in range(n_views):
            camera = cameras[i : i + 1]
            rays += int(camera.width.item() * camera.height.item())
            start = time.perf_counter()
            pipeline.model.get_outputs_for_camera(camera)
            total += time.perf_counter() - start
    field_s, proposal_s = density.seconds + colour.seconds, sum(p.seconds for p in proposals)
    return {"views": n_views, "render_s": round(total, 3), "field_density_s": round(density.seconds, 3),
            "field_colour_s": round(colour.seconds, 3), "proposal_s": round(proposal_s, 3),
            "field_share": round(field_s / total, 4), "fields_share": round((field_s + proposal_s) / total, 4),
            "render_rays_per_s": round(rays / total, 1),
            "proposal_points_per_ray": round(sum(p.rows for p in proposals) / rays, 2),
            "field_points_per_ray": round((density.rows + colour.rows) / rays, 2),
            "density_points_per_ray": round(density.rows / rays, 2),
            "kept_samples_per_ray": round(colour.rows / rays, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description="render a trained run's test views, timing the field's share")
    parser.add_argument("config", type=Path, help="the run's config.yml (ns-train's output folder)")
    parser.add_argument("--views", type=int, default=1000, help="the first N test views (default: all)")
    parser.add_argument("--proposal-counts", type=int, nargs="+", metavar="N",
                        help="render with these proposal counts instead of the run's: per level, then per ray")
    args = parser.parse_args()
    from nerfstudio.utils.eval_utils import eval_setup

    _, pipeline, _, _ = eval_setup(args.config, test_mode="test")
    if args.proposal_counts:  # the same checkpoint rendered with other counts (proposal.py ProposalSampling)
        levels = getattr(pipeline.model, "proposal", None)
        if levels is None or len(args.proposal_counts) != len(levels.train_counts[0]) + 1:
            parser.error("--proposal-counts: the run has no proposal sampling, or needs one count per proposal "
                         "level and one per ray")
        *per_level, per_ray = args.proposal_counts
        pipeline.model.proposal.render_counts = (tuple(per_level), per_ray)
    with torch.no_grad():  # one untimed render first: the timed ones find the kernels loaded and memory allocated
        pipeline.eval()
        pipeline.model.get_outputs_for_camera(pipeline.datamanager.eval_dataset.cameras[0:1])
    print(json.dumps(render_cost(pipeline, args.views)))


if __name__ == "__main__":
    main()
