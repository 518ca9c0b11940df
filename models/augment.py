"""Voice perturbation for training: new speakers from the ones the train set has.

SLURP-TTS test voices come from engines the train set never heard (Piper, SVOX Pico, Festival's
HTS voice), and the device model's WER on them is about twice that on the held-out espeak-ng
accents. Two cheap changes of the log-mel features stand in for new voices:

- vocal tract length perturbation (VTLP, Jaitly & Hinton 2013): the frequency axis is scaled by
  a random factor per utterance (Kaldi's piecewise-linear VTLN warp, so the band edge stays put),
  which moves formants as a longer or shorter vocal tract would;
- spectral tilt: a random smooth gain across the mel bands per utterance (two cosine terms),
  standing in for the colouring of each engine's vocoder and each microphone.

Both act on un-normalised log-mel energies: features arrive CMVN-normalised, are taken back
with the training CMVN, changed, and normalised again. Padded frames stay zero.
"""

import math

import numpy as np
import torch

from pasu.core.audio import SAMPLE_RATE_HZ
from pasu.speech.frontend import NUM_MEL_BINS, GlobalCmvn

# kaldi-native-fbank's defaults, which `device.frontend.fbank_options` keeps.
LOW_FREQ_HZ = 20.0
HIGH_FREQ_HZ = SAMPLE_RATE_HZ / 2
# Below this share of the band the warp is a plain scaling; above it, it bends back to the edge.
_KNEE = 0.8
_NATS_PER_DB = math.log(10) / 10


def _mel(hz: np.ndarray) -> np.ndarray:
    return 1127.0 * np.log1p(hz / 700.0)


def _hz(mel: np.ndarray) -> np.ndarray:
    return 700.0 * np.expm1(mel / 1127.0)


def mel_bin_centres(bins: int = NUM_MEL_BINS) -> np.ndarray:
    """Centre frequency (Hz) of each mel band, as Kaldi places them."""
    low, high = _mel(np.array(LOW_FREQ_HZ)), _mel(np.array(HIGH_FREQ_HZ))
    step = (high - low) / (bins + 1)
    return _hz(low + step * np.arange(1, bins + 1))


def source_positions(factors: torch.Tensor, bins: int = NUM_MEL_BINS) -> torch.Tensor:
    """For each warp factor (B,), the fractional band index (B, bins) that each output band
    reads from: a speaker warped by α has at frequency g what the original had at g/α."""
    low, high = _mel(np.array(LOW_FREQ_HZ)), _mel(np.array(HIGH_FREQ_HZ))
    step = float((high - low) / (bins + 1))
    centres = torch.as_tensor(mel_bin_centres(bins), dtype=torch.float64, device=factors.device)
    alpha = factors.to(torch.float64)[:, None]
    knee = _KNEE * HIGH_FREQ_HZ * torch.clamp(1.0 / alpha, max=1.0)
    warped_knee = alpha * knee
    below = centres / alpha
    above = knee + (centres - warped_knee) * (HIGH_FREQ_HZ - knee) / (HIGH_FREQ_HZ - warped_knee)
    source_hz = torch.where(centres <= warped_knee, below, above)
    source_mel = 1127.0 * torch.log1p(source_hz / 700.0)
    position = (source_mel - float(low)) / step - 1.0
    return position.clamp(0.0, bins - 1.0).to(torch.float32)


def warp_bands(features: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Linear interpolation of (B, T, bins) features at per-utterance band positions (B, bins)."""
    bins = features.shape[-1]
    lower = positions.floor().long().clamp(max=bins - 2)
    weight = (positions - lower.to(positions.dtype))[:, None, :]
    frames = features.shape[1]
    lower_index = lower[:, None, :].expand(-1, frames, -1)
    below = features.gather(2, lower_index)
    above = features.gather(2, lower_index + 1)
    return below + weight * (above - below)


def tilt_curves(amplitudes: torch.Tensor, bins: int = NUM_MEL_BINS) -> torch.Tensor:
    """Smooth gains (B, bins) in log energy: Σ_k a_k cos(π k m / (bins − 1)), k = 1..K."""
    orders = torch.arange(1, amplitudes.shape[1] + 1, device=amplitudes.device, dtype=torch.float32)
    bands = torch.arange(bins, device=amplitudes.device, dtype=torch.float32) / (bins - 1)
    basis = torch.cos(math.pi * orders[:, None] * bands[None, :])  # (K, bins)
    return amplitudes @ basis


class VoicePerturbation(torch.nn.Module):
    """Random VTLP warp and spectral tilt per utterance of a CMVN-normalised batch.

    `warp`: factors are drawn uniformly from [1 − warp, 1 + warp]; `tilt_db`: each cosine term's
    amplitude is drawn uniformly from ±tilt_db; `probability`: share of utterances changed."""

    def __init__(
        self,
        mean: np.ndarray,
        std: np.ndarray,
        warp: float = 0.1,
        tilt_db: float = 3.0,
        probability: float = 0.8,
        tilt_terms: int = 2,
    ):
        super().__init__()
        if not 0.0 <= warp < 0.5:
            raise ValueError(f"warp must be in [0, 0.5), got {warp}")
        self.register_buffer("mean", torch.as_tensor(np.asarray(mean, np.float32)))
        self.register_buffer("std", torch.as_tensor(np.maximum(np.asarray(std, np.float32), 1e-5)))
        self.warp, self.tilt_db, self.probability = warp, tilt_db, probability
        self.tilt_terms = tilt_terms

    @property
    def active(self) -> bool:
        return self.probability > 0 and (self.warp > 0 or self.tilt_db > 0)

    def forward(
        self, features: torch.Tensor, lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.active:
            return features, lengths
        batch, device = features.shape[0], features.device
        chosen = torch.rand(batch, device=device) < self.probability
        factors = 1.0 + self.warp * (2.0 * torch.rand(batch, device=device) - 1.0)
        factors = torch.where(chosen, factors, torch.ones_like(factors))
        amplitudes = (
            self.tilt_db
            * _NATS_PER_DB
            * (2.0 * torch.rand(batch, self.tilt_terms, device=device) - 1.0)
        )
        amplitudes = amplitudes * chosen[:, None]
        energies = features * self.std + self.mean
        if self.warp > 0:
            energies = warp_bands(energies, source_positions(factors, features.shape[-1]))
        energies = energies + tilt_curves(amplitudes, features.shape[-1])[:, None, :]
        perturbed = (energies - self.mean) / self.std
        frames = torch.arange(features.shape[1], device=device)[None, :]
        valid = (frames < lengths.to(device)[:, None])[:, :, None]
        return torch.where(valid, perturbed, torch.zeros_like(perturbed)), lengths


def build_voice_perturbation(
    cmvn: GlobalCmvn, warp: float, tilt_db: float
) -> VoicePerturbation | None:
    """The trainers' augmentation for features normalised by `cmvn`, or None when both ranges
    are zero (the shipped recipe)."""
    if warp <= 0 and tilt_db <= 0:
        return None
    return VoicePerturbation(cmvn.mean, 1.0 / cmvn.inv_std, warp=warp, tilt_db=tilt_db)
