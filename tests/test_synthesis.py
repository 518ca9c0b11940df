import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import soundfile as sf

from pasu.core.errors import SynthesisError
from pasu.core.slurp import load_recordings
from pasu.eval.tts import engines
from pasu.eval.tts.corpus import plan_split, synthesize_split
from pasu.eval.tts.voices import (
    DEVEL_VOICES,
    ENGINES,
    TEST_VOICES,
    TRAIN_VOICES,
    VOICE_GROUPS,
    Voice,
    voice_by_slug,
)

from .conftest import slurp_record

SENTENCE = "wake me up at eight am tomorrow"


def _one_voice_per_engine() -> dict[str, tuple[str, Voice]]:
    chosen: dict[str, tuple[str, Voice]] = {}
    for split, voices in VOICE_GROUPS.items():
        for voice in voices:
            chosen.setdefault(voice.engine, (split, voice))
    return chosen


@pytest.fixture
def text_dir(tmp_path: Path) -> Path:
    text = tmp_path / "text"
    text.mkdir()
    for split in ("test", "devel"):
        records = [
            slurp_record(i, SENTENCE if i == 0 else "play some jazz", "alarm", "set", [])
            for i in range(2)
        ]
        (text / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (text / "train_text.txt").write_text(f"{SENTENCE}\nplay some jazz\n{SENTENCE}\n")
    return text


@pytest.mark.parametrize("engine", ENGINES)
def test_each_engine_renders_16khz_mono_flac_of_plausible_length(engine, text_dir, tmp_path):
    split, voice = _one_voice_per_engine()[engine]
    if not engines.voice_available(voice):
        if engine == "espeak" and os.environ.get("CI"):
            pytest.fail("CI must have espeak-ng installed")
        pytest.skip(f"{engine} is not installed here")
    out = tmp_path / "corpus"
    report = synthesize_split(
        split, out, limit=1, voices=[voice], text_dir=text_dir, progress=False, workers=1
    )
    assert report.failures == {}
    recordings = load_recordings(out, split)
    assert len(recordings) == (8 if split == "train" else 2)
    for recording in recordings:
        info = sf.info(recording.audio_path)
        assert (info.samplerate, info.channels, info.format) == (16000, 1, "FLAC")
        # ~2 s of speech at +-15 % speed plus 0.35-1.1 s of silence and reverberant tail.
        assert 1.0 < info.duration < 6.0, f"{recording.id}: {info.duration:.2f} s"
        assert voice.slug in recording.id


def test_voice_groups_are_disjoint_and_as_specified():
    assert not set(TEST_VOICES) & set(DEVEL_VOICES)
    assert not set(TRAIN_VOICES) & (set(TEST_VOICES) | set(DEVEL_VOICES))
    held_out_accents = {"en-us-nyc", "en-gb-x-rp", "en-gb-scotland"}
    assert not any(v.engine == "espeak" and v.name in held_out_accents for v in TRAIN_VOICES)
    assert {v.slug for v in TEST_VOICES} == {
        "piper-en-us-joe-medium",
        "pico-en-us",
        "festival-cmu-us-slt-arctic-hts",
        "mbrola-us1",
        "espeak-en-us-nyc",
        "espeak-en-gb-x-rp",
    }


def test_plans_are_deterministic_and_keep_to_their_group():
    from pasu.core.slurp import load_sentences

    sentences = load_sentences("test")[:60]
    first, second = plan_split("test", sentences, seed=3), plan_split("test", sentences, seed=3)
    assert first == second
    assert plan_split("test", sentences, seed=4) != first
    assert {p.voice for p in first} == set(TEST_VOICES)
    # each sentence once close-talk and once far-field, by different voices
    for close, far in zip(first[::2], first[1::2], strict=True):
        assert close.close_talk and not far.close_talk and close.voice != far.voice


def test_train_plan_has_eight_renditions_half_far_field_from_train_voices_only():
    from pasu.core.slurp import Sentence
    from pasu.eval.tts.voices import EXTRA_TRAIN_FAMILIES, TRAIN_FAMILIES

    sentences = [Sentence(None, f"sentence {i}", None, None) for i in range(200)]
    plans = plan_split("train", sentences, seed=0)
    assert len(plans) == 1600
    assert sum(not p.close_talk for p in plans) == 800
    assert {p.voice for p in plans} <= set(TRAIN_VOICES)
    first = {v for family in TRAIN_FAMILIES.values() for v in family}
    extra = {v for family in EXTRA_TRAIN_FAMILIES.values() for v in family}
    # the first six renditions keep the original voices; the two added ones use new voices only
    assert {p.voice for p in plans if p.rendition < 6} <= first
    assert {p.voice for p in plans if p.rendition >= 6} <= extra
    assert not first & extra
    assert len({p.voice.engine for p in plans if p.rendition < 6}) == 4
    assert sum(p.voice.engine == "mbrola" for p in plans if p.rendition >= 6) > 250


def test_an_english_speaking_foreign_mbrola_voice_renders(tmp_path):
    voice = voice_by_slug("mbrola-de3-en")
    if not engines.voice_available(voice):
        pytest.skip("mbrola-de3 is not installed here")
    out = tmp_path / "clip.wav"
    engines.render(voice, [("set an alarm for seven am", out)])
    samples, rate = sf.read(out)
    assert rate > 0 and len(samples) > rate  # over a second of speech


def test_second_run_resumes_without_rendering_again(text_dir, tmp_path):
    voice = voice_by_slug("espeak-en-us-nyc")
    if not engines.voice_available(voice):
        pytest.skip("espeak-ng is not installed here")
    out = tmp_path / "corpus"
    first = synthesize_split(
        "test", out, limit=2, voices=[voice], text_dir=text_dir, progress=False
    )
    stamps = {p.name: p.stat().st_mtime_ns for p in (out / "audio").iterdir()}
    second = synthesize_split(
        "test", out, limit=2, voices=[voice], text_dir=text_dir, progress=False
    )
    assert first.clips_rendered_now == 4
    assert (second.clips_rendered_now, second.clips_skipped_existing) == (0, 4)
    assert {p.name: p.stat().st_mtime_ns for p in (out / "audio").iterdir()} == stamps


def test_empty_sentence_is_refused():
    with pytest.raises(SynthesisError, match="empty sentence"):
        engines.render(voice_by_slug("espeak-en-us-nyc"), [("   ", Path("/tmp/never.wav"))])


def test_voice_of_another_group_is_refused():
    from pasu.core.slurp import Sentence

    with pytest.raises(SynthesisError, match="do not belong to the train group"):
        plan_split("train", [Sentence(None, "hi", None, None)], 0, [voice_by_slug("pico-en-us")])


def _pasu(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pasu.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_unknown_voice_is_a_clear_error_not_a_traceback(tmp_path):
    done = _pasu(
        "data",
        "synth",
        "--split",
        "test",
        "--limit",
        "1",
        "--out",
        str(tmp_path),
        "--voice",
        "espeak-klingon",
    )
    assert done.returncode == 2
    assert "unknown voice 'espeak-klingon'" in done.stderr
    assert "Traceback" not in done.stderr


def test_cli_rejects_a_non_positive_limit(tmp_path):
    done = _pasu("data", "synth", "--split", "test", "--limit", "0", "--out", str(tmp_path))
    assert done.returncode == 2 and "positive integer" in done.stderr


def test_cli_lists_voices_by_group():
    done = _pasu("data", "voices", "--json")
    rows = json.loads(done.stdout)
    assert {r["group"] for r in rows} == {"train", "devel", "test"}
    assert sum(r["group"] == "test" for r in rows) == 6


def test_silent_engine_output_is_a_synthesis_error():
    import numpy as np

    from pasu.eval.tts.effects import trim_silence

    with pytest.raises(SynthesisError, match="silence"):
        trim_silence(np.zeros(16000, np.float32))


def test_rendition_is_read_from_a_slurp_tts_file_name():
    from pasu.core.slurp import rendition_of

    assert rendition_of("tts-train-00004-6-mbrola-de3-en-headset.flac") == 6
    assert rendition_of("tts-test-02973-1-pico-en-us.flac") == 1
    assert rendition_of("audio-1434542201.flac") is None
