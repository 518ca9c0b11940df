import numpy as np

from pasu.speech.frontend import NUM_MEL_BINS, GlobalCmvn, StreamingFbank, compute_fbank


def _speechlike(seconds: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(16000 * seconds)) / 16000
    return (
        0.3 * np.sin(2 * np.pi * 220 * t) * (1 + np.sin(2 * np.pi * 3 * t))
        + 0.01 * rng.standard_normal(t.size)
    ).astype(np.float32)


def test_whole_utterance_has_one_80_dim_frame_per_10_ms():
    features = compute_fbank(_speechlike(2.0))
    # snip_edges: 1 + (32000 - 400) // 160 frames
    assert features.shape == (198, NUM_MEL_BINS)


def test_chunked_features_equal_whole_utterance_features():
    audio = _speechlike(3.1, seed=1)
    cmvn = GlobalCmvn(np.full(NUM_MEL_BINS, 2.0), np.full(NUM_MEL_BINS, 3.0))
    whole = compute_fbank(audio, cmvn)
    stream, parts, start = StreamingFbank(cmvn), [], 0
    rng = np.random.default_rng(2)
    while start < len(audio):
        size = int(rng.integers(1, 3000))
        parts.append(stream.accept(audio[start : start + size]))
        start += size
    assert np.array_equal(np.concatenate(parts), whole)
    assert stream.frames_emitted == len(whole)


def test_cmvn_round_trips_through_a_file(tmp_path):
    cmvn = GlobalCmvn(np.arange(NUM_MEL_BINS), np.full(NUM_MEL_BINS, 2.0))
    cmvn.save(tmp_path / "cmvn.npz")
    loaded = GlobalCmvn.load(tmp_path / "cmvn.npz")
    x = np.ones((3, NUM_MEL_BINS), np.float32)
    assert np.allclose(loaded(x), (1 - np.arange(NUM_MEL_BINS)) / 2.0)
