"""inr-snapshot: Instant-NGP snapshots to and from ns-train runs (snapshot.py, snapshot_import.py).

    inr-snapshot export --load-config RUN/config.yml --output scene.ingp
    inr-snapshot import scene.ingp --data SCENE [--dataparser blender-data] [--output-dir outputs]

``export`` writes the run's model (the Instant-NGP layout: ``--pipeline.model.instant-ngp-config``, a bounded
scene) as Instant-NGP's testbed saves one. ``import`` writes a run folder as ns-train would
(OUTPUT_DIR/EXPERIMENT/inr-hashgrid/snapshot/: config.yml and nerfstudio_models/) for ``ns-render`` and
``ns-eval`` on CPU, the scene's cameras from ``--data``. Each prints the path it wrote (and nothing else) on
stdout. Bad input: one line on stderr, exit code 2, nothing written.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from dataclasses import replace
from pathlib import Path
from typing import NoReturn

import torch
import yaml
from nerfstudio.configs.dataparser_configs import all_dataparsers
from nerfstudio.utils.eval_utils import eval_setup

from ..io import atomic_path, write_text_atomically
from .methods import inr_hashgrid
from .model import InrNerfModelConfig
from .settings import AutoCameraOptimizerConfig
from .snapshot import export_snapshot, read_snapshot, write_snapshot
from .snapshot_import import load_snapshot, snapshot_settings


def fail(message: str) -> NoReturn:
    print(f"inr-snapshot: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        fail(message)


def export_run(config_path: Path, output: Path) -> None:
    if not config_path.is_file():
        raise ValueError(f"--load-config: no such file {config_path}")
    _, pipeline, _, step = eval_setup(config_path, test_mode="inference")
    write_snapshot(export_snapshot(pipeline.model, step), output)


def import_snapshot(path: Path, data: Path, dataparser: str, output_dir: Path, experiment: str | None) -> Path:
    if not path.is_file() or not data.exists():
        raise ValueError(f"no such {'snapshot' if not path.is_file() else '--data'} {path if not path.is_file() else data}")
    snapshot = read_snapshot(path)
    base = inr_hashgrid.config  # blender-data as our methods read it (RGBA kept)
    ours = base.pipeline.datamanager.dataparser
    parser_config = replace(ours if dataparser == "blender-data" else all_dataparsers[dataparser], data=data)
    outputs = parser_config.setup().get_dataparser_outputs("train")  # its transform: nerfstudio's world
    settings = snapshot_settings(snapshot, outputs.dataparser_transform, float(outputs.dataparser_scale))
    model = InrNerfModelConfig(**settings, camera_optimizer=AutoCameraOptimizerConfig(mode="off"))
    config = replace(base, output_dir=output_dir, experiment_name=experiment or data.name, timestamp="snapshot",
                     pipeline=replace(base.pipeline, model=model,
                                      datamanager=replace(base.pipeline.datamanager, data=data, dataparser=parser_config)))
    pipeline = config.pipeline.setup(device="cpu", test_mode="test")
    load_snapshot(pipeline.model, snapshot)
    step = int(snapshot["snapshot"].get("training_step", 0))
    checkpoints = config.get_checkpoint_dir()
    checkpoints.mkdir(parents=True, exist_ok=True)
    with atomic_path(checkpoints / f"step-{step:09d}.ckpt") as tmp:
        torch.save({"step": step, "pipeline": pipeline.state_dict(), "optimizers": {}, "schedulers": {}, "scalers": {}},
                   tmp)
    for earlier in checkpoints.glob("step-*.ckpt"):  # an earlier import's: ns-render would load the latest step
        if earlier.name != f"step-{step:09d}.ckpt":
            earlier.unlink()
    config_path = config.get_base_dir() / "config.yml"
    write_text_atomically(config_path, yaml.dump(config))
    return config_path


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="inr-snapshot", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    export = commands.add_parser("export", help="an ns-train run -> an Instant-NGP snapshot (.ingp or .msgpack)")
    export.add_argument("--load-config", type=Path, required=True, help="the run's config.yml")
    export.add_argument("--output", type=Path, required=True, help="snapshot file: .ingp (compressed) or .msgpack")
    imported = commands.add_parser("import", help="an Instant-NGP snapshot -> a run folder for ns-render/ns-eval")
    imported.add_argument("snapshot", type=Path)
    imported.add_argument("--data", type=Path, required=True, help="the scene (its cameras)")
    imported.add_argument("--dataparser", default="blender-data", choices=sorted(all_dataparsers))
    imported.add_argument("--output-dir", type=Path, default=Path("outputs"))
    imported.add_argument("--experiment-name", help="default: the --data folder's name")
    args = parser.parse_args(argv)
    try:
        with contextlib.redirect_stdout(sys.stderr):  # nerfstudio's log: stdout holds only the path written
            if args.command == "export":
                export_run(args.load_config, args.output)
                written = args.output
            else:
                written = import_snapshot(args.snapshot, args.data, args.dataparser, args.output_dir,
                                          args.experiment_name)
    except ValueError as error:
        fail(str(error))
    print(written)
    return 0
