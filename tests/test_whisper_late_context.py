import pytest

torch = pytest.importorskip("torch")

from pasu.models.whisper import (  # noqa: E402
    Whisper,
    WhisperDims,
    chunk_causal_mask,
    late_context_masks,
)

DIMS = WhisperDims(n_mels=8, d_model=16, n_heads=2, n_encoder_layers=3, n_decoder_layers=1,
                   n_vocab=20, n_audio_positions=64, n_text_positions=8)  # fmt: skip


def test_a_chunk_sees_itself_and_the_past_only():
    mask = chunk_causal_mask(5, chunk_frames=2)
    visible = (mask == 0).int().tolist()
    assert visible == [[1, 1, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 0],
                       [1, 1, 1, 1, 1]]  # fmt: skip


def _encode(model: Whisper, mel: torch.Tensor, streaming: int) -> torch.Tensor:
    frames = (mel.shape[2] + 1) // 2
    with torch.no_grad():
        return model.encoder(mel, late_context_masks(frames, 3, streaming, chunk_frames=10))


def test_streamed_blocks_do_not_look_ahead_and_the_top_does():
    torch.manual_seed(0)
    model = Whisper(DIMS).eval()
    torch.nn.init.normal_(model.encoder.positions)
    mel = torch.randn(1, 8, 100)
    later = mel.clone()
    later[:, :, 30:] = torch.randn(1, 8, 70)  # encoder frames from 14 on change
    first_chunk = slice(0, 10)  # encoder frames 0-9 read mel frames 0-20
    causal, changed = _encode(model, mel, 3), _encode(model, later, 3)
    torch.testing.assert_close(causal[:, first_chunk], changed[:, first_chunk])
    assert not torch.allclose(causal[:, 20:], changed[:, 20:])
    top_full, top_full_changed = _encode(model, mel, 2), _encode(model, later, 2)
    assert not torch.allclose(top_full[:, first_chunk], top_full_changed[:, first_chunk])
