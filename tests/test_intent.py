import numpy as np
import pytest

from pasu.core.errors import ConfigError
from pasu.models.intent import train_intent_classifier
from pasu.speech.intent import IntentClassifier

TEXTS = [
    "wake me up at seven am",
    "set an alarm for six",
    "alarm at eight please",
    "what's the weather today",
    "is it going to rain",
    "weather forecast for tomorrow",
    "play some jazz",
    "play my rock playlist",
    "put on some music",
]
INTENTS = ["alarm_set"] * 3 + ["weather_query"] * 3 + ["play_music"] * 3


@pytest.fixture(scope="module")
def classifier() -> IntentClassifier:
    return train_intent_classifier(TEXTS, INTENTS, unlabelled=["play the beatles"])


def test_predicts_scenario_and_action_with_confidence(classifier):
    prediction = classifier.predict(["will it rain tomorrow"])[0]
    assert (prediction.intent, prediction.scenario, prediction.action) == (
        "weather_query",
        "weather",
        "query",
    )
    assert 0.0 < prediction.confidence <= 1.0


def test_written_form_input_is_understood_like_spoken_form(classifier):
    spoken, written = classifier.predict(["wake me up at eight am", "Wake me up at 8 a.m."])
    assert spoken.intent == written.intent == "alarm_set"
    assert spoken.confidence == pytest.approx(written.confidence)


def test_round_trips_through_a_file(classifier, tmp_path):
    classifier.save(tmp_path / "intent.joblib")
    loaded = IntentClassifier.load(tmp_path / "intent.joblib")
    assert loaded.predict(["play some music"])[0].intent == "play_music"
    assert loaded.info["pseudo_labelled"] <= 1


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError):
        IntentClassifier.load(tmp_path / "none.joblib")


def test_numpy_export_predicts_what_scikit_learn_does(tmp_path):
    from pasu.core.text import normalize_for_wer
    from pasu.models.intent import export_numpy_intent
    from pasu.speech.intent import NumpyIntentModel, char_wb_ngrams

    texts = ["wake me up at eight", "play some jazz", "turn the lights off", "what is the weather"]
    classifier = train_intent_classifier(
        texts * 3, ["alarm_set", "play_music", "iot_off", "w_q"] * 3
    )
    model = NumpyIntentModel.load(export_numpy_intent(classifier, tmp_path / "intent.npz"))
    probes = texts + ["", "a", "Wake me at 8 a.m.!", "jazz  lights   weather", "xyzzy"]
    # a word longer than any known term must not match one by truncation
    probes += ["what is the weatherman", "turn the lightsaber off"]
    expected = classifier.pipeline.predict_proba([normalize_for_wer(t) for t in probes])
    assert np.allclose(model.probabilities(probes), expected, atol=1e-3)  # float16 weights
    assert [p.intent for p in model.predict(probes)] == [
        p.intent for p in classifier.predict(probes)
    ]
    assert list(char_wb_ngrams("ab", 2, 5)) == [" a", "ab", "b ", " ab", "ab ", " ab "]


class KeywordTeacher:
    """A stand-in teacher: labels 'lights' sentences confidently, anything else unsurely."""

    def predict(self, texts):
        from pasu.speech.intent import IntentPrediction

        return [
            IntentPrediction("iot_hue_lightoff", 0.9)
            if "lights" in text
            else IntentPrediction("alarm_set", 0.2)
            for text in texts
        ]


def test_a_teacher_labels_the_unlabelled_sentences_it_is_sure_of():
    unlabelled = ["switch the lights off", "lights out in the kitchen", "play the beatles"]
    classifier = train_intent_classifier(
        TEXTS, INTENTS, unlabelled=unlabelled, teacher=KeywordTeacher()
    )
    # a class only the teacher knows is learnt; the unsure label is not
    assert "iot_hue_lightoff" in classifier.pipeline.classes_
    assert classifier.predict(["turn the lights off"])[0].intent == "iot_hue_lightoff"
    assert classifier.info["pseudo_labelled"] == 2
    assert classifier.info["pseudo_labels_from"] == "teacher"


def test_a_teacher_label_at_the_threshold_is_not_taken():
    class UnsureTeacher:
        def predict(self, texts):
            from pasu.speech.intent import IntentPrediction

            return [IntentPrediction("iot_hue_lightoff", 0.5) for _ in texts]

    classifier = train_intent_classifier(
        TEXTS, INTENTS, unlabelled=["lights off"], teacher=UnsureTeacher()
    )
    assert classifier.info["pseudo_labelled"] == 0
    assert "iot_hue_lightoff" not in classifier.pipeline.classes_


def test_without_a_teacher_the_classifier_labels_the_sentences_itself():
    classifier = train_intent_classifier(TEXTS, INTENTS, unlabelled=["play some jazz"])
    assert classifier.info["pseudo_labels_from"] == "self"
    assert classifier.info["pseudo_labelled"] == 1  # a sentence it was trained on: surely known
    assert set(classifier.pipeline.classes_) == set(INTENTS)


def test_train_intent_refuses_a_teacher_without_train_sentences(tmp_path, capsys):
    from pasu.cli import main

    out = str(tmp_path / "intent.joblib")
    assert main(["train-intent", "--out", out, "--no-self-training", "--teacher", "none"]) == 2
    assert "--no-self-training" in capsys.readouterr().err
    assert not (tmp_path / "intent.joblib").exists()


def test_a_teacher_file_of_either_kind_loads(tmp_path):
    from pasu.cloud.intent import EmbeddingIntentClassifier, load_intent_file
    from pasu.models.intent import export_numpy_intent
    from pasu.speech.intent import NumpyIntentModel

    classifier = train_intent_classifier(TEXTS, INTENTS)
    device_file = export_numpy_intent(classifier, tmp_path / "device.npz")
    cloud = EmbeddingIntentClassifier(np.zeros((3, 384)), np.zeros(3), sorted(set(INTENTS)))
    cloud.save(tmp_path / "cloud.npz")
    assert isinstance(load_intent_file(device_file), NumpyIntentModel)
    assert isinstance(load_intent_file(tmp_path / "cloud.npz"), EmbeddingIntentClassifier)
    with pytest.raises(ConfigError):
        load_intent_file(tmp_path / "missing.npz")
