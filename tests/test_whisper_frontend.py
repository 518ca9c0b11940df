import numpy as np
import pytest

from pasu.core.audio import load_audio
from pasu.core.paths import REPO_ROOT
from pasu.speech.whisper_frontend import N_MELS, WhisperLogMel, whisper_log_mel

SAMPLE = REPO_ROOT / "samples" / "02-lists_remove-close.wav"


def _streamed(audio: np.ndarray, chunk: int, floor_log10: float) -> np.ndarray:
    stream = WhisperLogMel(floor_log10)
    parts = [stream.accept(audio[i : i + chunk]) for i in range(0, len(audio), chunk)]
    return np.concatenate([*parts, stream.finish()])


def test_features_are_whispers_own():
    feature_extractor = pytest.importorskip("faster_whisper.feature_extractor")
    audio = load_audio(SAMPLE)
    expected = feature_extractor.FeatureExtractor()(audio, padding=0).T
    np.testing.assert_allclose(whisper_log_mel(audio), expected, atol=1e-5)


@pytest.mark.parametrize("chunk", [1, 37, 160, 401, 4000])
def test_streamed_features_equal_whole_utterance_features(chunk):
    audio = load_audio(SAMPLE)
    whole = whisper_log_mel(audio, floor_log10=-6.8)
    assert whole.shape == (len(audio) // 160, N_MELS)
    assert np.array_equal(_streamed(audio, chunk, -6.8), whole)


@pytest.mark.parametrize("length", [0, 100, 170, 250, 399])
def test_short_input_streams_like_the_whole(length):
    audio = np.random.default_rng(length).standard_normal(length).astype(np.float32) * 0.1
    whole = whisper_log_mel(audio, floor_log10=-6.8)
    assert whole.shape == (length // 160, N_MELS)
    assert np.array_equal(_streamed(audio, 64, -6.8), whole)


def test_the_fixed_floor_replaces_the_utterance_maximum():
    audio = np.zeros(16_000, np.float32)
    audio[8_000:8_400] = 0.5  # a click in silence
    floored = whisper_log_mel(audio, floor_log10=-6.8)
    assert floored.min() == pytest.approx((-6.8 + 4) / 4)
    relative = whisper_log_mel(audio)  # Whisper's own: 8 decades below this clip's maximum
    assert relative.min() == pytest.approx(relative.max() - 2.0, abs=1e-6)
