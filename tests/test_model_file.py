"""model.safetensors: float16 weights that load back, without the buffers a config rebuilds."""

import pytest
import torch
from safetensors.torch import load_file

from inr_enc.field import Field
from inr_enc.fitting.outputs import MODEL_FILE, read_model_file, rebuilt_buffers, write_model_file

GRID = {"encoding": {"otype": "HashGrid", "n_levels": 4, "log2_hashmap_size": 10, "base_resolution": 4,
                     "per_level_scale": 1.5},
        "network": {"otype": "MLP", "n_neurons": 16, "n_hidden_layers": 1, "seed": 1}}
FOURIER = {"encoding": {"otype": "RandomFourier", "n_features": 16, "sigma": 3.0, "seed": 2},
           "network": {"otype": "MLP", "n_neurons": 16, "n_hidden_layers": 1, "seed": 1}}


@pytest.mark.parametrize("config", [GRID, FOURIER], ids=["hashgrid", "random-fourier"])
def test_weights_round_trip_at_half_precision(tmp_path, config):
    model = Field(2, 3, config)
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(-1, 1)
    size = write_model_file(tmp_path, model)
    assert size == (tmp_path / MODEL_FILE).stat().st_size
    saved = load_file(str(tmp_path / MODEL_FILE))
    assert all(t.dtype == torch.float16 for t in saved.values() if t.is_floating_point())
    assert not set(saved) & rebuilt_buffers(model)
    n_params = sum(p.numel() for p in model.parameters())
    assert 2 * n_params <= size <= 2 * n_params + 4096  # the weights at 2 bytes each, and a header
    other = Field(2, 3, config)  # the same config: rebuilt buffers equal, weights replaced by the file's
    read_model_file(tmp_path / MODEL_FILE, other)
    for (name, mine), theirs in zip(model.state_dict().items(), other.state_dict().values()):
        expected = mine.half().float() if mine.is_floating_point() and name not in rebuilt_buffers(model) else mine
        assert torch.equal(theirs, expected), name
    x = torch.rand(64, 2)
    assert torch.allclose(other(x), model(x), atol=0.05)


def test_a_file_of_another_model_or_a_damaged_one_is_refused(tmp_path):
    write_model_file(tmp_path, Field(2, 3, GRID))
    wider = Field(2, 3, {**GRID, "network": {**GRID["network"], "n_neurons": 32}})
    with pytest.raises(ValueError, match="do not match this model"):
        read_model_file(tmp_path / MODEL_FILE, wider)
    (tmp_path / MODEL_FILE).write_bytes(b"garbage")
    with pytest.raises(ValueError, match="not a readable model file"):
        read_model_file(tmp_path / MODEL_FILE, Field(2, 3, GRID))
