"""Fitting signals (inr-fit's engine): reading and writing signals (``signals``), the image and audio
tasks (``image``, ``audio``), the fit loop with checkpoints (``loop``), what a run writes (``outputs``) and one
whole run from a resolved config (``run``)."""
