"""The nerfstudio plugin: ns-train methods on inr_enc encoders (``methods``), their Model (``model``) and Field
(``field``). Needs the nerfstudio extra: ``pip install -e ".[nerfstudio]"``."""
