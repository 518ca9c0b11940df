"""Voice perturbation (VTLP + spectral tilt) for training: identity at rest, formants move the
right way, padding stays zero, and the trainers take it up."""

import numpy as np
import pytest
import torch

from pasu.models.augment import (
    VoicePerturbation,
    build_voice_perturbation,
    mel_bin_centres,
    source_positions,
    warp_bands,
)
from pasu.speech.frontend import GlobalCmvn

BINS = 80


def _cmvn():
    rng = np.random.default_rng(0)
    return rng.normal(10.0, 2.0, BINS).astype(np.float32), rng.uniform(1.0, 3.0, BINS).astype(
        np.float32
    )


def _peaked(peak_bin: int, frames: int = 6) -> torch.Tensor:
    """Log energies with one formant-like bump at `peak_bin`."""
    bands = np.arange(BINS)
    row = 5.0 * np.exp(-0.5 * ((bands - peak_bin) / 2.0) ** 2)
    return torch.tensor(np.tile(row, (1, frames, 1)), dtype=torch.float32)


def test_mel_centres_rise_inside_the_band():
    centres = mel_bin_centres()
    assert centres.shape == (BINS,)
    assert np.all(np.diff(centres) > 0)
    assert 20 < centres[0] < 100 and 7000 < centres[-1] < 8000


def test_unit_factor_reads_each_band_from_itself():
    positions = source_positions(torch.ones(3))
    np.testing.assert_allclose(positions.numpy(), np.tile(np.arange(BINS), (3, 1)), atol=1e-4)


@pytest.mark.parametrize("factor, moves_up", [(1.12, True), (0.88, False)])
def test_warp_moves_a_formant_with_the_factor(factor, moves_up):
    energies = _peaked(30)
    warped = warp_bands(energies, source_positions(torch.tensor([factor])))
    peak = int(warped[0, 0].argmax())
    assert (peak > 30) if moves_up else (peak < 30)
    # the band edge stays put (Kaldi's piecewise warp): the top band reads from near itself, not
    # from outside the spectrum, while a mid band moves by about the factor
    positions = source_positions(torch.tensor([factor]))[0]
    assert float(positions[-1]) == pytest.approx(BINS - 1, abs=1.0)
    assert abs(float(positions[40]) - 40) > 2
    assert torch.all(positions[1:] >= positions[:-1])


@pytest.mark.parametrize("factor", [0.85, 1.15])
def test_the_warp_is_continuous_and_rising_through_its_knee(factor):
    # on a fine grid of bands, a jump at the knee would stand out against the steady steps (the
    # slope itself changes there by up to (1 + warp) / (1 - warp))
    steps = source_positions(torch.tensor([factor]), bins=4000)[0].diff()
    inside = steps[(steps > 0)]
    assert torch.all(steps >= 0)
    assert float(inside.max()) < 2.5 * float(inside.median())


def test_perturbation_off_and_unit_settings_are_identity():
    mean, std = _cmvn()
    features = torch.randn(2, 7, BINS)
    lengths = torch.tensor([7, 7])
    assert build_voice_perturbation(GlobalCmvn(mean, std), 0.0, 0.0) is None
    rest = VoicePerturbation(mean, std, warp=0.1, tilt_db=3.0, probability=0.0)
    out, _ = rest(features, lengths)
    assert out is features
    # chosen but with the range collapsed to a single unit factor and no tilt: the round trip
    # through un-normalised energies changes nothing
    unit = VoicePerturbation(mean, std, warp=0.0, tilt_db=1e-9, probability=1.0)
    out, _ = unit(features, lengths)
    torch.testing.assert_close(out, features, atol=1e-4, rtol=0)


def test_perturbation_changes_real_frames_keeps_padding_zero_and_is_seeded():
    mean, std = _cmvn()
    perturb = VoicePerturbation(mean, std, warp=0.1, tilt_db=3.0, probability=1.0)
    features = torch.randn(3, 9, BINS)
    lengths = torch.tensor([9, 5, 2])
    for row, n in enumerate(lengths):
        features[row, n:] = 0.0
    torch.manual_seed(1)
    first, out_lengths = perturb(features, lengths)
    torch.manual_seed(1)
    again, _ = perturb(features, lengths)
    torch.testing.assert_close(first, again)
    assert torch.equal(out_lengths, lengths)
    assert torch.isfinite(first).all()
    for row, n in enumerate(lengths.tolist()):
        assert torch.all(first[row, n:] == 0)
        assert not torch.allclose(first[row, :n], features[row, :n], atol=1e-3)


def test_tilt_is_one_smooth_gain_per_utterance():
    mean, std = _cmvn()
    perturb = VoicePerturbation(mean, std, warp=0.0, tilt_db=3.0, probability=1.0)
    features = torch.randn(2, 8, BINS)
    torch.manual_seed(3)
    out, _ = perturb(features, torch.tensor([8, 8]))
    gain = (out - features) * torch.as_tensor(std)  # back in log energy
    # the same gain on every frame of an utterance, within 2 × 3 dB, and smooth across bands
    torch.testing.assert_close(gain, gain[:, :1].expand_as(gain), atol=1e-4, rtol=0)
    assert float(gain.abs().max()) <= 2 * 3.0 * np.log(10) / 10 + 1e-4
    assert float(gain[:, 0].diff(dim=-1).abs().max()) < 0.1
