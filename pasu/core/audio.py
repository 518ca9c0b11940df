"""Reading and validating audio input: everything becomes 16 kHz mono float32 in [-1, 1]."""

import io
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from pasu.core.errors import AudioError

SAMPLE_RATE_HZ = 16_000

AudioSource = str | Path | bytes | np.ndarray


def load_audio(source: str | Path | bytes, target_rate_hz: int = SAMPLE_RATE_HZ) -> np.ndarray:
    """Decode a file path or encoded bytes (WAV, FLAC, OGG, ...) to mono float32 at target rate."""
    if isinstance(source, bytes):
        if not source:
            raise AudioError("audio is empty (0 bytes)")
        handle, name = io.BytesIO(source), "<bytes>"
    else:
        path = Path(source)
        if not path.is_file():
            raise AudioError(f"audio file not found: {path}")
        handle, name = path, str(path)
    try:
        samples, rate_hz = sf.read(handle, dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError) as error:
        raise AudioError(f"cannot decode audio {name}: {error}") from None
    return to_mono(samples, rate_hz, target_rate_hz)


def to_mono(samples: np.ndarray, rate_hz: int, target_rate_hz: int = SAMPLE_RATE_HZ) -> np.ndarray:
    """Mix (frames, channels) or (frames,) samples down to mono float32 and resample."""
    if rate_hz <= 0:
        raise AudioError(f"invalid sample rate {rate_hz} Hz")
    mono = samples.mean(axis=1) if samples.ndim == 2 else samples
    mono = np.ascontiguousarray(mono, dtype=np.float32)
    if rate_hz != target_rate_hz and mono.size:
        mono = soxr.resample(mono, rate_hz, target_rate_hz).astype(np.float32, copy=False)
    return mono


def write_flac(path: Path, samples: np.ndarray, rate_hz: int = SAMPLE_RATE_HZ) -> None:
    """Write 16-bit FLAC atomically, so an interrupted job never leaves a truncated clip behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    sf.write(partial, np.clip(samples, -1.0, 1.0), rate_hz, format="FLAC", subtype="PCM_16")
    partial.replace(path)
