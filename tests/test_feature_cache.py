import numpy as np
import soundfile as sf

from pasu.core.slurp import load_recordings
from pasu.models import features as feature_cache
from pasu.speech.frontend import compute_fbank


def test_cache_holds_device_features_and_resumes(real_layout_corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(feature_cache, "SHARD_SIZE", 2)
    recordings = load_recordings(
        real_layout_corpus, "test", audio_dir=real_layout_corpus / "slurp_real"
    )
    directory = tmp_path / "feats"
    assert feature_cache.build_feature_cache(recordings, directory, workers=1, progress=False) == []
    cached = list(feature_cache.iter_cached(directory))
    assert [u.id for u in cached] == [r.id for r in recordings]
    audio, _ = sf.read(recordings[0].audio_path, dtype="float32")
    assert np.allclose(cached[0].features, compute_fbank(audio), atol=0.05)  # float16 storage
    assert cached[0].text == "wake me up at eight am" and cached[0].close_talk

    stamps = {p: p.stat().st_mtime_ns for p in directory.glob("shard-*.npz")}
    feature_cache.build_feature_cache(recordings, directory, workers=1, progress=False)
    assert {p: p.stat().st_mtime_ns for p in directory.glob("shard-*.npz")} == stamps


def test_undecodable_audio_is_reported_not_fatal(real_layout_corpus, tmp_path):
    recordings = load_recordings(
        real_layout_corpus, "test", audio_dir=real_layout_corpus / "slurp_real"
    )
    recordings[1].audio_path.write_bytes(b"not audio")
    failed = feature_cache.build_feature_cache(recordings, tmp_path / "f", 1, progress=False)
    assert failed == ["audio-1"]
    assert len(list(feature_cache.iter_cached(tmp_path / "f"))) == 2


def test_cmvn_normalises_cached_features(real_layout_corpus, tmp_path):
    recordings = load_recordings(
        real_layout_corpus, "test", audio_dir=real_layout_corpus / "slurp_real"
    )
    feature_cache.build_feature_cache(recordings, tmp_path / "f", 1, progress=False)
    cmvn = feature_cache.compute_cmvn(feature_cache.iter_cached(tmp_path / "f"))
    stacked = np.concatenate(
        [u.features.astype(np.float32) for u in feature_cache.iter_cached(tmp_path / "f")]
    )
    normalised = cmvn(stacked)
    assert np.allclose(normalised.mean(axis=0), 0, atol=1e-2)
    assert np.allclose(normalised.std(axis=0)[normalised.std(axis=0) > 0], 1, atol=2e-2)


def test_a_changed_corpus_does_not_reuse_old_shards(real_layout_corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(feature_cache, "SHARD_SIZE", 2)
    recordings = load_recordings(
        real_layout_corpus, "test", audio_dir=real_layout_corpus / "slurp_real"
    )
    directory = tmp_path / "feats"
    feature_cache.build_feature_cache(recordings[:2], directory, workers=1, progress=False)
    feature_cache.build_feature_cache(recordings[1:], directory, workers=1, progress=False)
    assert [u.id for u in feature_cache.iter_cached(directory)] == [r.id for r in recordings[1:]]
