"""inr-snapshot: Instant-NGP snapshots to and from ns-train runs (snapshot.py, snapshot_import.py).

    inr-snapshot export --load-config RUN/config.yml --output scene.ingp
    inr-snapshot import scene.ingp --data SCENE [--dataparser blender-data] [--output-dir outputs]

``export`` writes the run's model (the Instant-NGP layout: ``--pipeline.model.instant-ngp-config``, a bounded
scene) as Instant-NGP's testbed saves one. ``import`` writes a run folder as ns-train would
(OUTPUT_DIR/EXPERIMENT/inr-hashgrid/snapshot/: config.yml and nerfstudio_models/) for ``ns-render`` and
``ns-eval`` on CPU, the scene's cameras from ``--data``. Each prints the path it wrote (and nothing else) on
stdout. Bad input: one line on stderr, exit code 2, nothing written. Arguments are read (and ``--help`` answered)
before nerfstudio and torch are imported: without the nerfstudio extra, the command says so in one line.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from ..fitting.run_folder import staged_folder

if TYPE_CHECKING:
    import torch

# what the commands need beyond the core install (the nerfstudio extra), checked once the arguments are read: the
# commands import it (and torch) themselves, so that --help and argument errors need neither
NEEDS = ("nerfstudio", "msgpack")
INSTALL = "pip install 'inr_enc[nerfstudio]', or pip install -e '.[nerfstudio]' in a checkout"


def fail(message: str) -> NoReturn:
    print(f"inr-snapshot: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        fail(message)


DATAPARSERS = ("blender-data", "instant-ngp-data", "nerfstudio-data")  # those that read a transforms.json
COLMAP_APPLIED_TRANSFORM = [[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, -1, 0]]  # nerfstudio_dataparser.py's fallback


def export_run(config_path: Path, output: Path) -> None:
    import yaml
    from nerfstudio.engine.trainer import TrainerConfig
    from nerfstudio.utils.eval_utils import eval_setup

    from .snapshot import export_snapshot, write_snapshot

    if not config_path.is_file():
        raise ValueError(f"--load-config: no such file {config_path}")
    config = yaml.load(config_path.read_text(), Loader=yaml.Loader)
    if not isinstance(config, TrainerConfig) or not any(config.get_checkpoint_dir().glob("step-*.ckpt")):
        raise ValueError(f"--load-config: {config_path} is not an ns-train run with a checkpoint in "
                         f"{getattr(config, 'get_checkpoint_dir', lambda: '?')()} "
                         f"(run from the folder ns-train ran in)")
    _, pipeline, _, step = eval_setup(config_path, test_mode="inference")
    write_snapshot(export_snapshot(pipeline.model, step), output)


def saved_to_world(dataparser: str, outputs: Any, data: Path) -> tuple[torch.Tensor, float]:
    """The dataparser's world from the coordinates its transforms.json holds (Instant-NGP's NeRF world): (transform
    [3, 4], scale). nerfstudio-data reports its transform and scale from the data's original coordinates (its
    applied_transform and applied_scale, nerfstudio_dataparser.py); they are undone here."""
    import torch

    transform, scale = outputs.dataparser_transform.double(), float(outputs.dataparser_scale)
    if dataparser != "nerfstudio-data":
        return transform, scale
    folder = data.parent if data.suffix == ".json" else data
    meta = json.loads((data if data.suffix == ".json" else data / "transforms.json").read_text())
    applied = meta.get("applied_transform")
    if applied is None and (folder / "colmap" / "sparse" / "0").exists():
        applied = COLMAP_APPLIED_TRANSFORM
    if applied is not None:
        row = torch.tensor([[0.0, 0.0, 0.0, 1.0]], dtype=torch.float64)
        full = torch.cat([torch.tensor(applied, dtype=torch.float64), row])
        transform = (torch.cat([transform, row]) @ torch.linalg.inv(full))[:3]
    return transform, scale / float(meta.get("applied_scale", 1.0))


def import_snapshot(path: Path, data: Path, dataparser: str, output_dir: Path, experiment: str | None) -> Path:
    import torch
    import yaml
    from nerfstudio.configs.dataparser_configs import all_dataparsers

    from .methods import inr_hashgrid
    from .model import InrNerfModelConfig
    from .scene_defaults import AutoCameraOptimizerConfig
    from .snapshot import read_snapshot
    from .snapshot_import import load_snapshot, snapshot_settings

    if not path.is_file() or not data.exists():
        raise ValueError(f"no such {'snapshot' if not path.is_file() else '--data'} "
                         f"{path if not path.is_file() else data}")
    snapshot = read_snapshot(path)
    base = inr_hashgrid.config  # blender-data as our methods read it (RGBA kept)
    ours = base.pipeline.datamanager.dataparser
    parser_config = replace(ours if dataparser == "blender-data" else all_dataparsers[dataparser], data=data)
    try:
        outputs = parser_config.setup().get_dataparser_outputs("train")
    except (AssertionError, KeyError, IndexError, json.JSONDecodeError) as error:
        raise ValueError(f"--data {data}: {dataparser} cannot read it ({type(error).__name__}: {error})") from None
    settings = snapshot_settings(snapshot, *saved_to_world(dataparser, outputs, data))
    try:
        model = InrNerfModelConfig(**settings, camera_optimizer=AutoCameraOptimizerConfig(mode="off"))
    except ValueError as error:  # its network config or render settings
        raise ValueError(f"{path}: {error}") from None
    config = replace(base, output_dir=output_dir, experiment_name=experiment or data.name, timestamp="snapshot",
                     pipeline=replace(base.pipeline, model=model,
                                      datamanager=replace(base.pipeline.datamanager, data=data,
                                                          dataparser=parser_config)))
    pipeline = config.pipeline.setup(device="cpu", test_mode="test")
    load_snapshot(pipeline.model, snapshot)
    step = snapshot["snapshot"]["training_step"]
    run = config.get_base_dir()
    with staged_folder(run) as staged:
        (staged / config.relative_model_dir).mkdir(parents=True)
        torch.save({"step": step, "pipeline": pipeline.state_dict(), "optimizers": {}, "schedulers": {}, "scalers": {}},
                   staged / config.relative_model_dir / f"step-{step:09d}.ckpt")
        (staged / "config.yml").write_text(yaml.dump(config))
    return run / "config.yml"


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="inr-snapshot", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    export = commands.add_parser("export", help="an ns-train run -> an Instant-NGP snapshot (.ingp or .msgpack)")
    export.add_argument("--load-config", type=Path, required=True, help="the run's config.yml")
    export.add_argument("--output", type=Path, required=True, help="snapshot file: .ingp (compressed) or .msgpack")
    imported = commands.add_parser("import", help="an Instant-NGP snapshot -> a run folder for ns-render/ns-eval")
    imported.add_argument("snapshot", type=Path)
    imported.add_argument("--data", type=Path, required=True, help="the scene (its cameras)")
    imported.add_argument("--dataparser", default="blender-data", choices=DATAPARSERS,
                          help="the scene's parser (default blender-data); the camera poses are its output")
    imported.add_argument("--output-dir", type=Path, default=Path("outputs"))
    imported.add_argument("--experiment-name", help="default: the --data folder's name")
    args = parser.parse_args(argv)
    for module in NEEDS:
        try:
            importlib.import_module(module)
        except ImportError:
            fail(f"needs {module} (the nerfstudio extra): {INSTALL}")
    try:
        with contextlib.redirect_stdout(sys.stderr):  # nerfstudio's log: stdout holds only the path written
            if args.command == "export":
                export_run(args.load_config, args.output)
                written = args.output
            else:
                written = import_snapshot(args.snapshot, args.data, args.dataparser, args.output_dir,
                                          args.experiment_name)
    except (ValueError, OSError) as error:
        fail(str(error))
    print(written)
    return 0
