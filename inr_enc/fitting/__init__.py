"""Fitting signals (inr-fit's engine): the tasks and their registry (``tasks``: image, audio), reading and writing
signals (``signals``), the fit loop for one model or a batch (``loop``, ``problem``, ``checkpoints``), groups of
files fitted together (``batched``), what a run writes (``outputs``), one whole run from a resolved config
(``run``) and every file of a folder (``dataset``)."""
