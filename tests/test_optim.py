"""GridAdam (inr_enc/optim) against independent references: torch.optim.Adam where every element has a
nonzero gradient at every step, a per-element float64 Python loop of tiny-cuda-nn's lazy Adam otherwise
(elements with an exactly zero gradient keep value, moments and step count; each element's bias correction
uses its own step count), and the PyTorch grid path's dense table gradient for the fused kernel's sparse one.

Both lazy-update paths are tested: the C++ kernel (optim/lazy_adam.cpp, for CPU parameters) and the torch
fallback (optim.lazy_adam._lazy_update_torch, reached by making lazy_adam_extension() return None);
a spy asserts which one ran.
"""

import io
import math

import pytest
import torch

from inr_enc.field import Field, build_field
from inr_enc.ops.grid import cpu_kernel
from inr_enc.ops.grid.reference import grid_corners
from inr_enc.optim import GridAdam, lazy_adam

HAS_EXTENSION = lazy_adam.lazy_adam_extension() is not None and cpu_kernel.cpu_extension() is not None
LR, BETAS, EPS = 0.05, (0.9, 0.99), 1e-6
# per dtype: tolerance of a GridAdam run against torch.optim.Adam / the float64 reference loop
TOL = {torch.float32: {"rtol": 2e-6, "atol": 1e-6}, torch.float64: {"rtol": 1e-12, "atol": 1e-14}}

FIELD_CONFIG = {
    "encoding": {"otype": "HashGrid", "n_levels": 4, "n_features_per_level": 2, "log2_hashmap_size": 8,
                 "base_resolution": 4, "per_level_scale": 2.0},
    "network": {"otype": "FullyFusedMLP", "n_neurons": 16, "n_hidden_layers": 1},
}
SMALL_BATCH, LARGE_BATCH = 8, 200  # 8 * 4 levels * 4 corners < 592 table rows (sparse); 200 * 16 > 592 (dense)


# ---------------------------------------------------------------------------------------------- helpers


@pytest.fixture(params=["kernel", "torch"])
def lazy_path(request, monkeypatch):
    """Force one lazy-update path and count the calls of both, so each test can check which one ran."""
    path = request.param
    if path == "kernel" and not HAS_EXTENSION:
        pytest.skip("the fused CPU extension does not build here")
    calls = {"kernel": 0, "torch": 0}
    real_extension, real_torch = lazy_adam.lazy_adam_extension(), lazy_adam._lazy_update_torch

    class CountingKernel:
        def lazy_adam(self, *args):
            calls["kernel"] += 1
            return real_extension.lazy_adam(*args)

    def spy_torch(*args):
        calls["torch"] += 1
        return real_torch(*args)

    monkeypatch.setattr(lazy_adam, "lazy_adam_extension", CountingKernel if path == "kernel" else lambda: None)
    monkeypatch.setattr(lazy_adam, "_lazy_update_torch", spy_torch)
    return path, calls


def assert_path(lazy_path):
    path, calls = lazy_path
    other = "torch" if path == "kernel" else "kernel"
    assert calls[path] > 0 and calls[other] == 0, calls


def nonzero_randn(shape, generator, dtype):
    """Normal values times magnitudes spread over 1e-3..10, none exactly zero."""
    g = torch.randn(shape, generator=generator, dtype=torch.float64)
    g = g * 10 ** (torch.rand(shape, generator=generator, dtype=torch.float64) * 4 - 3)
    g[g == 0] = 1.0
    return g.to(dtype)


def as_sparse(dense, generator, explicit_zeros=()):
    """A 1D COO gradient of ``dense``: its nonzero elements plus explicit zero entries at ``explicit_zeros``,
    in a shuffled order (unique indices, not flagged coalesced)."""
    index = torch.cat([dense.nonzero()[:, 0], torch.as_tensor(explicit_zeros, dtype=torch.int64)])
    index = index[torch.randperm(index.numel(), generator=generator)]
    return torch.sparse_coo_tensor(index[None], dense[index], dense.shape, check_invariants=True)


def reference_lazy_adam(p0, grads, lr, betas, eps):
    """tcnn's lazy Adam with torch.optim.Adam's per-element formula, one Python float64 element at a time.
    Returns value, first and second moment and step count per element after each step."""
    beta1, beta2 = betas
    p = [float(v) for v in p0.reshape(-1).tolist()]
    m, v, t = [0.0] * len(p), [0.0] * len(p), [0] * len(p)
    history = []
    for grad in grads:
        for e, g in enumerate(grad.reshape(-1).tolist()):
            if g == 0.0:
                continue
            t[e] += 1
            m[e] = m[e] + (g - m[e]) * (1 - beta1)
            v[e] = beta2 * v[e] + (1 - beta2) * g * g
            step_size = lr / (1 - beta1 ** t[e])
            p[e] -= step_size * m[e] / (math.sqrt(v[e]) / math.sqrt(1 - beta2 ** t[e]) + eps)
        history.append(tuple(torch.tensor(list(x), dtype=torch.float64) for x in (p, m, v)) + (torch.tensor(t),))
    return history


def lazy_state(opt, param):
    state = opt.state[param]
    if not state:
        return (param.detach().clone(), torch.zeros_like(param), torch.zeros_like(param),
                torch.zeros_like(param, dtype=torch.int32))
    return (param.detach().clone(), state["exp_avg"].clone(), state["exp_avg_sq"].clone(), state["step"].clone())


def small_field(backend="auto", dtype=torch.float32):
    field = Field(2, 3, FIELD_CONFIG, backend=backend) if backend != "auto" else build_field(2, 3, FIELD_CONFIG)
    return field.to(dtype)


def torch_twin(field):
    """The same field (same weights) with its grid on the PyTorch path (dense table gradients)."""
    twin = Field(2, 3, FIELD_CONFIG, backend="torch").to(field.encoder.params.dtype)
    twin.load_state_dict(field.state_dict())
    return twin


# ------------------------------------------------------- 1. every element nonzero: equals torch.optim.Adam


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("layout", ["dense", "sparse"])
def test_lazy_group_equals_adam_when_every_gradient_is_nonzero(lazy_path, layout, dtype):
    gen = torch.Generator().manual_seed(1)
    shape = (40,) if layout == "sparse" else (5, 8)  # sparse gradients are for flat tables
    lazy = torch.nn.Parameter(torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype))
    plain = torch.nn.Parameter(torch.randn(6, generator=gen, dtype=torch.float64).to(dtype))
    ref_lazy, ref_plain = (torch.nn.Parameter(p.detach().clone()) for p in (lazy, plain))
    opt = GridAdam([{"params": [plain]}, {"params": [lazy], "lazy": True}], lr=LR, betas=BETAS, eps=EPS)
    ref = torch.optim.Adam([ref_plain, ref_lazy], lr=LR, betas=BETAS, eps=EPS)
    for _ in range(6):
        g_lazy, g_plain = nonzero_randn(shape, gen, dtype), nonzero_randn(6, gen, dtype)
        lazy.grad = as_sparse(g_lazy, gen) if layout == "sparse" else g_lazy.clone()
        plain.grad, ref_lazy.grad, ref_plain.grad = g_plain.clone(), g_lazy.clone(), g_plain.clone()
        opt.step()
        ref.step()
        torch.testing.assert_close(lazy.detach(), ref_lazy.detach(), **TOL[dtype])
        assert torch.equal(plain, ref_plain)  # plain groups are torch.optim.Adam itself
    state, ref_state = opt.state[lazy], ref.state[ref_lazy]
    assert state["step"].dtype == torch.int32 and state["step"].shape == lazy.shape
    assert torch.all(state["step"] == int(ref_state["step"]))
    torch.testing.assert_close(state["exp_avg"], ref_state["exp_avg"], **TOL[dtype])
    torch.testing.assert_close(state["exp_avg_sq"], ref_state["exp_avg_sq"], **TOL[dtype])
    assert lazy.grad is not None and (lazy.grad.is_sparse == (layout == "sparse"))  # the gradient is kept
    assert_path(lazy_path)


# ------------------------------------------- 2. zero gradients: per-element float64 reference of tcnn's rule


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("layout", ["dense", "sparse"])
def test_lazy_group_skips_zero_gradients_like_tcnn(lazy_path, layout, dtype):
    gen = torch.Generator().manual_seed(2)
    n, n_steps, never = 30, 8, [0, 7, 19]  # elements `never` get no gradient at all; element 3 gets one always
    p0 = torch.randn(n, generator=gen, dtype=torch.float64).to(dtype)
    param = torch.nn.Parameter(p0.clone())
    opt = GridAdam([{"params": [param], "lazy": True}], lr=LR, betas=BETAS, eps=EPS)
    grads = []
    for step in range(n_steps):
        mask = torch.rand(n, generator=gen) < 0.5
        mask[never], mask[3] = False, True
        g = torch.where(mask, nonzero_randn(n, gen, dtype), torch.zeros((), dtype=dtype))
        g[~mask & (torch.arange(n) % 2 == 1)] = -0.0  # negative zero is a zero gradient too
        grads.append(g)
    history = reference_lazy_adam(p0, [g.double() for g in grads], LR, BETAS, EPS)

    for step, (g, expected) in enumerate(zip(grads, history)):
        skipped = g == 0
        zero_entries = skipped.nonzero()[:, 0][::2].tolist()  # sparse: some zeros are explicit entries
        param.grad = as_sparse(g, gen, zero_entries) if layout == "sparse" else g.clone()
        before = lazy_state(opt, param)
        opt.step()
        after = lazy_state(opt, param)
        for old, new in zip(before, after):  # skipped elements: value, moments and step count untouched
            assert torch.equal(old[skipped], new[skipped])
        for got, want in zip(after[:3], expected[:3]):
            torch.testing.assert_close(got.double(), want, **TOL[dtype])
        assert torch.equal(after[3].long(), expected[3]), f"step counts after step {step}"
    value, exp_avg, exp_avg_sq, steps = lazy_state(opt, param)
    assert torch.equal(value[never], p0[never])  # never touched: exactly as initialized
    assert not exp_avg[never].any() and not exp_avg_sq[never].any() and not steps[never].any()
    assert steps[3] == n_steps and 0 < int(steps.max()) <= n_steps and len(set(steps.tolist())) > 2
    assert_path(lazy_path)


# ------------------------------------------------------------------------------- 3. state_dict round trip


def _round_trip_run(split):
    """6 lazy steps with zero-gradient holes (and a plain group); with ``split`` the optimizer is saved after
    ``split`` steps, loaded through torch.save/torch.load into a fresh GridAdam on fresh parameters, and
    continued."""
    gen = torch.Generator().manual_seed(3)
    table = torch.nn.Parameter(torch.randn(24, generator=gen))
    weight = torch.nn.Parameter(torch.randn(4, 3, generator=gen))
    grads = []
    for _ in range(6):
        g = nonzero_randn(24, gen, torch.float32) * (torch.rand(24, generator=gen) < 0.5)
        grads.append((as_sparse(g, gen), nonzero_randn((4, 3), gen, torch.float32)))

    def make(t, w):
        return GridAdam([{"params": [w]}, {"params": [t], "lazy": True}], lr=LR, betas=BETAS, eps=EPS)

    opt = make(table, weight)
    for i, (g_table, g_weight) in enumerate(grads):
        if i == split:
            buffer = io.BytesIO()
            torch.save(opt.state_dict(), buffer)
            buffer.seek(0)
            table = torch.nn.Parameter(table.detach().clone())
            weight = torch.nn.Parameter(weight.detach().clone())
            opt = make(table, weight)
            opt.load_state_dict(torch.load(buffer))
            assert opt.state[table]["step"].dtype == torch.int32, "the per-element step counts stay int32"
        table.grad, weight.grad = g_table, g_weight
        opt.step()
    return table, weight, opt


def test_state_dict_round_trip_continues_like_an_uninterrupted_run(lazy_path):
    table, weight, opt = _round_trip_run(split=None)
    table2, weight2, opt2 = _round_trip_run(split=3)
    assert torch.equal(table, table2) and torch.equal(weight, weight2)
    for key in ("exp_avg", "exp_avg_sq", "step"):
        assert torch.equal(opt.state[table][key], opt2.state[table2][key])
    assert opt2.param_groups[1]["lazy"] and not opt2.param_groups[0]["lazy"]
    assert_path(lazy_path)


def test_state_dict_holds_lazy_state():
    """What can be checked today: the saved state has the per-element int32 counts and the group flags."""
    table = torch.nn.Parameter(torch.randn(5))
    opt = GridAdam([{"params": [table], "lazy": True}], lr=LR)
    table.grad = torch.tensor([1.0, 0.0, 2.0, 0.0, 3.0])
    opt.step()
    saved = opt.state_dict()
    assert saved["param_groups"][0]["lazy"] is True
    assert saved["state"][0]["step"].dtype == torch.int32
    assert saved["state"][0]["step"].tolist() == [1, 0, 1, 0, 1]


# -------------------------------------------------------------- 4. for_model and the sparse table gradient


def _touched_rows(field, x):
    index, _ = grid_corners(x, field.encoder.levels, field.encoder.interpolation)
    return set(index.unique().tolist())


def test_for_model_groups_and_sparse_table_gradient(monkeypatch):
    monkeypatch.setattr(cpu_kernel, "SPARSE_BELOW_READS_PER_ROW", 1.0)  # the small batches below: sparse
    torch.manual_seed(4)
    field = small_field()
    twin = torch_twin(field)
    opt = GridAdam.for_model(field, lr=LR)
    table = field.encoder.params
    lazy_groups = [g for g in opt.param_groups if g["lazy"]]
    plain_groups = [g for g in opt.param_groups if not g["lazy"]]
    assert len(lazy_groups) == 1 and len(lazy_groups[0]["params"]) == 1 and lazy_groups[0]["params"][0] is table
    network = list(field.network.parameters())
    assert len(plain_groups) == 1 and len(plain_groups[0]["params"]) == len(network)
    assert all(any(p is q for q in plain_groups[0]["params"]) for p in network)
    assert field.encoder.sparse_gradients

    f = field.encoder.n_features_per_level
    x = torch.rand(SMALL_BATCH, 2)
    field(x).square().sum().backward()
    twin(x).square().sum().backward()
    dense = twin.encoder.params.grad
    assert not dense.is_sparse
    grad = table.grad
    if HAS_EXTENSION:
        assert grad.is_sparse, "a small batch on the CPU kernel gives the table a sparse gradient"
        index = grad._indices()[0]
        assert index.unique().numel() == index.numel(), "each element once"
        rows = set((index // f).tolist())
        nonzero_rows = set(dense.view(-1, f).abs().sum(1).nonzero()[:, 0].tolist())
        touched = _touched_rows(field, x)
        assert rows == touched & nonzero_rows
        assert rows == touched  # random inputs: every row read gets a nonzero gradient
        assert set(index.tolist()) == {r * f + k for r in rows for k in range(f)}  # whole rows
        assert len(rows) < table.numel() // f
        grad = grad.to_dense()
    torch.testing.assert_close(grad, dense, rtol=1e-5, atol=1e-6)
    for p, q in zip(field.network.parameters(), twin.network.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6)


def test_large_batch_gives_a_dense_table_gradient():
    torch.manual_seed(5)
    field = small_field()
    twin = torch_twin(field)
    GridAdam.for_model(field, lr=LR)
    x = torch.rand(LARGE_BATCH, 2)
    field(x).square().sum().backward()
    twin(x).square().sum().backward()
    grad = field.encoder.params.grad
    assert not grad.is_sparse, "more lookups than table rows: dense is cheaper"
    torch.testing.assert_close(grad, twin.encoder.params.grad, rtol=1e-5, atol=1e-6)


def test_for_model_without_lazy_is_plain_adam():
    field = small_field()
    opt = GridAdam.for_model(field, lr=LR, lazy=False)
    assert len(opt.param_groups) == 1 and not opt.param_groups[0]["lazy"]
    assert len(opt.param_groups[0]["params"]) == len(list(field.parameters()))
    assert not field.encoder.sparse_gradients
    field(torch.rand(SMALL_BATCH, 2)).sum().backward()
    assert not field.encoder.params.grad.is_sparse


# ------------------------------------------------------ 5. fitting: CPU kernel (sparse) vs torch backend


def _fit(field, batches, lr=1e-2):
    opt = GridAdam.for_model(field, lr=lr)
    sparse_seen = False
    for x, y in batches:
        opt.zero_grad()
        torch.nn.functional.mse_loss(field(x), y).backward()
        sparse_seen |= field.encoder.params.grad.is_sparse
        opt.step()
    return opt, sparse_seen


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fit_steps_cpu_kernel_match_torch_backend(dtype, monkeypatch):
    monkeypatch.setattr(cpu_kernel, "SPARSE_BELOW_READS_PER_ROW", 1.0)  # small batches sparse, large ones dense
    gen = torch.Generator().manual_seed(6)
    field = small_field(dtype=dtype)
    twin = torch_twin(field)
    initial = field.encoder.params.detach().clone()
    batches = [(torch.rand(n, 2, generator=gen, dtype=dtype), torch.rand(n, 3, generator=gen, dtype=dtype))
               for n in (SMALL_BATCH, SMALL_BATCH, LARGE_BATCH, SMALL_BATCH, SMALL_BATCH)]
    opt, sparse_seen = _fit(field, batches)
    twin_opt, twin_sparse = _fit(twin, batches)
    assert sparse_seen == HAS_EXTENSION and not twin_sparse
    tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == torch.float32 else {"rtol": 1e-10, "atol": 1e-12}
    for (name, p), q in zip(field.named_parameters(), twin.parameters()):
        torch.testing.assert_close(p, q, **tol, msg=lambda m, name=name: f"{name}: {m}")
    table, twin_table = field.encoder.params, twin.encoder.params
    state, twin_state = opt.state[table], twin_opt.state[twin_table]
    assert torch.equal(state["step"], twin_state["step"])
    f = field.encoder.n_features_per_level
    read = set().union(*(_touched_rows(field, x) for x, _ in batches))
    unread = torch.tensor([r not in read for r in range(table.numel() // f)]).repeat_interleave(f)
    assert unread.any() and torch.equal(table.detach()[unread], initial[unread])
    assert not state["step"][unread].any() and state["step"][~unread].min() >= 1


def test_gradient_accumulation_matches_torch_backend():
    gen = torch.Generator().manual_seed(7)
    field = small_field()
    twin = torch_twin(field)
    x1, x2 = torch.rand(SMALL_BATCH, 2, generator=gen), torch.rand(SMALL_BATCH, 2, generator=gen)
    results = []
    for f in (field, twin):
        opt = GridAdam.for_model(f, lr=1e-2)
        f(x1).square().sum().backward()
        f(x1).square().sum().backward()  # the same batch twice: every row it reads is accumulated
        f(x2).square().sum().backward()
        opt.step()
        results.append(opt.state[f.encoder.params]["step"])
    assert int(results[0].max()) == 1, "one step, one count"
    assert torch.equal(results[0], results[1])
    torch.testing.assert_close(field.encoder.params, twin.encoder.params, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("path", [
    "kernel",
    "torch"])
def test_uncoalesced_sparse_gradient_is_summed(path, monkeypatch):
    if path == "kernel" and not HAS_EXTENSION:
        pytest.skip("the fused CPU extension does not build here")
    if path == "torch":
        monkeypatch.setattr(lazy_adam, "lazy_adam_extension", lambda: None)
    param, ref_param = torch.nn.Parameter(torch.zeros(5)), torch.nn.Parameter(torch.zeros(5))
    grad = torch.sparse_coo_tensor(torch.tensor([[1, 3, 1]]), torch.tensor([1.0, 2.0, 1.0]), (5,),
                                   check_invariants=True)
    opt = GridAdam([{"params": [param], "lazy": True}], lr=0.1)
    ref = torch.optim.Adam([ref_param], lr=0.1)
    param.grad, ref_param.grad = grad, grad.to_dense()
    opt.step()
    ref.step()
    assert opt.state[param]["step"].tolist() == [0, 1, 0, 1, 0]
    torch.testing.assert_close(param.detach(), ref_param.detach())


def test_non_contiguous_lazy_parameter_equals_adam():
    gen = torch.Generator().manual_seed(8)
    param = torch.nn.Parameter(torch.randn(4, 6, generator=gen).t())
    ref_param = torch.nn.Parameter(param.detach().clone())
    assert not param.is_contiguous()
    opt = GridAdam([{"params": [param], "lazy": True}], lr=LR, betas=BETAS, eps=EPS)
    ref = torch.optim.Adam([ref_param], lr=LR, betas=BETAS, eps=EPS)
    for _ in range(3):
        g = nonzero_randn((6, 4), gen, torch.float32)
        param.grad, ref_param.grad = g.clone(), g.clone()
        opt.step()
        ref.step()
    torch.testing.assert_close(param.detach(), ref_param.detach(), **TOL[torch.float32])


# --------------------------------------------------------------------------------------------- 6. errors


@pytest.mark.parametrize("option", [{"weight_decay": 0.1}, {"amsgrad": True}, {"maximize": True}])
def test_lazy_group_rejects_unsupported_adam_options(option):
    p, q = torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(3))
    with pytest.raises(ValueError):
        GridAdam([{"params": [p], "lazy": True, **option}])
    with pytest.raises(ValueError):  # as a default for every group
        GridAdam([{"params": [p]}, {"params": [q], "lazy": True}], **option)
    with pytest.raises(ValueError):
        GridAdam.for_model(small_field(), **option)
    GridAdam([{"params": [p], **option}, {"params": [q], "lazy": True}])  # plain groups take them


def test_add_param_group():
    p, q, r = (torch.nn.Parameter(torch.ones(3)) for _ in range(3))
    opt = GridAdam([p], lr=LR)
    opt.add_param_group({"params": [q]})
    p.grad, q.grad = torch.ones(3), torch.ones(3)
    opt.step()
    with pytest.raises(ValueError):
        opt.add_param_group({"params": [r], "lazy": True, "weight_decay": 0.1})
    assert len(opt.param_groups) == 2  # the rejected group was not added


def test_step_hooks_run_once_per_step():
    p = torch.nn.Parameter(torch.ones(3))
    torch.optim.Adam([torch.nn.Parameter(torch.ones(1))])  # an Adam in the process patches Adam.step too
    opt = GridAdam([{"params": [p], "lazy": True}], lr=LR)
    calls = []
    opt.register_step_pre_hook(lambda *args: calls.append(1))
    p.grad = torch.ones(3)
    opt.step()
    assert calls == [1]


def test_plain_adam_state_loads():
    """A checkpoint of torch.optim.Adam (no "lazy" in its groups) loads into a GridAdam and steps on."""
    p = torch.nn.Parameter(torch.ones(4))
    ref = torch.optim.Adam([p], lr=LR)
    p.grad = torch.ones(4)
    ref.step()
    opt = GridAdam([p], lr=LR)
    opt.load_state_dict(ref.state_dict())
    p.grad = torch.ones(4)
    opt.step()
    assert opt.param_groups[0]["lazy"] is False and int(opt.state[p]["step"]) == 2
