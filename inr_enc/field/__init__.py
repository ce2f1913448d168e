"""Fields, the layer above encoders and networks: a run config resolved (``schema``: the field's encoding and
network, training, task; ``tcnn_sections``: tcnn's loss and optimizer sections), built (``field``: ``Field``),
batched (``batch``: ``FieldBatch``, M fields as one computation) and laid out as tcnn's flat parameters
(``tcnn_layout``)."""

from .field import Field, build_field

__all__ = ["Field", "build_field"]
