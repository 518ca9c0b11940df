import json
import lzma

import pytest

from pasu.core.errors import DataError
from pasu.core.paths import REPO_ROOT, slurp_text_dir
from pasu.core.slurp import is_close_talk, load_recordings, load_sentences, read_jsonl


def test_reads_real_slurp_layout_with_audio_dir(real_layout_corpus):
    recordings = load_recordings(
        real_layout_corpus, "test", audio_dir=real_layout_corpus / "slurp_real"
    )
    assert [r.id for r in recordings] == ["audio-1-headset", "audio-1", "audio-2-headset"]
    first = recordings[0]
    assert first.audio_path == real_layout_corpus / "slurp_real" / "audio-1-headset.flac"
    assert first.text == "wake me up at eight am"
    assert (first.scenario, first.action, first.intent) == ("alarm", "set", "alarm_set")
    assert [r.close_talk for r in recordings] == [True, False, True]


def test_condition_filter_keeps_only_far_field(real_layout_corpus):
    far = load_recordings(
        real_layout_corpus, "test", audio_dir=real_layout_corpus / "slurp_real", condition="far"
    )
    assert [r.id for r in far] == ["audio-1"]


def test_missing_audio_names_the_directory_to_fix(real_layout_corpus):
    with pytest.raises(DataError, match=r"3 of 3 audio files .* --audio-dir"):
        load_recordings(real_layout_corpus, "test")  # audio is not in the default DIR/audio


def test_missing_split_file_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="split file not found"):
        load_recordings(tmp_path, "devel")


def test_malformed_line_reports_file_and_line(tmp_path):
    path = tmp_path / "test.jsonl"
    path.write_text(json.dumps({"sentence": "ok"}) + "\n{not json\n")
    with pytest.raises(DataError, match=r"test.jsonl:2: not valid JSON"):
        read_jsonl(path)


def test_the_repository_carries_slurp_text(monkeypatch):
    monkeypatch.delenv("PASU_SLURP_TEXT", raising=False)
    assert slurp_text_dir() == REPO_ROOT / "data" / "slurp"
    test = load_sentences("test")
    assert (len(test), len(load_sentences("devel"))) == (2974, 2033)
    assert all(s.intent and "_" in s.intent for s in test[:50])
    train = load_sentences("train")
    assert len(train) == 29104 and train[0].intent is None


def test_compressed_and_plain_text_read_the_same(tmp_path):
    line = json.dumps({"slurp_id": 1, "sentence": "play jazz", "scenario": "play",
                       "action": "music", "recordings": []})  # fmt: skip
    plain, packed = tmp_path / "plain", tmp_path / "packed"
    plain.mkdir(), packed.mkdir()
    (plain / "devel.jsonl").write_text(line + "\n")
    with lzma.open(packed / "devel.jsonl.xz", "wt") as out:
        out.write(line + "\n")
    assert load_sentences("devel", packed) == load_sentences("devel", plain)
    assert load_sentences("devel", packed)[0].intent == "play_music"


def test_text_dir_can_be_overridden_by_env(tmp_path, monkeypatch):
    (tmp_path / "train_text.txt").write_text("turn on the lights\n\nplay jazz\n")
    monkeypatch.setenv("PASU_SLURP_TEXT", str(tmp_path))
    assert [s.text for s in load_sentences("train")] == ["turn on the lights", "play jazz"]


def test_unknown_split_is_rejected():
    with pytest.raises(DataError, match="unknown split"):
        load_sentences("dev")


def test_headset_suffix_marks_close_talk():
    assert is_close_talk("audio-1434542201-headset.flac")
    assert not is_close_talk("audio-1434542201.flac")
