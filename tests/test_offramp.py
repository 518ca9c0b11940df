"""Offramp: features, perplexity and BiLSTM scores, calibration and policies."""

import json

import numpy as np
import pytest
import torch

from pasu.core.errors import ConfigError
from pasu.core.modeldir import OFFRAMP_CONFIG_FILE
from pasu.offramp.calibrate import (
    offload_curve,
    threshold_for_offload_ratio,
    threshold_for_target_wer,
)
from pasu.offramp.features import LOG_PROB_FLOOR, OfframpFeatures
from pasu.offramp.policy import NaiveHybrid, ThresholdPolicy, load_policy
from pasu.offramp.scores import EMPTY_PERPLEXITY, BiLstmScorer, perplexity
from pasu.offramp.train import BiLstmOfframp, to_scorer, train_bilstm
from pasu.speech.decoding import DecodingResult


def features(decoder, ctc=None, audio_s=2.0) -> OfframpFeatures:
    decoder = np.asarray(decoder, np.float32)
    ctc = np.asarray(ctc if ctc is not None else decoder, np.float32)
    return OfframpFeatures(decoder, ctc, audio_s)


def test_features_come_from_a_decoding_result_with_finite_values():
    result = DecodingResult([5, 6], -1.0, [-0.1, -0.5, -0.2], [-0.3, -1e10, -0.1], 3, 10, 3)
    extracted = OfframpFeatures.from_decoding(result, audio_s=2.5)
    assert extracted.num_tokens == 3
    assert extracted.ctc_log_probs[1] == LOG_PROB_FLOOR
    sequence = extracted.sequence()
    assert sequence.shape == (3, 4)
    np.testing.assert_allclose(sequence[:, 2:], [[0.15, 0.25]] * 3, rtol=1e-6)
    again = OfframpFeatures.from_json(json.loads(json.dumps(extracted.to_json())))
    np.testing.assert_allclose(again.decoder_log_probs, extracted.decoder_log_probs, atol=1e-4)
    assert features([]).sequence().shape == (1, 4)


def test_perplexity_on_fixed_inputs():
    assert perplexity(features([-0.1, -0.2, -0.3])) == pytest.approx(np.exp(0.2))
    assert perplexity(features([0.0, 0.0])) == pytest.approx(1.0)
    assert perplexity(features([])) == EMPTY_PERPLEXITY


def test_numpy_bilstm_equals_torch():
    torch.manual_seed(0)
    model = BiLstmOfframp().eval()
    mean = np.array([-1.0, -1.5, 0.5, 0.3], np.float32)
    std = np.array([1.2, 2.0, 0.2, 0.1], np.float32)
    scorer = to_scorer(model, mean, std)
    assert 10_000 < scorer.num_parameters < 12_000
    rng = np.random.default_rng(0)
    for length in (1, 4, 15):
        item = features(-rng.exponential(1.0, length), -rng.exponential(2.0, length), 3.0)
        inputs = torch.from_numpy((item.sequence() - mean) / std)
        with torch.no_grad():
            expected = torch.sigmoid(model([inputs]))[0].item()
        assert scorer(item) == pytest.approx(expected, abs=1e-5)


def test_bilstm_save_and_load(tmp_path):
    torch.manual_seed(1)
    scorer = to_scorer(BiLstmOfframp(), np.zeros(4, np.float32), np.ones(4, np.float32))
    scorer.save(tmp_path / "bilstm.npz")
    loaded = BiLstmScorer.load(tmp_path / "bilstm.npz")
    item = features([-0.2, -2.0, -0.1])
    assert loaded(item) == pytest.approx(scorer(item))
    with pytest.raises(ConfigError, match="not found"):
        BiLstmScorer.load(tmp_path / "missing.npz")


def test_bilstm_learns_which_outputs_are_unsure():
    rng = np.random.default_rng(0)
    items, wrong = [], []
    for _ in range(400):
        unsure = rng.random() < 0.4
        length = int(rng.integers(2, 12))
        scale = 1.5 if unsure else 0.1
        items.append(features(-rng.exponential(scale, length), -rng.exponential(scale, length)))
        wrong.append(unsure)
    scorer, metrics = train_bilstm(items, np.array(wrong), epochs=40)
    assert metrics["held_out_auc"] > 0.9
    assert scorer(features([-0.05] * 6)) < scorer(features([-2.5] * 6))


def test_offload_ratio_calibration_hits_its_target():
    scores = np.random.default_rng(0).random(1000)
    for ratio in (0.0, 0.1, 0.25, 0.5, 1.0):
        threshold = threshold_for_offload_ratio(scores, ratio)
        assert np.mean(scores > threshold) == pytest.approx(ratio)
    with pytest.raises(ConfigError):
        threshold_for_offload_ratio(scores, 1.5)


def test_target_wer_calibration_offloads_the_least_that_reaches_it():
    rng = np.random.default_rng(0)
    scores = rng.random(200)
    words = np.full(200, 10)
    device_errors = np.where(scores > 0.7, 5, 0)  # the device fails on the doubtful 30 %
    cloud_errors = np.ones(200)
    point = threshold_for_target_wer(scores, device_errors, cloud_errors, words, target_wer=0.08)
    curve = offload_curve(scores, device_errors, cloud_errors, words)
    assert point.wer <= 0.08
    assert all(p.wer > 0.08 for p in curve if p.offload_ratio < point.offload_ratio)
    assert np.mean(scores > point.threshold) == pytest.approx(point.offload_ratio)
    unreachable = threshold_for_target_wer(scores, device_errors, cloud_errors, words, 0.0)
    assert unreachable.wer == min(p.wer for p in curve)


def test_threshold_policy_and_naive_hybrid():
    policy = ThresholdPolicy("ppl", perplexity, threshold=2.0)
    assert not policy.decide(features([-0.1, -0.1])).offload
    sure_not = policy.decide(features([-2.0, -1.5]))
    assert sure_not.offload and "ppl" in sure_not.reason
    assert policy.decide(None).offload
    naive = NaiveHybrid(0.3, seed=0)
    share = np.mean([naive.decide(None).offload for _ in range(5000)])
    assert share == pytest.approx(0.3, abs=0.02)
    with pytest.raises(ConfigError):
        NaiveHybrid(1.2)


def test_policies_load_from_the_model_directory(tmp_path):
    assert not load_policy(tmp_path).decide(features([-9.0])).offload  # no config: never
    assert load_policy(tmp_path, "always").decide(features([-0.1])).offload
    with pytest.raises(ConfigError, match="calibrate"):
        load_policy(tmp_path, "ppl")
    (tmp_path / OFFRAMP_CONFIG_FILE).write_text(
        json.dumps({"default_policy": "ppl", "thresholds": {"ppl": 1.5}})
    )
    policy = load_policy(tmp_path)
    assert policy.name == "ppl" and policy.decide(features([-1.0])).offload
    with pytest.raises(ConfigError, match="unknown"):
        load_policy(tmp_path, "magic")
