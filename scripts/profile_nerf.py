"""Where a training step and a rendered image of our ns-train methods spend their time (docs/nerf.md).

Builds the method's pipeline as ns-train does (Blender data parser, or nerfstudio-data with every 8th view held out
for a folder with a transforms.json; CPU), trains ``--steps`` steps with the
method's optimizers and callbacks, then profiles ``--profile-steps`` more: callbacks (occupancy-grid update), the
forward split into its stages (sampling: marching with the density-only pass; field; compositing; labelled with
torch.profiler.record_function in the model), backward and optimizer step. Then renders the first test view and
splits that the same way.

    .venv-bench/bin/python scripts/profile_nerf.py inr-hashgrid --data data/scenes/primitives --steps 300
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

STAGES = ("inr_nerf.sample", "inr_nerf.field", "inr_nerf.composite")


def stage_seconds(prof: profile) -> dict[str, float]:
    totals = {e.key: e.cpu_time_total / 1e6 for e in prof.key_averages() if e.key in STAGES}
    return {stage: totals.get(stage, 0.0) for stage in STAGES}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("method", help="inr-hashgrid | hyb-nerf | inr-fourier")
    parser.add_argument("--data", type=Path, default=Path("data/scenes/primitives"))
    parser.add_argument("--steps", type=int, default=300, help="training steps before profiling")
    parser.add_argument("--profile-steps", type=int, default=20)
    parser.add_argument("--downscale-factor", type=int, default=2, help="nerfstudio-data folders: image downscale")
    parser.add_argument("--ops", type=int, default=0, help="also list the N costliest torch ops of the render")
    args = parser.parse_args()

    from nerfstudio.engine.callbacks import TrainingCallbackAttributes, TrainingCallbackLocation
    from nerfstudio.engine.optimizers import Optimizers
    from nerfstudio.plugins.registry import discover_methods

    methods, _ = discover_methods()
    if args.method not in methods:
        print(f"profile_nerf: unknown method {args.method!r}", file=sys.stderr)
        sys.exit(2)
    config = methods[args.method]
    if (args.data / "transforms.json").exists():  # a real capture (ns-process-data's layout): unbounded
        from nerfstudio.data.dataparsers.nerfstudio_dataparser import NerfstudioDataParserConfig
        config.pipeline.datamanager.dataparser = NerfstudioDataParserConfig(
            downscale_factor=args.downscale_factor, eval_mode="interval", eval_interval=8)
    config.pipeline.datamanager.data = args.data
    config.machine.device_type = "cpu"
    pipeline = config.pipeline.setup(device="cpu", test_mode="test")
    optimizers = Optimizers(config.optimizers, pipeline.get_param_groups())
    callbacks = pipeline.get_training_callbacks(TrainingCallbackAttributes(optimizers, None, pipeline, None))
    timings: dict[str, float] = defaultdict(float)
    samples = rays = 0

    def step(i: int, timed: bool) -> None:
        nonlocal samples, rays
        batch_rays = pipeline.datamanager.train_pixel_sampler.num_rays_per_batch  # this step's (dynamic batches)
        marks = [time.perf_counter()]
        for callback in callbacks:
            callback.run_callback_at_location(i, TrainingCallbackLocation.BEFORE_TRAIN_ITERATION)
        marks.append(time.perf_counter())
        optimizers.zero_grad_all()
        _, losses, metrics = pipeline.get_train_loss_dict(i)
        marks.append(time.perf_counter())
        sum(losses.values()).backward()
        marks.append(time.perf_counter())
        optimizers.optimizer_step_all()
        optimizers.scheduler_step_all(i)
        marks.append(time.perf_counter())
        if timed:
            for name, t0, t1 in zip(("callbacks", "forward", "backward", "optimizer"), marks, marks[1:]):
                timings[name] += t1 - t0
            samples += int(metrics["num_samples_per_batch"])
            rays += batch_rays

    start = time.perf_counter()
    for i in range(args.steps):
        step(i, False)
    trained = time.perf_counter() - start
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(args.steps, args.steps + args.profile_steps):
            step(i, True)
    print(f"{args.method}: {args.steps} steps in {trained:.1f} s; then per step ({rays / args.profile_steps:.0f} rays, "
          f"{samples / args.profile_steps:.0f} field samples):")
    for name, seconds in {**timings, **stage_seconds(prof)}.items():
        print(f"  {name:22s} {1000 * seconds / args.profile_steps:8.1f} ms")

    model = pipeline.model
    model.eval()
    camera, batch = next(iter(pipeline.datamanager.fixed_indices_eval_dataloader))
    density_points = 0
    density_fn = model.field.density_fn

    def counted_density(points: torch.Tensor) -> torch.Tensor:
        nonlocal density_points
        density_points += len(points)
        return density_fn(points)

    model.field.density_fn = counted_density
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        outputs = model.get_outputs_for_camera(camera)
        seconds = time.perf_counter() - start
    grid = model.occupancy
    metrics, _ = pipeline.model.get_image_metrics_and_images(outputs, batch)
    n = int(camera.height * camera.width)
    print(f"render one test view: {n} rays in {seconds:.3f} s = {n / seconds:,.0f} rays/s, psnr {metrics['psnr']:.2f}, "
          f"{float(outputs['num_samples_per_ray'].mean()):.1f} field samples and {density_points / n:.1f} density-only "
          f"points per ray; occupancy grid {float(grid.occupied.float().mean()):.1%} occupied, bounds "
          f"{grid.bounds.tolist()}")
    for name, stage in stage_seconds(prof).items():
        print(f"  {name:22s} {1000 * stage:8.1f} ms")
    if args.ops:
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.ops))


if __name__ == "__main__":
    main()
