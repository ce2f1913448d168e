"""``--vis tensorboard``: a run's TensorBoard log in <out>/tensorboard (torch.utils.tensorboard's SummaryWriter;
the ``tensorboard`` package is an extra, and nothing is sent anywhere).

Scalars every step: train/loss, train/lr, train/samples_per_s; eval/psnr at each evaluation; at the end
reconstruction.png (images) and comparison.png (images: target | reconstruction | error map; audio: waveform and
spectrogram) as images.
"""

from __future__ import annotations

import numpy as np
from PIL import Image as PILImage

from .problem import StepObserver
from .run_folder import RunFolder

FOLDER = "tensorboard"


def require_tensorboard() -> type:
    """torch's SummaryWriter; ValueError (one line) when the tensorboard package is missing."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # torch raises it when the tensorboard package is not installed
        raise ValueError("--vis tensorboard needs the tensorboard package: "
                         "pip install 'inr_enc[tensorboard]'") from None
    return SummaryWriter


class TensorBoardLog(StepObserver):
    """Logs into ``folder.out``/tensorboard, from training step ``start_step`` on (a resumed run's checkpoint);
    ValueError (one line) when the tensorboard package is missing.

    A new run is staged until its first checkpoint (run_folder.py), and the writer appends to its event file by
    path, so events are kept in memory until the run folder holds the run (:meth:`saved`), then written there."""

    def __init__(self, folder: RunFolder, start_step: int = 0) -> None:
        self._make_writer, self.folder, self.start_step = require_tensorboard(), folder, start_step
        self.writer = None
        self.pending: list[tuple[str, float, int]] = []  # (tag, value, step) not written yet

    def _scalar(self, tag: str, value: float, step: int) -> None:
        if self.writer is None:
            self.pending.append((tag, value, step))
        else:
            self.writer.add_scalar(tag, value, step)

    def step(self, step: int, loss: float, lr: float, samples_per_second: float) -> None:
        self._scalar("train/loss", loss, step)
        self._scalar("train/lr", lr, step)
        self._scalar("train/samples_per_s", samples_per_second, step)

    def evaluation(self, step: int, seconds: float, psnr: float) -> None:
        self._scalar("eval/psnr", psnr, step)

    def saved(self) -> None:
        """A checkpoint was saved: once the run is in its folder, open the log there and write what is pending."""
        if self.writer is None and self.folder.path == self.folder.out:
            # a resumed run drops the events an earlier process logged past its checkpoint (killed after it)
            self.writer = self._make_writer(str(self.folder.out / FOLDER), purge_step=self.start_step + 1)
            for tag, value, step in self.pending:
                self.writer.add_scalar(tag, value, step)
            self.pending.clear()

    def pictures(self, step: int) -> None:
        """The run's PNG pictures (reconstruction.png, comparison.png where written) as images."""
        self.saved()
        for name in ("reconstruction", "comparison"):
            path = self.folder.out / f"{name}.png"
            if path.is_file() and self.writer is not None:
                with PILImage.open(path) as image:
                    pixels = np.asarray(image.convert("RGB"))
                self.writer.add_image(f"pictures/{name}", pixels, step, dataformats="HWC")

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
