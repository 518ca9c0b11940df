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


def test_model_card_reports_measured_accuracy_and_cost(tiny_corpus, tmp_path):
    from eval.device_eval import evaluate
    from models.card import write_model_card

    config = TrainConfig(
        data_dir=str(tiny_corpus),
        model_size="tiny",
        vocab_size=60,
        max_epochs=1,
        max_frames_per_batch=600,
        warmup_steps=5,
        threads=1,
        validation_utterances=4,
    )
    run_dir = tmp_path / "run"
    train(config, run_dir, progress=False)
    model_dir = export_model_dir(run_dir / "checkpoint.pt", run_dir, tmp_path / "tiny-model")
    accuracy = evaluate(model_dir, tiny_corpus, "devel", limit=4, progress=False)
    assert accuracy.recordings == 4 and accuracy.wer >= 0
    assert accuracy.wer_far is None  # the tiny corpus is all close-talk
    card = write_model_card(
        model_dir,
        run_dir / "checkpoint.pt",
        run_dir,
        [accuracy.to_dict()],
        "pasu model-card (test)",
    )
    text = (model_dir / "MODEL_CARD.md").read_text()
    assert "| devel | 4 |" in text and "GFLOPs per second of audio" in text
    assert card["cost"]["parameters"]["total"] > 0
    assert card["training"]["epochs_completed"] == 1


def test_device_benchmark_compares_systems_side_by_side(tiny_corpus, tmp_path):
    from eval.bench_device import format_table
    from eval.bench_device import run as bench_device

    config = TrainConfig(
        data_dir=str(tiny_corpus),
        model_size="tiny",
        vocab_size=60,
        max_epochs=1,
        max_frames_per_batch=600,
        warmup_steps=5,
        threads=1,
        validation_utterances=4,
    )
    run_dir = tmp_path / "run"
    train(config, run_dir, progress=False)
    model_dir = export_model_dir(run_dir / "checkpoint.pt", run_dir, tmp_path / "model")
    report = bench_device(
        model_dir,
        run_dir / "checkpoint.pt",
        tiny_corpus,
        "devel",
        limit=3,
        systems=["espnet", "ours-no-pilot", "all, tau=0.5s"],
    )
    rows = {s["system"]: s for s in report["systems"]}
    assert set(rows) == {"espnet", "ours-no-pilot", "all, tau=0.5s"}
    assert rows["espnet"]["wer"] == rows["ours-no-pilot"]["wer"]  # same weights, same search
    assert all(s["peak_rss_mb"] > 0 and s["latency_ms"]["p50"] > 0 for s in rows.values())
    assert "p50 vs ESPnet" in format_table(report)
