"""ShiftedBasis and the Separable network (Zheng et al., ECCV 2022) against independent references: each basis
written out in a Python float64 loop with its normaliser taken on a dense numpy grid, explicit Kronecker
products, numpy's dense least squares, and a long gradient-descent fit."""

import math

import numpy as np
import pytest
import torch

from inr_enc.encoders.shifted_basis import ShiftedBasis
from inr_enc.field import Field

K = 7
WIDTHS = {"gaussian": 0.09, "triangle": 0.2, "box": 0.13, "sinc": 0.1, "impulse": None}
# Reference defaults written out from the documentation: spacings of 1/K.
DEFAULT_SPACINGS = {"gaussian": 0.75, "triangle": 1.0, "box": 1.0, "sinc": 1.0}


def ref_basis(t, j, k, basis, w):
    """Copy j of the basis at t (Python floats); centres c_j = j / K."""
    d = t - j / k
    if basis == "gaussian":
        return math.exp(-d * d / (2 * w * w))
    if basis == "triangle":
        return max(0.0, 1 - abs(d) / w)
    if basis == "box":
        return 1.0 if -w <= d < w else 0.0
    if basis == "sinc":
        return 1.0 if d == 0 else math.sin(math.pi * d / w) / (math.pi * d / w)
    nearest = min(range(k), key=lambda i: (abs(t - i / k), -i))
    return 1.0 if j == nearest else 0.0


def ref_max_norm(k, basis, w):
    """max over [0, 1] of the per-axis norm: numpy on 200,001 points plus the centres, midpoints and c +- w."""
    c = np.arange(k) / k
    t = np.concatenate([np.linspace(0, 1, 200_001), c, c + 0.5 / k] + ([] if w is None else [c - w, c + w]))
    t = np.clip(t, 0, 1)[:, None]
    d = t - c
    if basis == "gaussian":
        phi = np.exp(-d**2 / (2 * w * w))
    elif basis == "triangle":
        phi = np.maximum(0, 1 - np.abs(d) / w)
    elif basis == "box":
        phi = ((d >= -w) & (d < w)).astype(float)
    elif basis == "sinc":
        phi = np.sinc(d / w)
    else:
        phi = np.eye(k)[np.abs(d).argmin(1)]
    return math.sqrt((phi**2).sum(1).max())


def ref_encode(x, k, basis, w, axes):
    """x: [N, d] list of float lists -> [N, n_axes * K] numpy, the axes as the paper's code orders them."""
    rows = []
    for p in x:
        coords = list(p) if axes == "separable" else [p[0], p[1], (p[0] + p[1]) / 2, (p[0] - p[1] + 1) / 2]
        rows.append([ref_basis(u, j, k, basis, w) for u in coords for j in range(k)])
    scale = math.sqrt(len(coords)) * ref_max_norm(k, basis, w)
    return np.array(rows) / scale


def sample_points(d, n=6, seed=0):
    x = torch.rand(n, d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    special = [[0.0, 1.0, 2 / K], [1.0, 3 / K, 0.0], [-0.3, 1.4, 0.5], [1 / K, 0.0, 1.0]]
    special = torch.tensor(special, dtype=torch.float64)
    return torch.cat([x, special[:, :d]])


@pytest.mark.parametrize("basis", sorted(WIDTHS))
@pytest.mark.parametrize("axes, d", [("separable", 3), ("separable", 1), ("diagonal", 2)])
def test_each_basis_matches_its_formula(basis, axes, d):
    for width in (WIDTHS[basis], None):
        enc = ShiftedBasis(d, {"n_bases": K, "basis": basis, "width": width, "axes": axes})
        w = None if basis == "impulse" else (width or DEFAULT_SPACINGS[basis] / K)
        assert enc.config["width"] == w
        x = sample_points(d)
        expected = ref_encode(x.tolist(), K, basis, w, axes)
        assert enc.n_output_dims == expected.shape[1] == (4 if axes == "diagonal" else d) * K
        np.testing.assert_allclose(enc(x).numpy(), expected, rtol=1e-8, atol=1e-12)
        # float32 on the random points only: the special ones sit on box edges and impulse ties
        np.testing.assert_allclose(enc(x[:6].float()).numpy(), expected[:6], rtol=1e-4, atol=2e-6)


@pytest.mark.parametrize("basis", sorted(WIDTHS))
def test_row_norms_reach_one_on_the_unit_square(basis):
    """The fixed divisor keeps every row norm on [0, 1]^2 at most 1, reached for separable axes."""
    config = {"n_bases": K, "basis": basis, "width": WIDTHS[basis]}
    centres = torch.arange(K, dtype=torch.float64) / K
    t = torch.cat([torch.linspace(0, 1, 201, dtype=torch.float64), centres, centres + 0.5 / K])
    xy = torch.stack(torch.meshgrid(t, t, indexing="ij"), -1)
    norms = ShiftedBasis(2, config)(xy).norm(dim=-1)
    assert norms.max() <= 1 + 1e-9 and norms.max() >= 1 - 1e-3
    assert ShiftedBasis(2, {**config, "axes": "diagonal"})(xy).norm(dim=-1).max() <= 1 + 1e-9


@pytest.mark.parametrize("basis", sorted(WIDTHS))
def test_a_sample_does_not_depend_on_the_rest_of_the_batch(basis):
    enc = ShiftedBasis(2, {"n_bases": 16, "basis": basis, "axes": "diagonal"})
    x = torch.rand(50, 2, generator=torch.Generator().manual_seed(3))
    outliers = torch.tensor([[-40.0, 3.0], [1e6, -1e6], [0.5, 1e30], [0.0, 0.0], [1.0, 1.0]])
    alone = enc(x)
    with_outliers = enc(torch.cat([x[:20], outliers, x[20:]]))
    assert torch.equal(with_outliers[:20], alone[:20]) and torch.equal(with_outliers[25:], alone[20:])
    assert torch.equal(enc(x[7:8]), alone[7:8])
    assert torch.isfinite(with_outliers).all()


BAD = [
    ({"n_bases": 0}, 1, "'n_bases' must be >= 1, got 0"),
    ({"n_bases": 2.5}, 1, "'n_bases' must be an integer"),
    ({"basis": "cubic"}, 1, "'basis' must be one of gaussian, triangle, box, impulse, sinc"),
    ({"width": -0.1}, 1, "'width' must be > 0.0, got -0.1"),
    ({"width": 0}, 1, "'width' must be > 0.0"),
    ({"width": "wide"}, 1, "'width' must be a finite number"),
    ({"basis": "impulse", "width": 0.1}, 1, "'width' is not used by basis 'impulse'"),
    ({"axes": "diag"}, 2, "'axes' must be one of separable, diagonal"),
    ({"axes": "diagonal"}, 3, "'axes' \"diagonal\" needs exactly 2 input dims, got 3"),
    ({"sigma": 0.1}, 1, "unknown config key 'sigma'"),
]


@pytest.mark.parametrize("config, d, message", BAD)
def test_bad_configs_raise_value_errors_naming_the_key(config, d, message):
    with pytest.raises(ValueError) as info:
        ShiftedBasis(d, config)
    assert message in str(info.value) and str(info.value).startswith("ShiftedBasis: ")


def test_defaults_and_config_round_trip():
    enc = ShiftedBasis(2, {})
    expected = {"otype": "ShiftedBasis", "n_bases": 128, "basis": "gaussian", "width": 0.75 / 128, "axes": "separable"}
    assert enc.config == expected
    x = torch.rand(9, 2)
    assert torch.equal(ShiftedBasis(2, enc.config)(x), enc(x))


@pytest.mark.parametrize("basis", ["gaussian", "sinc"])
def test_gradcheck_float64(basis):
    enc = ShiftedBasis(2, {"n_bases": 5, "basis": basis, "width": 0.15, "axes": "diagonal"})
    x = torch.tensor([[0.0, 0.25], [0.4, 0.6], [0.93, 0.11], [0.2, 0.2]], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(enc, (x,), eps=1e-6, atol=1e-6)
    assert torch.autograd.gradgradcheck(enc, (x,), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("basis", ["triangle", "box", "impulse"])
def test_piecewise_bases_have_finite_second_derivatives(basis):
    enc = ShiftedBasis(2, {"n_bases": 5, "basis": basis})
    x = torch.tensor([[0.13, 0.37], [0.61, 0.88]], dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(enc(x).sum(), x, create_graph=True)
    (second,) = torch.autograd.grad(grad.sum(), x)
    assert torch.isfinite(grad).all() and torch.equal(second, torch.zeros_like(x))
    if basis != "triangle":
        assert torch.equal(grad, torch.zeros_like(x))


# --- Separable network ------------------------------------------------------------------------------

def ref_phi(t, k, basis="gaussian", w=0.15):
    """Phi of one axis: the 1D reference embedding (row norm <= 1 per axis, as Zheng et al.'s code)."""
    return ref_encode([[v] for v in t], k, basis, w, "separable")


def SeparableField(n_output_dims, encoding):
    return Field(2, n_output_dims, {"encoding": {"otype": "ShiftedBasis", **encoding},
                                    "network": {"otype": "Separable"}})


def test_separable_forward_equals_explicit_kronecker_product():
    k, c, w = 5, 3, 0.15
    field = SeparableField(c, {"n_bases": k, "width": w}).double()
    weight = torch.randn(c, k, k, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        field.network.weight.copy_(weight)
    xy = torch.rand(20, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    phi_x, phi_y = ref_phi(xy[:, 0].tolist(), k), ref_phi(xy[:, 1].tolist(), k)
    flat = weight.reshape(c, k * k).numpy()
    expected = np.stack([flat @ np.kron(phi_y[n], phi_x[n]) for n in range(20)])
    np.testing.assert_allclose(field(xy).detach().numpy(), expected, rtol=1e-9, atol=1e-12)
    assert field(xy.float().reshape(4, 5, 2)).shape == (4, 5, c)
    xs, ys = torch.tensor([0.1, 0.5, 0.95], dtype=torch.float64), torch.tensor([0.0, 0.3], dtype=torch.float64)
    grid = (np.kron(ref_phi(ys.tolist(), k), ref_phi(xs.tolist(), k)) @ flat.T).reshape(2, 3, c)
    np.testing.assert_allclose(field.network.reconstruct_grid(field.encoder, xs, ys).detach().numpy(), grid, rtol=1e-9,
                               atol=1e-12)


def _grid(h, w):
    """Pixel centres like inr_enc's image task: xs: [w], ys: [h]."""
    return (torch.arange(w, dtype=torch.float64) + 0.5) / w, (torch.arange(h, dtype=torch.float64) + 0.5) / h


@pytest.mark.parametrize("h, w, k, ridge", [(12, 10, 6, 0.0), (5, 6, 8, 0.0), (12, 10, 6, 0.05)])
def test_solve_matches_dense_kronecker_least_squares(h, w, k, ridge):
    """Over- and under-determined (minimum norm) least squares, and ridge, on the explicit (HW x K^2) system."""
    field = SeparableField(3, {"n_bases": k, "width": 0.15})
    xs, ys = _grid(h, w)
    values = torch.rand(h, w, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    seconds = field.network.solve(field.encoder, xs, ys, values, ridge=ridge)
    assert seconds >= 0 and field.network.weight.dtype == torch.float32
    a = np.kron(ref_phi(ys.tolist(), k), ref_phi(xs.tolist(), k))
    for ch in range(3):
        y = values[..., ch].numpy().reshape(-1)
        if ridge:
            expected = np.linalg.solve(a.T @ a + ridge * np.eye(k * k), a.T @ y)
        else:
            expected = np.linalg.lstsq(a, y, rcond=None)[0]
        solved = field.network.weight[ch].detach().double().numpy().reshape(-1)
        np.testing.assert_allclose(solved, expected, rtol=1e-5, atol=1e-5)


def test_solve_matches_a_long_gradient_descent_fit():
    h, w, k, ridge = 12, 10, 6, 1e-6
    config = {"n_bases": k, "width": 0.08}
    xs, ys = _grid(h, w)
    values = torch.rand(h, w, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    solved = SeparableField(2, config).double()
    solved.network.solve(solved.encoder, xs, ys, values, ridge=ridge)

    fitted = SeparableField(2, config).double()
    xy = torch.stack(torch.meshgrid(ys, xs, indexing="ij")[::-1], -1).reshape(-1, 2)  # (x, y) per pixel, row-major
    target = values.reshape(-1, 2)
    phi_x, phi_y = ref_phi(xs.tolist(), k, w=0.08), ref_phi(ys.tolist(), k, w=0.08)
    # the Hessian's extreme eigenvalues from the singular values of kron(Phi_y, Phi_x); step 2 / (L + mu)
    (sx, sy) = (np.linalg.svd(phi, compute_uv=False) for phi in (phi_x, phi_y))
    largest, smallest = (2 * (sx[i] * sy[i]) ** 2 + 2 * ridge for i in (0, -1))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny ops: a shared thread pool on a busy machine made each step ~100x slower
    try:
        for _ in range(600):
            loss = (fitted(xy) - target).square().sum() + ridge * fitted.network.weight.square().sum()
            (grad,) = torch.autograd.grad(loss, fitted.network.weight)
            with torch.no_grad():
                fitted.network.weight -= 2 * grad / (largest + smallest)
    finally:
        torch.set_num_threads(threads)
    torch.testing.assert_close(fitted.network.weight, solved.network.weight, rtol=0, atol=1e-9)


def test_separable_errors():
    with pytest.raises(ValueError, match="Separable: the encoding must be ShiftedBasis, got otype 'HashGrid'"):
        SeparableField(3, {"otype": "HashGrid"})
    with pytest.raises(ValueError, match="Separable: the encoding's 'axes' must be \"separable\""):
        SeparableField(3, {"otype": "ShiftedBasis", "axes": "diagonal"})
    with pytest.raises(ValueError, match="Separable: fits 2D signals"):
        Field(3, 1, {"encoding": {"otype": "ShiftedBasis"}, "network": {"otype": "Separable"}})
    defaulted = Field(2, 1, {"network": {"otype": "Separable"}})  # the network's default encoding
    assert defaulted.config["encoding"]["otype"] == "ShiftedBasis"
    with pytest.raises(ValueError, match="ShiftedBasis: 'basis' must be one of"):
        SeparableField(3, {"basis": "cubic"})
    field = SeparableField(3, {"n_bases": 4})
    with pytest.raises(ValueError, match=r"input must have shape \[\.\.\., 2\], got \[5, 3\]"):
        field(torch.rand(5, 3))
    with pytest.raises(ValueError, match="input contains NaN or inf"):
        field(torch.tensor([[0.5, float("nan")]]))
    xs, ys = _grid(4, 5)
    with pytest.raises(ValueError, match=r"'values' must have shape \[4, 5, 3\], got \[5, 4, 3\]"):
        field.network.solve(field.encoder, xs, ys, torch.rand(5, 4, 3))
    with pytest.raises(ValueError, match="'ridge' must be >= 0.0"):
        field.network.solve(field.encoder, xs, ys, torch.rand(4, 5, 3), ridge=-1.0)
    assert field.config == {"encoding": field.encoder.config, "network": {"otype": "Separable"}}
