"""Whisper's 80-bin log-mel features, computed while the user speaks.

Whisper's frontend: 25 ms Hann windows every 10 ms (400-point FFT, frames centred with reflect
padding, the last frame dropped), power spectra through 80 Slaney mel filters, log10 with a
1e-10 floor, then `max(x, utterance max - 8)` and `(x + 4) / 4`. The `max - 8` clamp needs the
whole utterance, so it cannot stream: `WhisperLogMel` replaces it with a fixed floor
(`floor_log10`), which fine-tuning absorbs. Frames are emitted as soon as their window holds
no padding; the last few, whose windows reach past the end, when the input finishes. Chunked
features equal whole-utterance features exactly, whatever the chunk sizes.
"""

import numpy as np

SAMPLE_RATE_HZ = 16_000
N_FFT = 400
HOP = 160
N_MELS = 80
LOG10_FLOOR_OF_POWER = -10.0  # log10(1e-10)
# The streaming stand-in for Whisper's (utterance max - 8): that floor for the median clip of
# 200 SLURP-TTS devel clips (their maxima: 0.68-1.85 from p5 to p95, median 1.23). Provisional
# until fine-tuning chooses it on devel.
DEFAULT_FLOOR_LOG10 = -6.8


def _hz_to_slaney_mel(hz: np.ndarray) -> np.ndarray:
    linear = hz / (200.0 / 3)
    logarithmic = 15.0 + np.log(np.maximum(hz, 1e-10) / 1000.0) / (np.log(6.4) / 27.0)
    return np.where(hz >= 1000.0, logarithmic, linear)


def _slaney_mel_to_hz(mel: np.ndarray) -> np.ndarray:
    linear = mel * (200.0 / 3)
    logarithmic = 1000.0 * np.exp((np.log(6.4) / 27.0) * (mel - 15.0))
    return np.where(mel >= 15.0, logarithmic, linear)


def mel_filters(n_mels: int = N_MELS) -> np.ndarray:
    """(n_mels, N_FFT // 2 + 1) triangular filters on the Slaney mel scale, area-normalised,
    from 0 Hz to the Nyquist frequency (librosa's defaults, which Whisper uses)."""
    edges_mel = np.linspace(0.0, _hz_to_slaney_mel(np.array(SAMPLE_RATE_HZ / 2)), n_mels + 2)
    edges_hz = _slaney_mel_to_hz(edges_mel)
    bins_hz = np.fft.rfftfreq(N_FFT, 1.0 / SAMPLE_RATE_HZ)
    rising = (bins_hz[None, :] - edges_hz[:-2, None]) / np.diff(edges_hz)[:-1, None]
    falling = (edges_hz[2:, None] - bins_hz[None, :]) / np.diff(edges_hz)[1:, None]
    weights = np.maximum(0.0, np.minimum(rising, falling))
    return (weights * (2.0 / (edges_hz[2:] - edges_hz[:-2]))[:, None]).astype(np.float32)


_WINDOW = np.hanning(N_FFT + 1)[:-1].astype(np.float32)  # periodic Hann
_FILTERS = mel_filters()


def _log10_mel(frames: np.ndarray) -> np.ndarray:
    """(count, N_FFT) samples → (count, N_MELS) log10 mel power. One frame at a time: batched
    FFTs and matrix products round differently with the batch size, and streamed features
    must equal whole-utterance ones bit for bit (a frame costs ~20 µs)."""
    rows = []
    for frame in frames:
        power = np.abs(np.fft.rfft(frame * _WINDOW)).astype(np.float32) ** 2
        rows.append(np.log10(np.maximum(_FILTERS @ power, 1e-10)))
    return np.array(rows, np.float32).reshape(len(frames), N_MELS)


def _normalise(log_mel: np.ndarray, floor_log10: float) -> np.ndarray:
    return ((np.maximum(log_mel, floor_log10) + 4.0) / 4.0).astype(np.float32)


def _frames(padded: np.ndarray, first: int, count: int) -> np.ndarray:
    starts = (np.arange(count) + first) * HOP
    return padded[starts[:, None] + np.arange(N_FFT)[None, :]]


def whisper_log_mel(audio: np.ndarray, floor_log10: float | None = None) -> np.ndarray:
    """(frames, 80) features of a whole utterance; `floor_log10=None` applies Whisper's own
    `max - 8` clamp (what Whisper was trained with), a number the streaming floor."""
    audio = np.asarray(audio, np.float32)
    if len(audio) < HOP:
        return np.zeros((0, N_MELS), np.float32)
    padded = np.pad(audio, N_FFT // 2, mode="reflect")
    log_mel = _log10_mel(_frames(padded, 0, len(audio) // HOP))
    if floor_log10 is None:
        floor_log10 = float(log_mel.max()) - 8.0 if log_mel.size else LOG10_FLOOR_OF_POWER
    return _normalise(log_mel, floor_log10)


class WhisperLogMel:
    """Streaming features of one utterance: `accept(samples)` returns the frames now complete,
    `finish()` the rest. 16 kHz mono float32 in."""

    def __init__(self, floor_log10: float = DEFAULT_FLOOR_LOG10):
        self.floor_log10 = floor_log10
        self._head = np.zeros(0, np.float32)  # the first samples, until the left pad is known
        self._padded: np.ndarray | None = None  # reflect-padded stream from frame `_next` on
        self._next = 0  # index of the next frame to emit
        self._received = 0

    def accept(self, samples: np.ndarray) -> np.ndarray:
        samples = np.asarray(samples, np.float32)
        self._received += len(samples)
        if self._padded is None:
            self._head = np.concatenate([self._head, samples])
            if len(self._head) <= N_FFT // 2:
                return np.zeros((0, N_MELS), np.float32)
            left = self._head[N_FFT // 2 : 0 : -1]  # numpy's "reflect": the edge sample once
            self._padded, self._head = np.concatenate([left, self._head]), None
        else:
            self._padded = np.concatenate([self._padded, samples])
        ready = (len(self._padded) - N_FFT) // HOP + 1 if len(self._padded) >= N_FFT else 0
        return self._emit(min(ready, self._received // HOP - self._next))

    def finish(self) -> np.ndarray:
        """The frames whose windows reach past the end (reflect-padded there)."""
        if self._received < HOP:
            return np.zeros((0, N_MELS), np.float32)
        if self._padded is None:  # too short to stream: the whole-utterance path
            self._padded = np.pad(self._head, N_FFT // 2, mode="reflect")[: N_FFT // 2]
            self._padded = np.concatenate([self._padded, self._head])
            tail = self._head
        else:
            tail = self._padded[-(N_FFT // 2 + 1) :]
        if len(tail) > N_FFT // 2:
            right = tail[-2 : -(N_FFT // 2) - 2 : -1]
        else:
            right = np.pad(tail, N_FFT // 2, mode="reflect")[-(N_FFT // 2) :]
        self._padded = np.concatenate([self._padded, right])
        return self._emit(self._received // HOP - self._next)

    def _emit(self, count: int) -> np.ndarray:
        if count <= 0:
            return np.zeros((0, N_MELS), np.float32)
        features = _normalise(_log10_mel(_frames(self._padded, 0, count)), self.floor_log10)
        self._padded = self._padded[count * HOP :]
        self._next += count
        return features
