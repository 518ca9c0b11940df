"""Per-rendition signal processing: speed and pitch, silence, level, room and noise.

Applied identically to every engine's output, so renditions differ in the same ways whatever
the engine. All randomness comes from the generator passed in (seeded per clip).
"""

import subprocess
from pathlib import Path

import numpy as np
from scipy.fft import next_fast_len
from scipy.signal import fftconvolve

from pasu.core.audio import SAMPLE_RATE_HZ
from pasu.core.errors import SynthesisError

from .rooms import Room


def resample_speed_pitch(wav: Path, speed: float, pitch_semitones: float) -> np.ndarray:
    """Read an engine's WAV as 16 kHz float32, with tempo (`speed`×) and pitch shifted by sox."""
    command = [
        "sox",
        "-V1",
        str(wav),
        "-t",
        "raw",
        "-e",
        "floating-point",
        "-b",
        "32",
        "-c",
        "1",
        "-r",
        str(SAMPLE_RATE_HZ),
        "-",
        "pitch",
        f"{100 * pitch_semitones:.1f}",
        "tempo",
        "-s",
        f"{speed:.4f}",
    ]
    try:
        done = subprocess.run(command, capture_output=True, timeout=60, check=False)
    except FileNotFoundError:
        raise SynthesisError("sox is not installed (see scripts/install-system-deps.sh)") from None
    except subprocess.TimeoutExpired:
        raise SynthesisError(f"sox did not finish within 60 s on {wav.name}") from None
    if done.returncode != 0:
        raise SynthesisError(f"sox failed on {wav.name}: {done.stderr.decode().strip()}")
    return np.frombuffer(done.stdout, dtype=np.float32).copy()


def trim_silence(samples: np.ndarray, threshold_db: float = -45.0, frame: int = 160) -> np.ndarray:
    """Cut leading and trailing frames quieter than `threshold_db` below the loudest frame."""
    n = len(samples) // frame
    if n == 0:
        return samples
    energy = (samples[: n * frame].reshape(n, frame) ** 2).mean(axis=1)
    if energy.max() == 0.0:
        raise SynthesisError("the engine produced silence")
    loud = np.flatnonzero(energy > energy.max() * 10 ** (threshold_db / 10))
    start, end = loud[0] * frame, (loud[-1] + 1) * frame
    return samples[start:end]


def pad_silence(samples: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Leading and trailing silence as around real commands (0.15–0.5 s before, 0.2–0.6 s after)."""
    before = int(rng.uniform(0.15, 0.5) * SAMPLE_RATE_HZ)
    after = int(rng.uniform(0.2, 0.6) * SAMPLE_RATE_HZ)
    return np.concatenate([np.zeros(before, np.float32), samples, np.zeros(after, np.float32)])


def colored_noise(length: int, rng: np.random.Generator) -> np.ndarray:
    """Stationary noise with a random spectral slope (white to brown), sometimes with mains hum."""
    slope = rng.uniform(0.0, 2.0)
    fft_length = next_fast_len(length, real=True)
    spectrum = np.fft.rfft(rng.standard_normal(fft_length))
    freqs = np.fft.rfftfreq(fft_length, 1 / SAMPLE_RATE_HZ)
    spectrum *= 1.0 / np.maximum(freqs, 20.0) ** (slope / 2)
    noise = np.fft.irfft(spectrum, n=fft_length)[:length]
    if rng.random() < 0.3:
        t = np.arange(length) / SAMPLE_RATE_HZ
        mains = rng.choice([50.0, 60.0])
        hum = sum(np.sin(2 * np.pi * mains * k * t + rng.uniform(0, 6.3)) / k for k in (1, 2, 3))
        noise = noise / noise.std() + rng.uniform(0.2, 1.0) * hum / hum.std()
    return (noise / (noise.std() + 1e-12)).astype(np.float32)


def active_speech_power(samples: np.ndarray, frame: int = 320, floor_db: float = -40.0) -> float:
    """Mean power over the frames within `floor_db` of the loudest (silence excluded, as P.56)."""
    n = max(len(samples) // frame, 1)
    energy = (np.resize(samples, n * frame).reshape(n, frame) ** 2).mean(axis=1)
    active = energy[energy > energy.max() * 10 ** (floor_db / 10)]
    return float(active.mean()) + 1e-12


def add_noise(samples: np.ndarray, snr_db: float, rng: np.random.Generator) -> np.ndarray:
    """Mix in noise so that active speech power / noise power equals `snr_db`."""
    speech_power = active_speech_power(samples)
    noise = colored_noise(len(samples), rng)
    return samples + noise * np.sqrt(speech_power / 10 ** (snr_db / 10))


def reverberate(samples: np.ndarray, room: Room) -> np.ndarray:
    """Convolve with the room's impulse response, keeping up to 0.3 s of reverberant tail."""
    wet = fftconvolve(samples, room.rir)[: len(samples) + int(0.3 * SAMPLE_RATE_HZ)]
    return wet.astype(np.float32)


def set_peak_level(samples: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Scale to a random peak between -6 and -1 dBFS, as recordings arrive at varied levels."""
    peak = float(np.abs(samples).max())
    if peak == 0.0:
        raise SynthesisError("the engine produced silence")
    return (samples * (10 ** (rng.uniform(-6.0, -1.0) / 20) / peak)).astype(np.float32)
