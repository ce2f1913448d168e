"""Many fields of one config as one computation (functa, COIN++): M small signals fitted together.

The networks' weights are stacked (``torch.func.stack_module_state``) and run with ``functional_call`` under
``vmap``, so each layer is one batched matmul over the M models; grid tables are stacked into one grid
(encoders/grid.py ``stack_grids``) whose kernels read model m's table for model m's samples. Every model keeps
its own parameters and gradients: trained with the sum of the per-model losses under Adam (elementwise), each
follows the run it would have alone.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from torch import nn

from ..encoders.grid import Grid, stack_grids
from .field import Field
from .schema import FieldSpec

# Floats of one chunk's widest activations (4 MiB): measured on 2 cores with SIREN widths 32, 64 and 256 on 1024
# samples per model, chunks of 2^20 floats ran 1.3x to 1.7x faster than all 64 models at once, whose
# activations (16 to 64 MiB each) fall out of the cache between the elementwise passes.
CHUNK_FLOATS = 1 << 20


def batching_unavailable_reason(field: Field) -> str | None:
    """Why fields like ``field`` cannot be fitted as one computation, or None when they can."""
    network, encoder = field.network, field.encoder
    if network.reads_coordinates or network.has_levels or network.solves_closed_form:
        return f"its {network.otype} network routes samples, has levels or is solved in closed form"
    if not isinstance(encoder, Grid) and any(True for _ in encoder.parameters()):
        return f"its {encoder.otype} encoding has trained parameters that are not a grid table"
    return None


class FieldBatch(nn.Module):
    """M fields of one config: x [M, n, n_input_dims] -> [M, n, n_output_dims], model m reading x[m].

    ``fields``: built from the same config (and seed, as a folder fit builds them); their parameters are
    copied. Encodings without parameters are shared (their buffers must be equal); grid tables are stacked.
    ``field(m)`` gives model m back as a standalone :class:`Field`.
    """

    def __init__(self, fields: list[Field]) -> None:
        super().__init__()
        first = fields[0]
        if any(f.config != first.config
               or (f.n_input_dims, f.n_output_dims) != (first.n_input_dims, first.n_output_dims) for f in fields):
            raise ValueError("FieldBatch: every field needs the same config and input and output widths")
        reason = batching_unavailable_reason(first)
        if reason is not None:
            raise ValueError(f"FieldBatch: fields cannot be batched: {reason}")
        self.n_models, self.n_input_dims, self.n_output_dims = len(fields), first.n_input_dims, first.n_output_dims
        self.spec = FieldSpec.of_resolved(first.config, first.n_input_dims, first.n_output_dims)  # resolved once
        if isinstance(first.encoder, Grid):
            self.encoder = stack_grids([f.encoder for f in fields])
        else:
            shared = first.encoder.state_dict()
            if any(any(not torch.equal(v, f.encoder.state_dict()[k]) for k, v in shared.items()) for f in fields):
                raise ValueError("FieldBatch: the fields' encoder buffers differ (build them with one seed)")
            self.encoder = copy.deepcopy(first.encoder)
        params, buffers = torch.func.stack_module_state([f.network for f in fields])
        self.network_params = nn.ParameterDict({_key(k): nn.Parameter(v) for k, v in params.items()})
        for name, value in buffers.items():
            self.register_buffer(f"network_{_key(name)}", value)
        self._buffer_names = list(buffers)
        # the module whose forward is called with each model's tensors: kept out of this module's parameters
        self.__dict__["_network"] = copy.deepcopy(first.network).to("meta")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [M, n, n_input_dims] in [0, 1] -> [M, n, n_output_dims]."""
        return self.networks(self.encode(x))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """x: [M, n, n_input_dims] -> the encodings [M, n, encoder width]."""
        if x.dim() != 3 or x.shape[0] != self.n_models or x.shape[2] != self.n_input_dims:
            raise ValueError(f"FieldBatch: x must have shape [{self.n_models}, n, {self.n_input_dims}], "
                             f"got {list(x.shape)}")
        m, n, d = x.shape
        return self.encoder(x.reshape(m * n, d)).reshape(m, n, -1)

    def networks(self, features: torch.Tensor, params: dict[str, torch.Tensor] | None = None,
                 models: slice = slice(None)) -> torch.Tensor:
        """features [m, n, W] of ``models`` (default all M) -> [m, n, n_output_dims], with ``params`` (as
        :meth:`network_parameters` names them, sliced to ``models``) or the stacked parameters."""
        params = params if params is not None else {k: v[models] for k, v in self.network_parameters().items()}
        buffers = {name: getattr(self, f"network_{_key(name)}")[models] for name in self._buffer_names}
        return torch.func.vmap(self._one_network)(params, buffers, features)

    def network_parameters(self) -> dict[str, nn.Parameter]:
        """The stacked network parameters [M, ...] by the network's own parameter names ("layers.0.weight")."""
        return {name: self.network_params[_key(name)] for name, _ in self._network.named_parameters()}

    def matrix_parameters(self) -> list[nn.Parameter]:
        """The stacked weight matrices of the networks' nn.Linear layers ([M, out, in]), as Field.matrix_parameters."""
        return [self.network_params[_key(f"{name}.weight" if name else "weight")]
                for name, module in self._network.named_modules() if isinstance(module, nn.Linear)]

    def models_per_chunk(self, rows: int) -> int:
        """Models whose network activations for ``rows`` samples each (rows x the widest layer, CHUNK_FLOATS in
        all) stay in a CPU's cache: training runs the networks that many at a time."""
        widest = max([p.shape[-2] for p in self.network_params.values() if p.dim() > 2] + [1])
        return max(1, min(self.n_models, CHUNK_FLOATS // max(rows * widest, 1)))

    def backward_losses(self, coords: torch.Tensor, values: torch.Tensor,
                        loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], active: list[bool]) -> torch.Tensor:
        """Each model's mean ``loss`` (prediction, target -> per element) on coords [n, d] (shared) against values
        [M, n, C] -> [M]; the gradients of the sum over the ``active`` models whose loss is finite are accumulated
        into the parameters (each model's gradient is its own loss's). The networks run :meth:`models_per_chunk`
        models at a time (forward and backward: their activations stay in cache), the encoder once for all."""
        n_models = self.n_models
        features = self.encode(coords.expand(n_models, *coords.shape))
        stacked = self.network_parameters()
        grads = {name: torch.zeros_like(p) for name, p in stacked.items()}
        feature_grad = torch.zeros_like(features) if features.requires_grad else None
        losses = []
        chunk = self.models_per_chunk(coords.shape[0])
        for a in range(0, n_models, chunk):
            models = slice(a, a + chunk)
            params = {name: p.detach()[models].requires_grad_() for name, p in stacked.items()}
            part = features.detach()[models].requires_grad_(feature_grad is not None)
            chunk_loss = loss(self.networks(part, params, models).float(), values[models]).mean(dim=(1, 2))
            kept = torch.tensor(active[models], device=chunk_loss.device) & torch.isfinite(chunk_loss)
            torch.where(kept, chunk_loss, 0.0).sum().backward()
            for name, param in params.items():
                if param.grad is not None:
                    grads[name][models] = param.grad
            if feature_grad is not None:
                feature_grad[models] = part.grad
            losses.append(chunk_loss.detach())
        for name, param in stacked.items():
            param.grad = grads[name]
        if feature_grad is not None:  # the encoder's parameters (grid tables): one backward for every model
            features.backward(feature_grad)
        return torch.cat(losses)

    def _one_network(self, params: dict, buffers: dict, features: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(self._network, (params, buffers), (features,))

    def stacked(self, name: str) -> nn.Parameter:
        """The stacked parameter holding every model's copy of the Field parameter ``name`` ("network.layers.0.weight",
        "encoder.params"): [M, *shape], or for a grid table [M * E * F]."""
        part, _, rest = name.partition(".")
        return self.encoder.get_parameter(rest) if part == "encoder" else self.network_params[_key(rest)]

    def field(self, m: int) -> Field:
        """Model ``m`` as a standalone Field (its own copy of the weights, on this batch's device, its encoder on
        the implementation that computed the batch's)."""
        device = next(self.parameters()).device
        chosen = self.encoder.__dict__.get("last_backend")  # the implementation that computed it here, if any
        backend = chosen.backend if chosen is not None else self.encoder.backend
        single = Field(self.n_input_dims, self.n_output_dims, self.spec, backend).to(device)
        with torch.no_grad():
            if isinstance(self.encoder, Grid):
                single.encoder.params.copy_(self.encoder.table(m))
            else:
                single.encoder.load_state_dict(self.encoder.state_dict())
            for name, param in single.network.named_parameters():
                param.copy_(self.network_params[_key(name)][m])
            for name, buffer in single.network.named_buffers():
                buffer.copy_(getattr(self, f"network_{_key(name)}")[m])
        if chosen is not None:  # what computed the encoder (provenance)
            single.encoder.__dict__["last_backend"] = chosen
        return single

    @torch.no_grad()
    def set_field(self, m: int, field: Field) -> None:
        """Model ``m``'s weights from ``field`` (of this batch's config): the inverse of :meth:`field`."""
        for name, param in field.named_parameters():
            stacked = self.stacked(name)
            stacked.view(self.n_models, -1)[m].copy_(param.reshape(-1))
        for name, buffer in field.network.named_buffers():
            getattr(self, f"network_{_key(name)}")[m].copy_(buffer)


def _key(name: str) -> str:
    """A parameter path such as "layers.0.weight" as a module attribute name."""
    return name.replace(".", "__")
