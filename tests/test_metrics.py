import math

import pytest

from pasu.core.errors import DataError
from pasu.core.metrics import (
    intent_accuracy,
    latency_percentiles,
    offload_ratio,
    utterance_wer,
    wer,
    word_errors,
)
from pasu.eval.predictions import Prediction, write_predictions


def test_wer_counts_each_edit_type_by_hand():
    # ref: "turn on the kitchen lights" (5 words)
    # hyp: "turn the kitchen light please" -> deletion "on", substitution lights->light, insertion
    errors = word_errors(["turn on the kitchen lights"], ["turn the kitchen light please"])
    assert (errors.substitutions, errors.deletions, errors.insertions) == (1, 1, 1)
    assert errors.reference_words == 5
    assert errors.wer == pytest.approx(3 / 5)


def test_corpus_wer_weights_by_reference_length():
    refs = ["play the next song", "stop it"]
    hyps = ["play the next one", "stop it"]
    assert wer(refs, hyps) == pytest.approx(1 / 6)


def test_written_form_hypothesis_scores_zero_against_spoken_reference():
    assert utterance_wer("set an alarm for eight thirty am", "Set an alarm for 8:30 a.m.") == 0.0


def test_empty_reference_counts_insertions():
    errors = word_errors(["", "hello"], ["oh no", "hello"])
    assert errors.insertions == 2 and errors.reference_words == 1
    assert utterance_wer("", "") == 0.0
    assert math.isinf(utterance_wer("", "something"))


def test_mismatched_lengths_are_rejected():
    with pytest.raises(DataError):
        wer(["a"], ["a", "b"])


def test_intent_accuracy_and_offload_ratio():
    assert intent_accuracy(
        ["alarm_set", "weather_query", "iot_hue_lightoff"],
        ["alarm_set", "weather_query", "iot_hue_lighton"],
    ) == pytest.approx(2 / 3)
    assert offload_ratio(["device", "cloud", "fallback", "cloud"]) == 0.5
    with pytest.raises(DataError):
        intent_accuracy([None], ["alarm_set"])


def test_latency_percentiles_by_hand():
    stats = latency_percentiles([10, 20, 30, 40, 50])
    assert stats == {"mean": 30.0, "p50": 30.0, "p90": 46.0, "p99": 49.6}
    with pytest.raises(DataError):
        latency_percentiles([])


def test_prediction_file_is_slurp_format(tmp_path):
    path = tmp_path / "pred.jsonl"
    n = write_predictions(
        path,
        [
            Prediction("audio-1.flac", "wake me up", "alarm_set"),
            Prediction("audio-2.flac", "hue lights", "iot_hue_lightoff"),
        ],
    )
    lines = path.read_text().splitlines()
    assert n == 2
    import json

    second = json.loads(lines[1])
    assert second == {
        "file": "audio-2.flac",
        "text": "hue lights",
        "scenario": "iot",
        "action": "hue_lightoff",
        "entities": [],
    }
