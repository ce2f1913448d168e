"""The one backend dispatcher (encoders/backends.py) and the encoder interface around it: declared implementations,
the backend reaching nested encoders, what ran reported per encoder, covariances for the encoders that read them,
and registration by decorator."""

import pytest
import torch

from inr_enc import ENCODERS, build_encoder
from inr_enc.encoders import Encoder, Hybrid, register_encoder
from inr_enc.encoders.backends import backends_used, choose_backend
from inr_enc.field import Field
from inr_enc.ops.grid import kernel_unavailable_reason

GRID = {"otype": "HashGrid", "n_levels": 2, "log2_hashmap_size": 6, "base_resolution": 4}
HYBRID = {"otype": "Hybrid", "n_levels": 3, "split_level": 1, "log2_hashmap_size": 6, "base_resolution": 3,
          "n_frequencies": 2}
x2 = torch.rand(16, 2, generator=torch.Generator().manual_seed(0))
needs_cpp = pytest.mark.skipif(kernel_unavailable_reason("cpp", x2) is not None, reason="the C++ kernel does not build")


def composite(backend):
    config = {"otype": "Composite",
              "nested": [{**GRID, "n_dims_to_encode": 2}, {"otype": "Frequency", "n_frequencies": 2}]}
    return build_encoder(config, 3, backend)


def test_torch_reaches_a_grid_nested_in_a_composite():
    encoder = composite("torch")
    encoder(torch.rand(8, 3))
    assert backends_used(encoder) == {"": "torch", "encoders.0": "torch", "encoders.1": "torch"}


@needs_cpp
def test_auto_lets_each_nested_encoder_choose():
    encoder = composite("auto")
    encoder(torch.rand(8, 3))
    assert backends_used(encoder) == {"": "torch", "encoders.0": "cpp", "encoders.1": "torch"}
    assert "not tcnn" in encoder.encoders[0].last_backend.reason  # says why, in order


@pytest.mark.parametrize("backend, ran", [("torch", "torch"), pytest.param("cpp", "cpp", marks=needs_cpp),
                                          pytest.param("auto", "cpp", marks=needs_cpp)])
def test_progressive_keeps_the_backend_it_was_given_and_passes_it_on(backend, ran):
    encoder = build_encoder({"otype": "Progressive", "nested": GRID}, 2, backend)
    encoder(x2)
    assert encoder.backend == backend and encoder.nested.backend == backend
    assert backends_used(encoder) == {"": "torch", "nested": ran}


def test_each_encoder_declares_its_implementations_and_torch_always_runs():
    for otype, cls in ENCODERS.items():
        assert "torch" in cls.supported_backends and cls.auto_backends[-1] == "torch", otype
        assert set(cls.auto_backends) <= set(cls.supported_backends), otype


def test_a_backend_the_encoder_lacks_is_refused_at_construction():
    with pytest.raises(ValueError,
                       match=r"Frequency: backend 'cpp' has no implementation of this encoding; it has tcnn, torch"):
        build_encoder({"otype": "Frequency"}, 2, backend="cpp")
    with pytest.raises(ValueError, match="NeRF: backend 'triton' has no implementation"):
        build_encoder({"otype": "Progressive", "nested": {"otype": "NeRF"}}, 2, backend="triton")


def test_a_forced_kernel_that_cannot_run_says_why(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # CPU tensors without the interpreter: no triton
    encoder = build_encoder(GRID, 2, backend="triton")
    with pytest.raises(ValueError, match="HashGrid: backend 'triton' unavailable: .*CUDA"):
        encoder(x2)


def test_a_table_on_another_device_never_reaches_a_kernel():
    table = torch.zeros(8, device="meta")  # stands for a table left on a GPU
    assert kernel_unavailable_reason("cpp", x2, [table]) == "the grid table is on meta, the input on cpu"
    encoder = build_encoder(GRID, 2).to("meta")
    choice = choose_backend(encoder, x2)
    assert choice.backend == "torch" and "not cpp: the grid table is on meta" in choice.reason


def test_a_field_reports_what_ran():
    field = Field(2, 1, {"encoding": GRID}, backend="torch")
    field(x2)
    assert backends_used(field) == {"encoder": "torch"}


def test_cov_goes_to_encoders_that_use_it_and_is_refused_elsewhere():
    assert Hybrid.uses_cov and not ENCODERS["HashGrid"].uses_cov
    with pytest.raises(ValueError, match="HashGrid: this encoder takes no cov"):
        build_encoder(GRID, 2)(x2, torch.zeros(16, 2, 2))
    hybrid = build_encoder(HYBRID, 2, backend="torch")
    cov = torch.eye(2).expand(16, 2, 2) * 1e-3
    wrapped = build_encoder({"otype": "Progressive", "nested": HYBRID, "end_step": 0}, 2, backend="torch")
    wrapped.nested.load_state_dict(hybrid.state_dict())
    assert wrapped.uses_cov
    torch.testing.assert_close(wrapped(x2, cov), hybrid(x2, cov))
    assert not torch.allclose(hybrid(x2, cov), hybrid(x2))  # the covariance changed the features


def test_composite_hands_each_nested_encoder_its_block_of_cov():
    config = {"otype": "Composite", "nested": [{**HYBRID, "n_dims_to_encode": 2}, {"otype": "Identity"}]}
    encoder = build_encoder(config, 3, backend="torch")
    hybrid = build_encoder(HYBRID, 2, backend="torch")
    hybrid.load_state_dict(encoder.encoders[0].state_dict())
    x = torch.rand(16, 3, generator=torch.Generator().manual_seed(1))
    cov = torch.diag_embed(torch.rand(16, 3, generator=torch.Generator().manual_seed(2)) * 1e-3)
    out = encoder(x, cov)
    torch.testing.assert_close(out[:, :hybrid.n_output_dims], hybrid(x[:, :2], cov[:, :2, :2]))
    torch.testing.assert_close(out[:, hybrid.n_output_dims:], x[:, 2:])


def test_a_new_encoding_registers_itself_with_the_decorator():
    @register_encoder()
    class Doubling(Encoder):
        otype = "TestDoubling"
        defaults = {"factor": 2.0}

        @classmethod
        def _resolve(cls, n_input_dims, config):
            return {"factor": float(config["factor"])}

        @classmethod
        def output_dims(cls, n_input_dims, config):
            return n_input_dims

        def encode(self, x, backend="torch", cov=None):
            return x * self._config["factor"]

    try:
        encoder = build_encoder({"otype": "testdoubling", "factor": 3}, 2)  # case-insensitive, like tcnn
        torch.testing.assert_close(encoder(x2), 3 * x2)
        assert encoder.config == {"otype": "TestDoubling", "factor": 3.0} and encoder.last_backend.backend == "torch"
        with pytest.raises(AssertionError, match="registered twice"):
            register_encoder()(Doubling)
    finally:
        ENCODERS._classes.pop("TestDoubling")
