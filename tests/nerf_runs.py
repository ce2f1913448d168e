"""Shared by the NeRF tests: Instant-NGP's configs/nerf/base.json retyped as data, and the bundled scene with
fewer test views (ns-eval and ns-render go through every one)."""

from __future__ import annotations

import json
from pathlib import Path

SCENE = Path(__file__).resolve().parent.parent / "data" / "scenes" / "primitives"

# instant-ngp configs/nerf/base.json, retyped as data (keys and values)
ADAM_NESTED = {"otype": "Adam", "learning_rate": 1e-2, "beta1": 0.9, "beta2": 0.99, "epsilon": 1e-15, "l2_reg": 1e-6}
NGP_NERF_BASE = {
    "loss": {"otype": "Huber"},
    "optimizer": {"otype": "Ema", "decay": 0.95, "nested": {
        "otype": "ExponentialDecay", "decay_start": 20000, "decay_interval": 10000, "decay_base": 0.33,
        "nested": ADAM_NESTED}},
    "encoding": {"otype": "HashGrid", "n_levels": 8, "n_features_per_level": 4, "log2_hashmap_size": 19,
                 "base_resolution": 16},
    "network": {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 64,
                "n_hidden_layers": 1},
    "dir_encoding": {"otype": "Composite", "nested": [
        {"n_dims_to_encode": 3, "otype": "SphericalHarmonics", "degree": 4}, {"otype": "Identity"}]},
    "rgb_network": {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 64,
                    "n_hidden_layers": 2},
    "distortion_map": {"resolution": [32, 32], "optimizer": {
        "otype": "ExponentialDecay", "decay_start": 10000, "decay_interval": 5000, "decay_end": 25000,
        "decay_base": 0.33, "nested": {"otype": "Adam", "learning_rate": 1e-4, "beta1": 0.9, "beta2": 0.99,
                                       "epsilon": 1e-8}}},
    "envmap": {"loss": {"otype": "RelativeL2"}, "optimizer": {"otype": "Ema", "decay": 0.99, "nested": {
        "otype": "ExponentialDecay", "decay_start": 10000, "decay_interval": 5000, "decay_base": 0.33,
        "nested": {"otype": "Adam", "learning_rate": 1e-2, "beta1": 0.9, "beta2": 0.99, "beta3": 0.9,
                   "beta_shampoo": 0.0, "epsilon": 1e-10, "identity": 0.0001, "cg_on_momentum": False,
                   "frobenius_normalization": True, "l2_reg": 1e-10}}}},
}


def scene_with_test_views(folder: Path, n: int) -> Path:
    """folder/primitives: the bundled scene (linked) with its first ``n`` test views -> its path."""
    scene = folder / "primitives"
    scene.mkdir()
    for name in ("train", "val", "test", "transforms_train.json", "transforms_val.json"):
        (scene / name).symlink_to(SCENE / name)
    test = json.loads((SCENE / "transforms_test.json").read_text())
    (scene / "transforms_test.json").write_text(json.dumps({**test, "frames": test["frames"][:n]}))
    return scene
