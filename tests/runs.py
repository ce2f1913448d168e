"""The tiny inr-fit run the CLI tests share: a config that fits a small image or clip in milliseconds."""

import yaml

TINY = {
    "encoding": {"otype": "Frequency", "n_frequencies": 3},
    "network": {"otype": "FullyFusedMLP", "n_neurons": 16, "n_hidden_layers": 1, "output_activation": "Sigmoid"},
    "training": {"steps": 8, "lr": 1e-2, "eval_every": 2, "checkpoint_every": 2},
}


def write_tiny_config(folder, name="tiny", **training):
    """TINY with ``training`` keys replaced, written to folder/<name>.yaml -> its path."""
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({**TINY, "training": {**TINY["training"], **training}}))
    return path
