"""The Triton grid kernel (inr_enc/ops/grid/triton_kernel.py) against the PyTorch path, on CPU under Triton's
interpreter. triton 3.9 reads TRITON_INTERPRET when a function is jit-decorated (its own @jit helpers such as
tl.zeros when triton is imported, so the kernel uses none); the kernel module decorates its kernel at the first
launch in each mode, so setting the variable per test (monkeypatch, restored afterwards) is enough, whenever
triton was imported, and no other test sees it. Sizes are tiny: the interpreter runs every kernel op in numpy."""

import pytest
import torch

pytest.importorskip("triton")

from inr_enc import build_encoder
from inr_enc.ops.grid import torch_grid_encoding
from inr_enc.ops.grid.triton_kernel import triton_grid_encoding, triton_unavailable_reason


@pytest.fixture(autouse=True)
def interpret(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


CASES = [  # (otype, d, extra): Hash / Dense / Tiled, 1D to 3D, F = 1, 2, 4, dense and hashed levels
    ("HashGrid", 1, {"n_levels": 3, "log2_hashmap_size": 4, "base_resolution": 4, "n_features_per_level": 4}),
    ("HashGrid", 2, {"n_levels": 3, "log2_hashmap_size": 5, "base_resolution": 3, "per_level_scale": 1.7}),
    ("HashGrid", 3, {"n_levels": 3, "log2_hashmap_size": 6, "base_resolution": 2, "n_features_per_level": 1}),
    ("DenseGrid", 2, {"n_levels": 2, "base_resolution": 3, "per_level_scale": 1.5, "n_features_per_level": 1}),
    ("DenseGrid", 3, {"n_levels": 2, "base_resolution": 2, "per_level_scale": 1.5, "n_features_per_level": 4}),
    ("TiledGrid", 2, {"n_levels": 3, "base_resolution": 3, "per_level_scale": 2.0}),
    ("TiledGrid", 1, {"n_levels": 2, "base_resolution": 5, "per_level_scale": 1.3, "n_features_per_level": 1}),
]
TOLERANCE = {torch.float32: 1e-6, torch.float64: 1e-13}


def _encoder(otype, d, extra, interpolation):
    enc = build_encoder({"otype": otype, "interpolation": interpolation, **extra}, d)
    with torch.no_grad():  # a table of O(1) values, so that differences are visible
        enc.params.copy_(torch.randn(enc.params.shape, generator=torch.Generator().manual_seed(0)))
    return enc


def _inputs(n, d, dtype, seed=1):
    """[n, d]: inside [0, 1], the corners 0 and 1, and outside (negative, > 1)."""
    x = torch.rand(n, d, dtype=dtype, generator=torch.Generator().manual_seed(seed))
    x[0], x[1] = 0.0, 1.0
    x[n // 2:] = x[n // 2:] * 5 - 2
    return x


def _assert_close(actual, expected, dtype):
    """Within TOLERANCE of the largest magnitude (gradients sum terms that cancel)."""
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(actual, expected, rtol=tol, atol=tol * max(expected.abs().max().item(), 1.0))


def _both_paths(enc, x, grad, create_graph=False):
    """Output and (input, table) gradients of the Triton and the torch path."""
    results = []
    for fn in (triton_grid_encoding, torch_grid_encoding):
        xi = x.clone().requires_grad_()
        params = enc.params.detach().clone().requires_grad_()
        out = fn(xi, params, enc.levels, enc.n_features_per_level, enc.interpolation)
        grad_x, grad_params = torch.autograd.grad(out, (xi, params), grad, allow_unused=True, create_graph=create_graph)
        results.append((xi, params, out, torch.zeros_like(xi) if grad_x is None else grad_x, grad_params))
    return results


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("interpolation", ["Linear", "Nearest", "Smoothstep"])
@pytest.mark.parametrize("otype, d, extra", CASES)
def test_matches_torch_path(otype, d, extra, interpolation, dtype):
    enc = _encoder(otype, d, extra, interpolation)
    x = _inputs(12, d, dtype)
    grad = torch.randn(12, enc.n_output_dims, dtype=dtype, generator=torch.Generator().manual_seed(2))
    (_, _, out, grad_x, grad_params), (_, _, ref, ref_x, ref_params) = _both_paths(enc, x, grad)
    assert out.dtype == dtype and out.shape == (12, enc.n_output_dims)
    _assert_close(out, ref, dtype)
    _assert_close(grad_params, ref_params, torch.float32)  # the table (and its gradient) is float32
    _assert_close(grad_x, ref_x, dtype)
    if interpolation == "Nearest":
        assert not grad_x.any()


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # numpy, as intended
def test_large_and_far_outside_inputs():
    # Positions beyond the int32 range saturate; beyond float32 they clamp (ops/grid/reference.py).
    enc = _encoder("HashGrid", 2, {"n_levels": 3, "log2_hashmap_size": 5, "base_resolution": 4}, "Linear")
    x = torch.tensor([[-3e9, 3e9], [1e6, -1e6], [3e38, -3e38], [-1e-8, 1.0 + 1e-7]])
    grad = torch.randn(4, enc.n_output_dims, generator=torch.Generator().manual_seed(3))
    (_, _, out, grad_x, grad_params), (_, _, ref, ref_x, ref_params) = _both_paths(enc, x, grad)
    assert torch.isfinite(out).all()
    for actual, expected in ((out, ref), (grad_x, ref_x), (grad_params, ref_params)):
        _assert_close(actual, expected, torch.float32)


@pytest.mark.parametrize("interpolation", ["Linear", "Smoothstep"])  # Nearest has no second derivatives
def test_double_backward_uses_torch_second_derivatives(interpolation):
    enc = _encoder("HashGrid", 2, {"n_levels": 2, "log2_hashmap_size": 4, "base_resolution": 3}, interpolation)
    x = _inputs(6, 2, torch.float64)
    grad = torch.randn(6, enc.n_output_dims, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    weight = torch.randn(6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    second = []
    for xi, params, _, grad_x, grad_params in _both_paths(enc, x, grad, create_graph=True):
        # An eikonal-style loss on the input gradient, plus one on the table gradient.
        loss = (grad_x * weight).sum() + (grad_x**2).sum() + grad_params.square().sum()
        second.append(torch.autograd.grad(loss, (xi, params)))
    for actual, expected in zip(*second):
        _assert_close(actual, expected, torch.float64)


def test_no_samples():
    enc = _encoder("HashGrid", 3, {"n_levels": 2, "log2_hashmap_size": 4}, "Linear")
    out = triton_grid_encoding(torch.zeros(0, 3), enc.params, enc.levels, 2, "Linear")
    assert out.shape == (0, 4)


def test_unavailable_reasons(monkeypatch):
    assert triton_unavailable_reason(torch.rand(4, 3)) is None
    assert "float32 or float64" in triton_unavailable_reason(torch.rand(4, 3, dtype=torch.float16))
    assert "d in 1..7" in triton_unavailable_reason(torch.rand(4, 8))
    monkeypatch.delenv("TRITON_INTERPRET")
    assert "CUDA" in triton_unavailable_reason(torch.rand(4, 3))
    enc = _encoder("HashGrid", 3, {"n_levels": 2, "log2_hashmap_size": 4}, "Linear")
    with pytest.raises(RuntimeError, match="unavailable"):
        triton_grid_encoding(torch.rand(4, 3), enc.params, enc.levels, 2, "Linear")
