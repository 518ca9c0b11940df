"""Streaming feature extraction: 80-dim log-mel filterbanks (25 ms / 10 ms) with global CMVN.

Features computed chunk by chunk as audio arrives equal those of the whole utterance: frames
are cut with Kaldi's `snip_edges` convention (a frame is emitted once its 25 ms are there) and
without dither, so the split points do not matter.
"""

from pathlib import Path

import kaldi_native_fbank as knf
import numpy as np

from pasu.core.audio import SAMPLE_RATE_HZ

NUM_MEL_BINS = 80
FRAME_SHIFT_MS = 10
FRAME_LENGTH_MS = 25
# Kaldi's convention: waveforms in 16-bit integer scale.
_WAVEFORM_SCALE = 32768.0


def fbank_options() -> knf.FbankOptions:
    options = knf.FbankOptions()
    options.frame_opts.samp_freq = SAMPLE_RATE_HZ
    options.frame_opts.frame_shift_ms = FRAME_SHIFT_MS
    options.frame_opts.frame_length_ms = FRAME_LENGTH_MS
    options.frame_opts.dither = 0.0
    options.frame_opts.snip_edges = True
    options.mel_opts.num_bins = NUM_MEL_BINS
    return options


class GlobalCmvn:
    """Per-dimension mean and standard deviation of the training features."""

    def __init__(self, mean: np.ndarray, std: np.ndarray):
        self.mean = np.asarray(mean, np.float32)
        self.inv_std = (1.0 / np.maximum(np.asarray(std, np.float32), 1e-5)).astype(np.float32)

    @classmethod
    def load(cls, path: Path) -> "GlobalCmvn":
        with np.load(path) as stats:
            return cls(stats["mean"], stats["std"])

    def save(self, path: Path) -> None:
        np.savez(path, mean=self.mean, std=1.0 / self.inv_std)

    def __call__(self, features: np.ndarray) -> np.ndarray:
        return (features - self.mean) * self.inv_std


class StreamingFbank:
    """Turns audio chunks into the feature frames that became ready with each chunk."""

    def __init__(self, cmvn: GlobalCmvn | None = None):
        self._fbank = knf.OnlineFbank(fbank_options())
        self._cmvn = cmvn
        self._emitted = 0

    def accept(self, samples: np.ndarray) -> np.ndarray:
        """Feed 16 kHz float samples in [-1, 1]; returns (new_frames, 80) float32."""
        if len(samples):
            self._fbank.accept_waveform(SAMPLE_RATE_HZ, samples * _WAVEFORM_SCALE)
        return self._take_ready()

    def _take_ready(self) -> np.ndarray:
        ready = self._fbank.num_frames_ready
        if ready == self._emitted:
            return np.zeros((0, NUM_MEL_BINS), np.float32)
        frames = np.stack([self._fbank.get_frame(i) for i in range(self._emitted, ready)])
        self._emitted = ready
        frames = frames.astype(np.float32, copy=False)
        return self._cmvn(frames) if self._cmvn is not None else frames

    @property
    def frames_emitted(self) -> int:
        return self._emitted


def compute_fbank(samples: np.ndarray, cmvn: GlobalCmvn | None = None) -> np.ndarray:
    """Features of a whole utterance; identical to streaming the same samples."""
    return StreamingFbank(cmvn).accept(np.asarray(samples, np.float32))
