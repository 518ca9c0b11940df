import numpy as np
import pytest
import soundfile as sf

from pasu.core.audio import load_audio
from pasu.core.errors import AudioError


def test_stereo_8khz_becomes_16khz_mono(tmp_path):
    path = tmp_path / "stereo.wav"
    sf.write(path, np.zeros((8000, 2), np.float32) + 0.25, 8000)
    audio = load_audio(path)
    assert audio.dtype == np.float32 and audio.ndim == 1
    assert len(audio) == 16000
    assert np.allclose(audio[100:-100], 0.25, atol=1e-3)


def test_bytes_are_decoded_like_files(tmp_path):
    path = tmp_path / "a.flac"
    sf.write(path, np.full(1600, 0.5, np.float32), 16000)
    assert np.allclose(load_audio(path.read_bytes()), load_audio(path))


def test_missing_file_is_an_audio_error(tmp_path):
    with pytest.raises(AudioError, match="not found"):
        load_audio(tmp_path / "nope.wav")


def test_corrupt_file_is_an_audio_error(tmp_path):
    path = tmp_path / "corrupt.flac"
    path.write_bytes(b"fLaC" + bytes(range(200)))
    with pytest.raises(AudioError, match="cannot decode"):
        load_audio(path)


def test_empty_bytes_are_an_audio_error():
    with pytest.raises(AudioError, match="empty"):
        load_audio(b"")
