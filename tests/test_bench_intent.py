import json

import pytest

from pasu.eval.bench_intent import format_report, main, run
from pasu.models.intent import train_intent_classifier

TEXTS = ["wake me up at eight am", "set an alarm", "what's the weather like", "will it rain"]
INTENTS = ["alarm_set", "alarm_set", "weather_query", "weather_query"]


@pytest.fixture
def classifiers(tmp_path):
    good = train_intent_classifier(TEXTS, INTENTS)
    blind = train_intent_classifier(TEXTS, ["alarm_set"] * 3 + ["weather_query"])
    good.save(tmp_path / "good.joblib")
    blind.save(tmp_path / "blind.joblib")
    return {"blind": tmp_path / "blind.joblib", "good": tmp_path / "good.joblib"}


def _predictions(path, rows):
    path.write_text("".join(json.dumps({"file": f, "text": t}) + "\n" for f, t in rows))
    return path


def test_scores_each_classifier_on_each_condition_of_the_transcripts(
    classifiers, real_layout_corpus, tmp_path
):
    transcripts = _predictions(
        tmp_path / "predictions.jsonl",
        [
            ("audio-1-headset.flac", "wake me up at eight"),
            ("audio-1.flac", "weather"),  # a far-field misrecognition
            ("audio-2-headset.flac", "what's the weather"),
        ],
    )
    report = run(classifiers, {"asr": transcripts}, real_layout_corpus)
    rows = {row["texts"]: row for row in report["rows"]}
    assert set(rows) == {"gold test text", "asr close", "asr far"}
    assert rows["asr close"]["count"] == 2 and rows["asr far"]["count"] == 1
    assert rows["asr close"]["good"] == 1.0
    assert rows["asr close"]["blind"] == 0.5  # answers alarm for the weather question
    assert rows["asr far"]["good"] == 0.0
    assert rows["gold test text"]["count"] > 2000  # SLURP's own test sentences
    assert "good − blind" in format_report(report)


def test_a_transcript_of_an_unknown_recording_is_refused(classifiers, real_layout_corpus, tmp_path):
    from pasu.core.errors import DataError

    transcripts = _predictions(tmp_path / "p.jsonl", [("audio-9.flac", "hello")])
    with pytest.raises(DataError, match="audio-9"):
        run(classifiers, {"asr": transcripts}, real_layout_corpus)


def test_command_line_writes_json_and_markdown(classifiers, real_layout_corpus, tmp_path):
    transcripts = _predictions(tmp_path / "p.jsonl", [("audio-2-headset.flac", "weather")])
    out = tmp_path / "report" / "intent.json"
    main(
        [f"--classifier=good={classifiers['good']}", f"--transcripts=asr={transcripts}"]
        + ["--data", str(real_layout_corpus), "--json", str(out)]
    )
    assert json.loads(out.read_text())["rows"][1]["good"] == 1.0
    assert out.with_suffix(".md").read_text().startswith("`python -m pasu.eval.bench_intent")
