"""The fused CPU grid kernel (inr_enc/ops/grid/cpu_kernel.py) against the PyTorch path, which tests/test_grid.py checks
against slow loops and tcnn's formulas."""

import pytest
import torch

from inr_enc.encoders import build_encoder
from inr_enc.encoders.backends import choose_backend
from inr_enc.ops import cpp_extension
from inr_enc.ops.grid import cpu_kernel, grid_encoding, kernel_unavailable_reason, torch_grid_encoding

pytestmark = pytest.mark.skipif(cpu_kernel.cpu_extension() is None, reason="the C++ extension does not build here")

CASES = [  # (dims, grid config)
    (1, {"type": "Hash", "n_levels": 5, "log2_hashmap_size": 6, "base_resolution": 4, "per_level_scale": 2.0}),
    (2, {"type": "Hash", "n_levels": 6, "log2_hashmap_size": 8, "base_resolution": 4, "per_level_scale": 1.7}),
    (3, {"type": "Hash", "n_levels": 4, "log2_hashmap_size": 9, "base_resolution": 3, "per_level_scale": 2.5}),
    (3, {"type": "Dense", "n_levels": 3, "base_resolution": 3, "per_level_scale": 1.5}),
    (2, {"type": "Tiled", "n_levels": 3, "base_resolution": 5, "per_level_scale": 2.0}),
    (4, {"type": "Hash", "n_levels": 3, "log2_hashmap_size": 10, "base_resolution": 2, "per_level_scale": 2.0}),
    (7, {"type": "Hash", "n_levels": 2, "log2_hashmap_size": 12, "base_resolution": 2, "per_level_scale": 2.0}),
]


def _grid(d, config, f=2, interpolation="Linear", dtype=torch.float32):
    enc = build_encoder({"otype": "Grid", "n_features_per_level": f, "interpolation": interpolation, **config}, d)
    with torch.no_grad():  # values of order 1, so that differences show
        enc.params.copy_(torch.randn(enc.params.shape, generator=torch.Generator().manual_seed(1)))
    return enc.to(dtype)


def _inputs(n, d, dtype):
    x = torch.rand(n, d, dtype=dtype, generator=torch.Generator().manual_seed(2)) * 1.6 - 0.3  # also outside [0, 1]
    x[:3] = torch.tensor([0.0, 1.0, -2.5e3], dtype=dtype)[:, None]  # corners, and far outside (wraps like tcnn)
    return x.requires_grad_()


def _encode_and_grads(enc, x, kernel, grad):
    params = enc.params.detach().clone().requires_grad_()
    out = grid_encoding(x, params, enc.levels, enc.n_features_per_level, enc.interpolation, kernel)
    grads = torch.autograd.grad(out, [x, params], grad, allow_unused=True)
    return out, *(torch.zeros_like(t) if g is None else g for g, t in zip(grads, (x, params)))


@pytest.mark.parametrize("d, config", CASES)
@pytest.mark.parametrize("interpolation", ["Linear", "Nearest", "Smoothstep"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_outputs_and_gradients_match_the_torch_path(d, config, interpolation, dtype):
    for f in (1, 2, 4, 8) if d == 2 else (2,):
        enc = _grid(d, config, f, interpolation, dtype)
        x = _inputs(300, d, dtype)
        grad = torch.randn(300, enc.n_output_dims, dtype=dtype, generator=torch.Generator().manual_seed(3))
        eps = torch.finfo(dtype).eps  # sums of terms up to scale * |table| * |grad|: rounding relative to the largest
        for ours, theirs in zip(_encode_and_grads(enc, x, "cpp", grad), _encode_and_grads(enc, x, "torch", grad)):
            torch.testing.assert_close(ours, theirs, atol=64 * eps * float(theirs.detach().abs().max()), rtol=16 * eps)


def test_sparse_table_gradient_holds_the_read_rows_once():
    d, config = CASES[2]
    enc = _grid(d, {**config, "log2_hashmap_size": 14})  # 4 levels: more rows than a small batch reads
    x = _inputs(50, d, torch.float32)
    grad = torch.randn(50, enc.n_output_dims)
    accumulator = torch.zeros_like(enc.params.detach())
    params = enc.params.detach().clone().requires_grad_()
    out = grid_encoding(x, params, enc.levels, 2, "Linear", "cpp", sparse_accumulator=lambda: accumulator)
    (sparse,) = torch.autograd.grad(out, [params], grad)
    _, _, dense = _encode_and_grads(enc, x, "torch", grad)
    assert sparse.is_sparse and sparse._nnz() < params.numel() / 4
    index = sparse._indices()[0]
    assert index.unique().numel() == index.numel()  # each element once, as is_coalesced claims
    assert set(index.tolist()) == set(dense.nonzero()[:, 0].tolist())  # exactly the rows with a gradient
    torch.testing.assert_close(sparse.to_dense(), dense, atol=1e-6, rtol=1e-5)
    assert not accumulator.any()  # the workspace is handed back zeroed


def test_empty_batch():
    d, config = CASES[1]
    enc = _grid(d, config)
    x = torch.zeros(0, d, requires_grad=True)
    out = grid_encoding(x, enc.params, enc.levels, 2, "Linear", "cpp")
    out.sum().backward()
    assert out.shape == (0, enc.n_output_dims) and x.grad.shape == (0, d) and not enc.params.grad.any()


def test_second_derivatives_go_through_the_torch_path():
    d, config = CASES[1]
    enc = _grid(d, config, dtype=torch.float64)
    x = _inputs(40, d, torch.float64)
    results = []
    for kernel in ("cpp", "torch"):
        out = grid_encoding(x, enc.params, enc.levels, 2, "Linear", kernel)
        (gx,) = torch.autograd.grad(out.square().sum(), [x], create_graph=True)
        results.append(torch.autograd.grad(gx.sin().sum(), [x, enc.params]))
    for ours, theirs in zip(*results):
        torch.testing.assert_close(ours, theirs)


def test_backward_keeps_no_index_tensor():
    d, config = CASES[2]
    enc = _grid(d, config)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        grid_encoding(_inputs(1000, d, torch.float32), enc.params, enc.levels, 2, "Linear", "cpp")
    assert saved and all(t.dtype != torch.int64 and t.numel() <= max(1000 * d, enc.params.numel()) for t in saved)


def test_auto_picks_the_kernel_on_cpu_and_encoders_use_it():
    d, config = CASES[1]
    x = _inputs(20, d, torch.float32)
    fused = build_encoder({"otype": "HashGrid", "n_levels": 4}, d)
    plain = build_encoder({"otype": "HashGrid", "n_levels": 4}, d, backend="torch")
    assert choose_backend(fused, x).backend == "cpp"
    assert choose_backend(fused, x.half()).backend == "torch"  # float16: the torch path
    plain.load_state_dict(fused.state_dict())
    torch.testing.assert_close(fused(x), plain(x), atol=1e-6, rtol=1e-5)
    assert fused.last_backend.backend == "cpp" and plain.last_backend.backend == "torch"


def test_failed_build_falls_back_with_one_line(monkeypatch, capsys):
    def broken_load(**kwargs):
        raise RuntimeError("Error building extension 'inr_enc_grid_cpu'\nc++: command not found")

    monkeypatch.setattr("torch.utils.cpp_extension.load", broken_load)
    cpp_extension.build_extension.cache_clear()
    try:
        x = _inputs(20, 2, torch.float32)
        assert kernel_unavailable_reason("cpp", x) == "the fused CPU kernel did not build here"
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "PyTorch path" in err and "Traceback" not in err
        d, config = CASES[1]
        with pytest.raises(ValueError, match="backend 'cpp' unavailable: the fused CPU kernel did not build here"):
            build_encoder({"otype": "HashGrid", "n_levels": 4}, d, backend="cpp")(x)
        enc = _grid(d, config)  # the encoder still works, on the torch path
        torch.testing.assert_close(enc(x), torch_grid_encoding(x, enc.params, enc.levels, 2, "Linear"))
        assert enc.last_backend.backend == "torch" and "did not build" in enc.last_backend.reason
    finally:
        cpp_extension.build_extension.cache_clear()


def test_each_checkout_of_the_sources_gets_its_own_build(monkeypatch, tmp_path):
    # torch's build rules name the source paths: two checkouts sharing one build folder would rebuild in turn
    built = []
    monkeypatch.setattr("torch.utils.cpp_extension.load", lambda name, **kwargs: built.append(name) or name)
    copies = []
    for checkout in ("before", "after"):
        (tmp_path / checkout).mkdir()
        copies.append(tmp_path / checkout / "kernel.cpp")
        copies[-1].write_text("int answer() { return 42; }\n")
    cpp_extension.build_extension.cache_clear()
    try:
        for source in (*copies, copies[0]):
            cpp_extension.build_extension.cache_clear()
            cpp_extension.build_extension("kernel", (str(source),))
    finally:
        cpp_extension.build_extension.cache_clear()
    assert built[0] != built[1] and built[0] == built[2]


def test_results_do_not_depend_on_the_thread_count():
    d, config = CASES[2]
    enc = _grid(d, config)
    x = _inputs(5000, d, torch.float32)
    grad = torch.randn(5000, enc.n_output_dims, generator=torch.Generator().manual_seed(4))
    threads = torch.get_num_threads()
    try:
        results = []
        for n_threads in (4, 1):  # levels and sample blocks split differently: the sums must not change
            torch.set_num_threads(n_threads)
            results.append([t.clone() for t in _encode_and_grads(enc, x, "cpp", grad)])
    finally:
        torch.set_num_threads(threads)
    for ours, theirs in zip(*results):
        torch.testing.assert_close(ours, theirs, atol=0, rtol=0)


def test_output_takes_in_place_operations():
    d, config = CASES[1]
    enc = _grid(d, config)
    x = _inputs(300, d, torch.float32)
    out = grid_encoding(x, enc.params, enc.levels, 2, "Linear", "cpp")
    expected = torch_grid_encoding(x, enc.params, enc.levels, 2, "Linear") + 1
    torch.nn.functional.relu(out.add_(1), inplace=True).sum().backward()
    torch.testing.assert_close(out, expected.relu(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("d, interpolation, f", [(1, "Linear", 1), (2, "Smoothstep", 4), (3, "Nearest", 2),
                                                 (7, "Linear", 8)])
def test_sparse_gradient_is_exact(d, interpolation, f, monkeypatch):
    monkeypatch.setattr(cpu_kernel, "SPARSE_BELOW_READS_PER_ROW", float("inf"))  # sparse even where dense is cheaper
    enc = _grid(d, {"type": "Hash", "n_levels": 3, "log2_hashmap_size": 14, "base_resolution": 2,
                    "per_level_scale": 2.0}, f, interpolation, torch.float64)
    x = _inputs(20, d, torch.float64)
    grad = torch.randn(20, enc.n_output_dims, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    accumulator = torch.zeros_like(enc.params.detach())
    params = enc.params.detach().clone().requires_grad_()
    out = grid_encoding(x, params, enc.levels, f, interpolation, "cpp", sparse_accumulator=lambda: accumulator)
    (sparse,) = torch.autograd.grad(out, [params], grad)
    _, _, dense = _encode_and_grads(enc, x, "torch", grad)
    index = sparse._indices()[0]
    assert sparse.is_sparse and index.unique().numel() == index.numel()  # each element once
    torch.testing.assert_close(sparse.to_dense(), dense, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close((sparse + sparse).to_dense(), 2 * dense, atol=1e-12, rtol=1e-12)
    assert not accumulator.any()


def test_reused_buffers_never_overwrite_a_live_output_or_gradient():
    d, config = CASES[2]
    enc = _grid(d, config)
    x = _inputs(400, d, torch.float32)
    kept_out = grid_encoding(x, enc.params, enc.levels, 2, "Linear", "cpp")
    kept_out.sum().backward()
    kept_grad, expected_out, expected_grad = enc.params.grad, kept_out.detach().clone(), enc.params.grad.clone()
    enc.params.grad = None
    for seed in range(3):  # later steps with other inputs, while the first step's tensors are still held
        other = torch.rand(400, d, generator=torch.Generator().manual_seed(seed))
        (grid_encoding(other, enc.params, enc.levels, 2, "Linear", "cpp") * seed).sum().backward()
        enc.params.grad = None
    assert torch.equal(kept_out, expected_out) and torch.equal(kept_grad, expected_grad)
    _, _, reference = _encode_and_grads(enc, x, "torch", torch.ones_like(kept_out))
    torch.testing.assert_close(kept_grad, reference, atol=1e-5, rtol=1e-5)
