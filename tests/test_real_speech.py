import numpy as np
import pytest

from pasu.eval.bench_real_speech import format_report, load_real_speech, run
from pasu.speech.whisper_checkpoints import whisper_tiny_en
from pasu.speech.whisper_tokens import END_OF_TEXT, TRANSCRIBE_PROMPT, WhisperTokenText


def test_the_real_speech_set_is_complete():
    rows = load_real_speech()
    assert len(rows) == 11
    assert sum(len(r["text"].split()) for r in rows) == 96
    assert {r["kind"] for r in rows} == {"read", "command"}
    assert all(r["audio"].dtype == np.float32 and len(r["audio"]) > 8_000 for r in rows)


def test_the_benchmark_scores_a_system_on_it():
    report = run(["device"])
    device = report["systems"]["device"]
    assert device["all"]["words"] == 96
    assert device["read"]["words"] + device["command"]["words"] == 96
    assert len(device["transcripts"]) == 11
    assert "| device |" in format_report(report)


def test_whisper_token_text_matches_the_tokenizer():
    tokenizers = pytest.importorskip("tokenizers")
    path = whisper_tiny_en().path
    reference = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
    text_of = WhisperTokenText.load(path)
    for text in ("Hello, world! It's 8:30 p.m.", "café naïve — 25% of “quotes”", "日本語"):
        ids = reference.encode(text).ids
        assert text_of(ids) == reference.decode(ids).strip() == text
    assert text_of([*TRANSCRIBE_PROMPT, *reference.encode(" go").ids, END_OF_TEXT]) == "go"
