"""FieldBatch (inr_enc/field/batch.py): M fields as one computation give each field's own outputs and gradients,
compared with the fields run one at a time."""

import pytest
import torch

from inr_enc import Field
from inr_enc.field.batch import FieldBatch

CONFIGS = {
    "siren": {"encoding": {"otype": "Identity"},
              "network": {"otype": "MLP", "n_neurons": 16, "n_hidden_layers": 2, "activation": "Sine"}},
    "hashgrid": {"encoding": {"otype": "HashGrid", "n_levels": 4, "log2_hashmap_size": 8, "base_resolution": 4},
                 "network": {"otype": "FullyFusedMLP", "n_neurons": 16, "n_hidden_layers": 1}},
    "fourier": {"encoding": {"otype": "RandomFourier", "n_features": 8, "sigma": 3.0},
                "network": {"otype": "MLP", "n_neurons": 16, "n_hidden_layers": 1, "output_activation": "Sigmoid"}},
}
M, N = 3, 50


def _fields(config):
    """M fields of one config whose weights then differ (as after training), so a mix-up shows."""
    fields = [Field(2, 3, config) for _ in range(M)]
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for field in fields:
            for p in field.parameters():
                p.add_(torch.randn(p.shape, generator=generator) * 0.1)
    return fields


@pytest.mark.parametrize("name", CONFIGS)
def test_outputs_and_gradients_match_each_field(name):
    fields = _fields(CONFIGS[name])
    batch = FieldBatch(fields)
    x = torch.rand(M, N, 2, generator=torch.Generator().manual_seed(1))
    target = torch.rand(M, N, 3, generator=torch.Generator().manual_seed(2))
    out = batch(x)
    ((out - target) ** 2).mean(dim=(1, 2)).sum().backward()
    for m, field in enumerate(fields):
        single = field(x[m])
        ((single - target[m]) ** 2).mean().backward()
        torch.testing.assert_close(out[m].detach(), single.detach(), rtol=1e-5, atol=1e-6)
        for pname, param in field.network.named_parameters():
            torch.testing.assert_close(batch.network_params[pname.replace(".", "__")].grad[m], param.grad,
                                       rtol=1e-4, atol=1e-6)
        if name == "hashgrid":
            torch.testing.assert_close(batch.encoder.params.grad.to_dense().view(M, -1)[m],
                                       field.encoder.params.grad.to_dense(), rtol=1e-4, atol=1e-7)
        # model m given back as a Field computes what the batch computes for it
        torch.testing.assert_close(batch.field(m)(x[m]), out[m].detach(), rtol=1e-5, atol=1e-6)


def test_refuses_what_it_cannot_batch():
    with pytest.raises(ValueError, match="same config"):
        FieldBatch([Field(2, 3, CONFIGS["siren"]), Field(2, 3, CONFIGS["fourier"])])
    learnable = {"encoding": {"otype": "LearnableFourier"}, "network": {"n_neurons": 8}}
    with pytest.raises(ValueError, match="LearnableFourier encoding has trained parameters"):
        FieldBatch([Field(2, 3, learnable)] * 2)
    different_seed = {**CONFIGS["fourier"], "encoding": {**CONFIGS["fourier"]["encoding"], "seed": 7}}
    with pytest.raises(ValueError, match="same config"):
        FieldBatch([Field(2, 3, CONFIGS["fourier"]), Field(2, 3, different_seed)])
    with pytest.raises(ValueError, match=r"x must have shape \[2, n, 2\]"):
        FieldBatch(_fields(CONFIGS["siren"])[:2])(torch.rand(3, 4, 2))
