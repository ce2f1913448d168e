"""How a fit stops early, as exceptions the command line maps to exit codes (imports nothing heavy, so inr-fit
can catch them around its first imports)."""

from __future__ import annotations


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped a fit after its checkpoint was saved: ``--resume`` continues it."""


class Diverged(Exception):
    """Training produced a non-finite loss, evaluation error or weight at ``step``; the checkpoint on disk (of
    ``checkpoint_step``, None if none was written) is the last good one and is kept."""

    def __init__(self, step: int, what: str, checkpoint_step: int | None) -> None:
        kept = "no checkpoint was written" if checkpoint_step is None else f"the checkpoint of step {checkpoint_step} is kept"
        super().__init__(f"training diverged at step {step} ({what}); {kept}; try a lower training.lr")
        self.step, self.checkpoint_step = step, checkpoint_step
