"""Several grid tables read as one computation (``grid_encoding(..., models=M)``, batched fitting): block m of the
samples reads table m. Each kernel (torch, the C++ kernel, Triton under its CPU interpreter) against the
one-table PyTorch path run per block on that block's table."""

import pytest
import torch

from inr_enc import build_encoder
from inr_enc.ops.grid import grid_encoding, kernel_unavailable_reason, torch_grid_encoding

CASES = [  # (config, d): hashed and row-major levels, F = 1, 2, 4
    ({"otype": "HashGrid", "n_levels": 4, "log2_hashmap_size": 5, "base_resolution": 3, "per_level_scale": 1.7}, 2),
    ({"otype": "HashGrid", "n_levels": 3, "log2_hashmap_size": 6, "base_resolution": 2, "n_features_per_level": 1}, 3),
    ({"otype": "DenseGrid", "n_levels": 2, "base_resolution": 3, "per_level_scale": 1.5, "n_features_per_level": 4}, 2),
]
MODELS, PER_MODEL = 3, 40


def _setup(config, d, seed=0):
    generator = torch.Generator().manual_seed(seed)
    enc = build_encoder(config, d)
    tables = torch.randn(MODELS, enc.params.numel(), generator=generator)  # each model its own table
    x = torch.rand(MODELS * PER_MODEL, d, generator=generator)
    grad = torch.randn(MODELS * PER_MODEL, enc.n_output_dims, generator=generator)
    return enc, tables, x, grad


def _per_block(enc, tables, x, grad):
    """Output, d/d tables [M, E*F] and d/d x of the one-table torch path, block by block."""
    outs, table_grads, x_grads = [], [], []
    for m in range(MODELS):
        xm = x[m * PER_MODEL:(m + 1) * PER_MODEL].clone().requires_grad_()
        table = tables[m].clone().requires_grad_()
        out = torch_grid_encoding(xm, table, enc.levels, enc.n_features_per_level, enc.interpolation)
        out.backward(grad[m * PER_MODEL:(m + 1) * PER_MODEL])
        outs.append(out.detach())
        table_grads.append(table.grad)
        x_grads.append(xm.grad)
    return torch.cat(outs), torch.stack(table_grads), torch.cat(x_grads)


def _kernel_available(kernel, x):
    if kernel == "triton":
        pytest.importorskip("triton")
    reason = kernel_unavailable_reason(kernel, x)
    if reason is not None:
        pytest.skip(reason)


@pytest.mark.parametrize("kernel", ["torch", "cpp", "triton"])
@pytest.mark.parametrize("config,d", CASES)
def test_each_block_reads_its_own_table(kernel, config, d, monkeypatch):
    if kernel == "triton":
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    enc, tables, x, grad = _setup(config, d)
    _kernel_available(kernel, x)
    expected = _per_block(enc, tables, x, grad)
    xs, flat = x.clone().requires_grad_(), tables.reshape(-1).clone().requires_grad_()
    out = grid_encoding(xs, flat, enc.levels, enc.n_features_per_level, enc.interpolation, kernel, models=MODELS)
    out.backward(grad)
    torch.testing.assert_close(out.detach(), expected[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(flat.grad.reshape(MODELS, -1), expected[1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(xs.grad, expected[2], rtol=1e-4, atol=1e-4)
    # the blocks differ: a kernel that read table 0 for everything would fail the comparison above
    assert not torch.allclose(expected[0][:PER_MODEL], expected[0][PER_MODEL:2 * PER_MODEL])


@pytest.mark.parametrize("config,d", CASES[:2])
def test_sparse_table_gradient_of_several_tables(config, d):
    """The C++ kernel's sparse table gradient (few lookups per row), with the rows of every table."""
    config = {**config, "log2_hashmap_size": 12, "base_resolution": 64}  # far fewer lookups than rows
    enc, tables, x, grad = _setup(config, d, seed=3)
    _kernel_available("cpp", x)
    workspace = torch.zeros(tables.numel())
    flat = tables.reshape(-1).clone().requires_grad_()
    out = grid_encoding(x, flat, enc.levels, enc.n_features_per_level, enc.interpolation, "cpp",
                        sparse_accumulator=lambda: workspace, models=MODELS)
    out.backward(grad)
    assert flat.grad.is_sparse
    expected = _per_block(enc, tables, x, grad)[1]
    torch.testing.assert_close(flat.grad.to_dense().reshape(MODELS, -1), expected, rtol=1e-5, atol=1e-5)
    assert not workspace.any()  # left at zero for the next step


def test_blocks_must_split_evenly():
    enc, tables, x, _ = _setup(*CASES[0])
    with pytest.raises(ValueError, match="models=3"):
        grid_encoding(x[:-1], tables.reshape(-1), enc.levels, enc.n_features_per_level, enc.interpolation, models=3)


