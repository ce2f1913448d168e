"""How a fit stops early, as exceptions the command line maps to exit codes (imports nothing heavy, so inr-fit
can catch them around its first imports)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_signals: list[int] = []  # SIGINT/SIGTERM received within interrupts_noted()


@contextmanager
def signals_handled_by(handler: Callable[[int, Any], None]) -> Iterator[bool]:
    """Within the block, SIGINT and SIGTERM call ``handler`` (signum, frame); the previous handlers come back
    after it. Yields False, and changes nothing, off the main thread (where Python cannot set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield False
        return
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield True
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _interrupt(signum: int, frame: Any) -> None:
    _signals.append(signum)
    raise KeyboardInterrupt


@contextmanager
def interrupts_noted() -> Iterator[None]:
    """Within the block (on the main thread), SIGINT and SIGTERM raise KeyboardInterrupt (SIGTERM as Ctrl-C) and
    are noted for :func:`raise_if_interrupted`; the previous handlers come back after it."""
    _signals.clear()
    with signals_handled_by(_interrupt):
        yield


def raise_if_interrupted() -> None:
    """KeyboardInterrupt if a signal came in within :func:`interrupts_noted`, so a library that swallowed the one
    raised while it ran (while torch or a kernel loads) cannot make inr-fit miss it."""
    if _signals:
        raise KeyboardInterrupt


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped a fit after its checkpoint was saved: ``--resume`` continues it."""


class Diverged(Exception):
    """Training produced a non-finite loss, evaluation error or weight at ``step``; the checkpoint on disk (of
    ``checkpoint_step``, None if none was written) is the last good one and is kept."""

    def __init__(self, step: int, what: str, checkpoint_step: int | None) -> None:
        kept = ("no checkpoint was written" if checkpoint_step is None
                else f"the checkpoint of step {checkpoint_step} is kept")
        super().__init__(f"training diverged at step {step} ({what}); {kept}; try a lower training.lr")
        self.step, self.checkpoint_step = step, checkpoint_step
