"""Cloud models: Whisper checkpoint assembly, short-window guards, the MiniLM intent classifier."""

import zlib

import numpy as np
import pytest

import pasu.speech.whisper_checkpoints as whisper_models
from pasu.cloud.asr import ShortWindowGuards, WhisperOptions
from pasu.cloud.intent import (
    EmbeddingIntentClassifier,
    SentenceEmbedder,
    train_embedding_classifier,
)
from pasu.core.errors import ConfigError


def test_whisper_base_is_joined_verified_and_cached():
    checkpoint = whisper_models.whisper_base()
    model = checkpoint.path / "model.bin"
    assert whisper_models._sha256(model) == whisper_models.BASE_SHA256
    assert {"config.json", "tokenizer.json", "vocabulary.txt"} <= {
        p.name for p in checkpoint.path.iterdir()
    }
    modified = model.stat().st_mtime_ns
    assert whisper_models.whisper_base().path == checkpoint.path
    assert model.stat().st_mtime_ns == modified  # joined once


def test_a_corrupt_join_is_refused_and_not_cached(tmp_path, monkeypatch):
    monkeypatch.setattr(whisper_models, "BASE_SHA256", "0" * 64)
    with pytest.raises(ConfigError, match="SHA-256"):
        whisper_models._join_base_parts(tmp_path / "base")
    assert not any((tmp_path / "base").glob("model.bin*"))


def test_unknown_checkpoint_names_are_explained():
    with pytest.raises(ConfigError, match="whisper-tiny.en"):
        whisper_models.resolve_checkpoint("whisper-huge")


def test_short_window_is_audio_plus_margin_in_buckets():
    options = WhisperOptions(window_margin_s=1.0, window_bucket_s=2.0)
    assert options.window_seconds(2.5) == 4.0
    assert options.window_seconds(3.0) == 4.0
    assert options.window_seconds(3.1) == 6.0
    assert options.window_seconds(40.0) == 30.0
    default = WhisperOptions()
    assert default.window_seconds(3.0) == 10.0
    assert default.window_seconds(9.5) == 20.0


@pytest.mark.parametrize(
    ("text", "tokens", "avg_logprob", "no_speech", "duration", "failure"),
    [
        ("turn the lights off", 6, -0.2, 0.01, 2.0, ""),
        ("turn the lights off", 40, -0.2, 0.01, 2.0, "no end of text"),
        ("the the the the the the the the the the the the", 12, -0.2, 0.01, 2.0, "repetition"),
        ("turn the lights off", 6, -1.5, 0.01, 2.0, "low confidence"),
        (
            "the quick brown fox jumps over a lazy dog as five wizards hex a jumbled pack of boxes",
            20,
            -0.2,
            0.01,
            2.0,
            "too much text for the audio",
        ),
        ("", 0, -0.2, 0.01, 2.0, "no text although speech was detected"),
        ("", 0, -0.2, 0.9, 2.0, ""),
    ],
)
def test_short_window_guards(text, tokens, avg_logprob, no_speech, duration, failure):
    guards = ShortWindowGuards()
    assert guards.failure(text, tokens, 40, avg_logprob, no_speech, duration) == failure


def test_silence_rule_follows_whisper():
    guards = ShortWindowGuards()
    assert guards.is_silence(avg_logprob=-1.2, no_speech_prob=0.9)
    assert not guards.is_silence(avg_logprob=-0.3, no_speech_prob=0.9)
    assert not guards.is_silence(avg_logprob=-1.2, no_speech_prob=0.2)


class WordEmbedder(SentenceEmbedder):
    """Deterministic bag-of-words vectors, standing in for MiniLM."""

    def __call__(self, texts, progress=False):
        vectors = np.zeros((len(texts), 256), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.split():
                vectors[row, zlib.crc32(word.encode()) % 256] += 1.0
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-6)


def test_embedding_classifier_trains_saves_and_loads(tmp_path):
    texts = ["wake me up at eight", "set an alarm for nine", "what is the weather", "is it raining"]
    intents = ["alarm_set", "alarm_set", "weather_query", "weather_query"]
    classifier = train_embedding_classifier(
        texts, intents, unlabelled=["alarm at ten please"], embedder=WordEmbedder()
    )
    assert classifier.info["pseudo_labelled"] <= 1
    path = tmp_path / "intent.npz"
    classifier.save(path)
    loaded = EmbeddingIntentClassifier.load(path, WordEmbedder())
    predictions = loaded.predict(["set an alarm for eight", "what is the weather"])
    assert [p.intent for p in predictions] == ["alarm_set", "weather_query"]
    assert predictions[0].scenario == "alarm" and predictions[0].action == "set"
    original = classifier.predict(["is it raining"])[0]
    assert loaded.predict(["is it raining"])[0].confidence == pytest.approx(original.confidence)


def test_shipped_cloud_intent_classifier_reads_whisper_style_text():
    from pasu.core.modeldir import CLOUD_INTENT_PATH

    classifier = EmbeddingIntentClassifier.load(CLOUD_INTENT_PATH)
    predictions = classifier.predict(["Wake me up at 8 a.m. tomorrow.", "What's the weather like?"])
    assert [p.intent for p in predictions] == ["alarm_set", "weather_query"]
