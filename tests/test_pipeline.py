"""From a corpus to a trained, exported model that both decoders agree on (tiny, seconds)."""

import pytest

torch = pytest.importorskip("torch")

from eval.bench_decoders import format_table, run  # noqa: E402
from models.export import export_model_dir  # noqa: E402
from models.train import TrainConfig, train  # noqa: E402


def test_train_export_and_benchmark_decoders(tiny_corpus, tmp_path):
    config = TrainConfig(
        data_dir=str(tiny_corpus),
        model_size="tiny",
        vocab_size=60,
        max_epochs=2,
        max_frames_per_batch=600,
        warmup_steps=5,
        threads=1,
        validation_utterances=4,
    )
    run_dir = tmp_path / "run"
    train(config, run_dir, progress=False)
    model_dir = export_model_dir(run_dir / "best.pt", run_dir, tmp_path / "model")
    report = run(model_dir, run_dir / "best.pt", tiny_corpus, split="devel", limit=4)
    assert report["utterances"] == 4
    assert report["same_best_hypothesis"] == 1.0
    assert set(report["systems"]) == {"espnet", "ours"}
    assert report["systems"]["espnet"]["wer"] == report["systems"]["ours"]["wer"]
    assert "same best hypothesis: 100.0 %" in format_table(report)
