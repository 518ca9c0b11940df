"""Streaming encoder: convolution blocks on each new segment, attention blocks on demand.

Late contextualization (PASU §3.1): `accept` runs subsampling and the convolution-only blocks
on the feature frames that just arrived, keeping the causal-convolution caches and the few
frames the subsampler still needs; `contextualize` runs the attention blocks and CTC over
everything ingested so far, for a pilot or for the final decode.
"""

import numpy as np

from pasu.device.model import DeviceModel
from pasu.speech.subsampling import SUBSAMPLING, subsampled_length


class StreamingEncoder:
    """Per-utterance encoder state on top of a shared `DeviceModel`."""

    def __init__(self, model: DeviceModel):
        self.model = model
        self._caches = model.initial_caches()
        self._pending = np.zeros((0, model.cmvn.mean.shape[0]), np.float32)
        self._chunks: list[np.ndarray] = []
        self._frames: np.ndarray | None = None

    def accept(self, features: np.ndarray) -> int:
        """Ingest CMVN-normalised feature frames; returns how many encoder frames were added."""
        self._pending = (
            np.concatenate([self._pending, features]) if len(self._pending) else features
        )
        new = subsampled_length(len(self._pending))
        if new == 0:
            return 0
        frames, self._caches = self.model.conv_stack(self._pending, self._caches)
        self._chunks.append(frames)
        self._frames = None
        self._pending = self._pending[SUBSAMPLING * new :]
        return new

    @property
    def frames(self) -> np.ndarray:
        """All ingested encoder frames (T, d)."""
        if self._frames is None:
            d = self.model.info.d_model
            self._frames = (
                np.concatenate(self._chunks) if self._chunks else np.zeros((0, d), np.float32)
            )
            self._chunks = [self._frames] if len(self._frames) else []
        return self._frames

    @property
    def num_frames(self) -> int:
        return len(self.frames)

    def contextualize(self) -> tuple[np.ndarray, np.ndarray]:
        """Attention blocks + CTC over all ingested frames."""
        return self.model.encoder_top(self.frames)
