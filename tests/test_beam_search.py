import logging
from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pasu.models.asr_model import LateContextModel  # noqa: E402
from pasu.models.baseline import EspnetBaseline  # noqa: E402
from pasu.speech.ctc_prefix import CtcPrefixScorer  # noqa: E402
from pasu.speech.decoding import BeamSearch, DecodingOptions  # noqa: E402

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


def _decode_setup(model, frames: int, seed: int):
    torch.manual_seed(seed)
    x = torch.randn(1, frames, TINY.num_mel_bins)
    with torch.no_grad():
        encoded, _ = model.encode(x, torch.tensor([frames]))
        ctc = model.ctc.log_softmax(encoded)[0].numpy()
    return encoded.numpy(), ctc


@pytest.fixture(scope="module")
def search(peaky_model) -> BeamSearch:
    return BeamSearch(_torch_decoder_step(peaky_model), peaky_model.eos)


def test_beam_collapse_on_a_faithful_reference_is_cheaper_and_mostly_as_good(peaky_model, search):
    # Collapse is a heuristic: after it, the beam holds other competitors, and on this random
    # model (whose hypotheses run to the length limit) the reference path can lose later on.
    as_good = 0
    for seed in range(6):
        encoded, ctc = _decode_setup(peaky_model, 160, seed)
        plain = search.decode(encoded, ctc)
        collapsed = search.decode(
            encoded, ctc, DecodingOptions(reference=plain.reference, beam_collapse=True)
        )
        assert collapsed.collapsed_steps > 0
        assert collapsed.num_hypothesis_evaluations < plain.num_hypothesis_evaluations
        as_good += collapsed.score >= plain.score - 1e-3
    assert as_good >= 4


@pytest.mark.parametrize("seed", range(4))
def test_early_termination_stops_near_the_predicted_length(peaky_model, search, seed):
    encoded, ctc = _decode_setup(peaky_model, 160, seed)
    plain = search.decode(encoded, ctc)
    early = search.decode(
        encoded, ctc, DecodingOptions(reference=plain.reference, early_termination=True)
    )
    assert early.token_ids == plain.token_ids
    assert early.num_steps <= max(plain.num_steps, len(plain.token_ids) + 5 + 1)


@pytest.mark.parametrize("seed", range(4))
def test_score_bound_stops_sooner_with_the_same_answer(peaky_model, search, seed):
    encoded, ctc = _decode_setup(peaky_model, 40 + 20 * seed, seed)
    plain = search.decode(encoded, ctc)
    bounded = search.decode(encoded, ctc, DecodingOptions(score_bound=True))
    # Scores never rise, so once the best finished hypothesis leads every running one,
    # searching on cannot change the answer.
    assert bounded.token_ids == plain.token_ids
    assert bounded.score == pytest.approx(plain.score, abs=1e-4)
    assert bounded.num_steps <= plain.num_steps


@pytest.mark.parametrize("seed", range(3))
def test_score_bound_waits_while_a_hypothesis_can_still_leap(peaky_model, search, seed):
    from pasu.speech.decoding import Hypothesis, _may_leap

    encoded, ctc = _decode_setup(peaky_model, 160, seed)
    pilot = search.decode(encoded[:, :100], ctc[:100], DecodingOptions(beam_size=3, max_tokens=15))
    options = DecodingOptions(
        reference=pilot.reference, beam_collapse=True, ctc_leap=True, early_termination=True
    )
    unbounded = search.decode(encoded, ctc, options)
    bounded = search.decode(encoded, ctc, replace(options, score_bound=True))
    assert bounded.token_ids == unbounded.token_ids
    assert bounded.score == pytest.approx(unbounded.score, abs=1e-4)

    reference = pilot.reference
    on_path = Hypothesis([peaky_model.eos, *reference.tokens[:1]], 0.0, None, 0.0)
    off_path = Hypothesis([peaky_model.eos, -1], 0.0, None, 0.0)
    assert _may_leap([off_path, on_path], options)
    assert not _may_leap([off_path], options)
    assert not _may_leap([on_path], replace(options, ctc_leap=False))


def test_score_bound_stops_as_soon_as_the_best_has_finished():
    # A decoder that is sure of "1 2 3 <eos>" and a CTC that agrees: ESPnet's end detection
    # searches on until three more lengths have ended far below; the bound stops at once.
    vocab, eos = 6, 5
    script = [1, 2, 3, eos]

    def step(tokens: np.ndarray, memory) -> np.ndarray:
        out = np.full((len(tokens), vocab), -8.0, np.float32)
        for row, history in enumerate(tokens):
            position = len(history) - 1
            out[row, script[min(position, len(script) - 1)]] = -0.01
        return out

    frames = []
    for token in (1, 2, 3):
        frames += [token, 0, 0, 0, 0, 0]
    ctc = np.full((len(frames), vocab), -9.0, np.float32)
    ctc[np.arange(len(frames)), frames] = -0.001
    search = BeamSearch(step, eos)
    plain = search.decode(None, ctc, DecodingOptions(beam_size=3))
    bounded = search.decode(None, ctc, DecodingOptions(beam_size=3, score_bound=True))
    assert plain.token_ids == bounded.token_ids == [1, 2, 3]
    assert bounded.num_steps == 4 < plain.num_steps


def _torch_decoder_draft(model):
    step = _torch_decoder_step(model)

    def draft(tokens: np.ndarray, encoded: np.ndarray) -> np.ndarray:
        return np.concatenate([step(tokens[None, : n + 1], encoded) for n in range(len(tokens))])

    return draft


@pytest.mark.parametrize("seed", range(4))
def test_draft_check_gives_the_collapsed_search_with_fewer_decoder_calls(peaky_model, seed):
    encoded, ctc = _decode_setup(peaky_model, 160, seed)
    step_by_step = BeamSearch(_torch_decoder_step(peaky_model), peaky_model.eos)
    drafted = BeamSearch(
        _torch_decoder_step(peaky_model),
        peaky_model.eos,
        decoder_draft=_torch_decoder_draft(peaky_model),
    )
    pilot = step_by_step.decode(
        encoded[:, :100], ctc[:100], DecodingOptions(beam_size=3, max_tokens=15)
    )
    options = DecodingOptions(reference=pilot.reference, beam_collapse=True, score_bound=True)
    expected = step_by_step.decode(encoded, ctc, options)
    result = drafted.decode(encoded, ctc, options)
    assert result.token_ids == expected.token_ids
    assert result.score == pytest.approx(expected.score, abs=1e-4)
    assert result.collapsed_steps == expected.collapsed_steps
    if expected.collapsed_steps > 1:
        assert result.num_decoder_calls < expected.num_decoder_calls


def test_collapse_margin_keeps_the_full_beam_on_close_calls(peaky_model, search):
    encoded, ctc = _decode_setup(peaky_model, 160, 1)
    plain = search.decode(encoded, ctc)
    options = DecodingOptions(reference=plain.reference, beam_collapse=True)
    eager = search.decode(encoded, ctc, options)
    cautious = search.decode(encoded, ctc, replace(options, collapse_margin=1e9))
    assert eager.collapsed_steps > 0 and cautious.collapsed_steps == 0
    assert cautious.token_ids == plain.token_ids


@pytest.mark.parametrize("seed", range(4))
def test_ctc_leap_reuses_pilot_variables_without_changing_the_result(peaky_model, search, seed):
    encoded, ctc = _decode_setup(peaky_model, 160, seed)
    plain = search.decode(encoded, ctc)
    options = DecodingOptions(
        reference=plain.reference, beam_collapse=True, ctc_leap=True, ctc_leap_ratio=1.0
    )
    leapt = search.decode(encoded, ctc, options)
    collapsed_only = search.decode(
        encoded, ctc, DecodingOptions(reference=plain.reference, beam_collapse=True)
    )
    # With q = 1 and the pilot's own encoder output, the reused variables are exact.
    assert leapt.token_ids == collapsed_only.token_ids
    assert leapt.score == pytest.approx(collapsed_only.score, abs=1e-3)
    assert leapt.num_ctc_frame_updates < collapsed_only.num_ctc_frame_updates


def test_pilot_reference_from_partial_input_drives_all_optimisations(peaky_model, search):
    encoded, ctc = _decode_setup(peaky_model, 200, 7)
    pilot = search.decode(encoded[:, :30], ctc[:30], DecodingOptions(beam_size=3, max_tokens=15))
    assert pilot.reference.num_frames == 30 and len(pilot.reference.tokens) <= 15
    plain = search.decode(encoded, ctc)
    everything = search.decode(
        encoded,
        ctc,
        DecodingOptions(
            reference=pilot.reference, beam_collapse=True, early_termination=True, ctc_leap=True
        ),
    )
    assert len(everything.token_ids) > 0
    assert everything.num_ctc_frame_updates <= plain.num_ctc_frame_updates


@pytest.mark.parametrize("seed", range(4))
def test_a_diverging_reference_falls_back_to_the_full_beam(peaky_model, search, seed):
    encoded, ctc = _decode_setup(peaky_model, 160, seed)
    plain = search.decode(encoded, ctc)
    unused = [t for t in range(2, TINY.vocab_size - 1) if t not in plain.token_ids]
    bogus = type(plain.reference)(tuple(unused[:8]), plain.reference.ctc_states[:0], 160)
    options = DecodingOptions(reference=bogus, beam_collapse=True, ctc_leap=True)
    diverged = search.decode(encoded, ctc, options)
    assert diverged.token_ids == plain.token_ids
    assert diverged.collapsed_steps == 0
    # Agreeing on the first token only collapses once; after the divergence the full beam
    # expands again (the result may differ: collapse keeps only the best first hypothesis).
    first = search.decode(encoded, ctc, DecodingOptions(max_tokens=1)).token_ids[0]
    early = (first, *unused[:8])
    options = DecodingOptions(
        reference=type(plain.reference)(early, (), 160), beam_collapse=True, realign_lookahead=0
    )
    once = search.decode(encoded, ctc, options)
    assert once.collapsed_steps >= 1 and len(once.token_ids) > 0
    assert once.num_hypothesis_evaluations > once.num_steps + 2  # the full beam came back


def test_realignment_recovers_from_a_token_the_pilot_added(peaky_model, search):
    encoded, ctc = _decode_setup(peaky_model, 160, 0)
    plain = search.decode(encoded, ctc)
    extra = next(t for t in range(2, TINY.vocab_size - 1) if t not in plain.token_ids)
    shifted = (*plain.token_ids[:2], extra, *plain.token_ids[2:])
    reference = type(plain.reference)(shifted, (), 160)
    strict = search.decode(encoded, ctc, DecodingOptions(reference=reference, beam_collapse=True))
    realigned = search.decode(
        encoded, ctc, DecodingOptions(reference=reference, beam_collapse=True, realign_lookahead=1)
    )
    assert strict.collapsed_steps >= 1  # on the tokens before the inserted one
    assert realigned.collapsed_steps > strict.collapsed_steps
    assert realigned.score >= plain.score - 1e-3
