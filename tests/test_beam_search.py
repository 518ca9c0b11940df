import logging

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from device.ctc_prefix import CtcPrefixScorer  # noqa: E402
from device.decoding import BeamSearch, DecodingOptions  # noqa: E402
from models.asr_model import LateContextModel  # noqa: E402
from models.baseline import EspnetBaseline  # noqa: E402

from .test_asr_model import TINY  # noqa: E402


@pytest.fixture(scope="module")
def peaky_model() -> LateContextModel:
    """A random tiny model with sharpened outputs, so its searches have clear winners."""
    torch.manual_seed(0)
    model = LateContextModel(TINY).eval()
    with torch.no_grad():
        model.ctc.ctc_lo.weight.mul_(8)
        model.decoder.output_layer.weight.mul_(8)
    return model


def _torch_decoder_step(model):
    def step(tokens: np.ndarray, encoded: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            memory = torch.from_numpy(encoded).expand(len(tokens), -1, -1)
            log_probs, _ = model.decoder.batch_score(
                torch.from_numpy(tokens), [None] * len(tokens), memory
            )
        return log_probs.numpy()

    return step


def test_full_prefix_probability_equals_ctc_likelihood():
    rng = np.random.default_rng(0)
    log_probs = torch.log_softmax(
        torch.from_numpy(rng.standard_normal((30, 6)).astype(np.float32)), -1
    )
    eos = 5
    scorer = CtcPrefixScorer(log_probs.numpy(), eos)
    state, prefix_score = scorer.initial_state(), np.float32(0.0)
    labels = [2, 2, 3, 1]
    for length, label in enumerate(labels):
        psi, states = scorer.score(
            state[None],
            np.array([eos if length == 0 else labels[length - 1]]),
            np.array([[label, 4]]),
            prefix_length=length,
        )
        state, prefix_score = states[0, 0], psi[0, label]
    end_psi, _ = scorer.score(state[None], np.array([labels[-1]]), np.array([[1, 2]]), len(labels))
    expected = -torch.nn.functional.ctc_loss(
        log_probs[:, None],
        torch.tensor([labels]),
        torch.tensor([30]),
        torch.tensor([4]),
        reduction="sum",
    )
    assert end_psi[0, eos] == pytest.approx(float(expected), abs=1e-3)
    assert scorer.end_score(state) == pytest.approx(float(expected), abs=1e-3)
    assert prefix_score > end_psi[0, eos]  # a prefix is at least as likely as the sequence


def test_beam_search_picks_the_same_hypotheses_as_espnet(peaky_model):
    logging.disable(logging.WARNING)  # ESPnet logs every search at INFO
    baseline = EspnetBaseline(peaky_model)
    ours = BeamSearch(_torch_decoder_step(peaky_model), peaky_model.eos)
    for i in range(8):
        x = torch.randn(1, 90 + 17 * i, TINY.num_mel_bins)
        with torch.no_grad():
            encoded, _ = peaky_model.encode(x, torch.tensor([x.size(1)]))
            ctc = peaky_model.ctc.log_softmax(encoded)[0].numpy()
        expected = baseline.decode_encoded(encoded[0])
        result = ours.decode(encoded.numpy(), ctc)
        assert result.token_ids == expected.token_ids
        assert result.score == pytest.approx(expected.score, abs=1e-3)
        assert result.num_decoder_calls == result.num_steps >= len(result.token_ids)
    logging.disable(logging.NOTSET)


def test_token_limit_bounds_the_search(peaky_model):
    ours = BeamSearch(_torch_decoder_step(peaky_model), peaky_model.eos)
    x = torch.randn(1, 200, TINY.num_mel_bins)
    with torch.no_grad():
        encoded, _ = peaky_model.encode(x, torch.tensor([200]))
        ctc = peaky_model.ctc.log_softmax(encoded)[0].numpy()
    limited = ours.decode(encoded.numpy(), ctc, DecodingOptions(max_tokens=4))
    assert limited.num_steps <= 4 and len(limited.token_ids) <= 4


def test_empty_input_decodes_to_nothing():
    ours = BeamSearch(lambda tokens, encoded: np.zeros((len(tokens), 5), np.float32), 4)
    result = ours.decode(np.zeros((1, 0, 8), np.float32), np.zeros((0, 5), np.float32))
    assert result.token_ids == [] and result.num_decoder_calls == 0
