import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pasu.models.loop import epoch_batches  # noqa: E402
from pasu.models.train import TrainConfig, train  # noqa: E402


def _config(corpus, **changes) -> TrainConfig:
    settings = {
        "model_size": "tiny",
        "vocab_size": 60,
        "max_epochs": 2,
        "max_frames_per_batch": 600,
        "warmup_steps": 5,
        "threads": 1,
        "validation_utterances": 4,
    }
    return TrainConfig(data_dir=str(corpus), **{**settings, **changes})


def test_interrupted_run_resumes_to_the_same_weights(tiny_corpus, tmp_path):
    straight = train(_config(tiny_corpus), tmp_path / "a", progress=False)
    train(_config(tiny_corpus, max_steps=3), tmp_path / "b", progress=False)  # stops mid-epoch
    resumed = train(_config(tiny_corpus), tmp_path / "b", progress=False)
    assert resumed["step"] == straight["step"] and resumed["epoch"] == 2
    a = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert "resumed at epoch 0 batch 3" in (tmp_path / "b" / "train.log").read_text()


def test_a_run_leaves_what_export_needs(tiny_corpus, tmp_path):
    state = train(_config(tiny_corpus, max_epochs=1), tmp_path / "run", progress=False)
    run = tmp_path / "run"
    for name in ("tokenizer.model", "cmvn.npz", "model_config.json", "checkpoint.pt", "best.pt"):
        assert (run / name).is_file(), name
    assert len(state["history"]) == 1
    assert state["history"][0]["valid_ctc_greedy_wer"] >= 0.0


def test_batches_respect_the_frame_budget_and_depend_on_the_epoch_only():
    lengths = list(np.random.default_rng(1).integers(100, 600, 200))
    first = epoch_batches(lengths, 3000, seed=0, epoch=0)
    assert first == epoch_batches(lengths, 3000, seed=0, epoch=0)
    assert first != epoch_batches(lengths, 3000, seed=0, epoch=1)
    assert sorted(i for b in first for i in b) == list(range(200))
    assert all(max(lengths[i] for i in b) * len(b) <= 3000 for b in first)


def test_renditions_keep_the_first_voices_and_refuse_other_corpora(tmp_path):
    from pasu.core.errors import DataError
    from pasu.models.train import _first_renditions

    class Clip:
        def __init__(self, name):
            self.audio_path = tmp_path / name

    clips = [Clip(f"tts-train-00001-{r}-espeak-en-gb-headset.flac") for r in range(8)]
    kept = _first_renditions(clips, 6)
    assert [c.audio_path.name[16] for c in kept] == list("012345")
    with pytest.raises(DataError, match="SLURP-TTS file names"):
        _first_renditions([Clip("audio-1.flac")], 6)


def test_linear_decay_reaches_zero_at_its_step():
    from pasu.models.loop import warmup_schedule

    inverse_sqrt, linear = warmup_schedule(10), warmup_schedule(10, decay_to_zero_at=110)
    assert linear(5) == inverse_sqrt(5) == 0.5
    assert linear(10) == 1.0
    assert linear(60) == 0.5 and inverse_sqrt(60) > 0.4
    assert linear(110) == 0.0 and linear(200) == 0.0


def test_a_decaying_run_stops_at_zero_and_keeps_its_schedule(tiny_corpus, tmp_path):
    from pasu.core.errors import DataError

    config = _config(tiny_corpus, warmup_steps=2, decay_to_zero_at=4)
    state = train(config, tmp_path / "run", progress=False)
    assert state["step"] == 4
    saved = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)
    assert saved["scheduler"]["_last_lr"] == [0.0]
    with pytest.raises(DataError, match="decay_to_zero_at"):
        train(
            _config(tiny_corpus, warmup_steps=2, decay_to_zero_at=8),
            tmp_path / "run",
            progress=False,
        )
