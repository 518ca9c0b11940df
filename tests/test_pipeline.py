"""From a corpus to a trained, exported model: benchmarks, evaluation and model card (tiny)."""

import pytest

torch = pytest.importorskip("torch")

from eval.bench_decoders import format_table, run  # noqa: E402
from models.export import export_model_dir  # noqa: E402
from models.train import TrainConfig, train  # noqa: E402


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny corpus, a tiny model trained on it for two epochs, and its device directory."""
    from .conftest import make_tiny_corpus

    root = tmp_path_factory.mktemp("pipeline")
    corpus = make_tiny_corpus(root / "corpus")
    config = TrainConfig(
        data_dir=str(corpus),
        model_size="tiny",
        vocab_size=60,
        max_epochs=2,
        max_frames_per_batch=600,
        warmup_steps=5,
        threads=1,
        validation_utterances=4,
    )
    run_dir = root / "run"
    train(config, run_dir, progress=False)
    model_dir = export_model_dir(run_dir / "best.pt", run_dir, root / "model")
    return corpus, run_dir, model_dir


def test_both_decoders_agree_on_the_exported_model(trained):
    corpus, run_dir, model_dir = trained
    report = run(model_dir, run_dir / "best.pt", corpus, split="devel", limit=4)
    assert report["utterances"] == 4
    assert report["same_best_hypothesis"] == 1.0
    assert set(report["systems"]) == {"espnet", "ours"}
    assert report["systems"]["espnet"]["wer"] == report["systems"]["ours"]["wer"]
    assert "same best hypothesis: 100.0 %" in format_table(report)


def test_model_card_reports_measured_accuracy_and_cost(trained):
    from eval.device_eval import evaluate
    from models.card import write_model_card

    corpus, run_dir, model_dir = trained
    accuracy = evaluate(model_dir, corpus, "devel", limit=4, progress=False)
    assert accuracy.recordings == 4 and accuracy.wer >= 0
    assert accuracy.wer_far is None  # the tiny corpus is all close-talk
    card = write_model_card(
        model_dir, run_dir / "best.pt", run_dir, [accuracy.to_dict()], "pasu model-card (test)"
    )
    text = (model_dir / "MODEL_CARD.md").read_text()
    assert "| devel | 4 |" in text and "GFLOPs per second of audio" in text
    assert card["cost"]["parameters"]["total"] > 0
    assert card["training"]["epochs_completed"] == 2  # from the run's checkpoint, not best.pt


def test_device_benchmark_compares_systems_side_by_side(trained):
    from eval.bench_device import format_table as device_table
    from eval.bench_device import run as bench_device

    corpus, run_dir, model_dir = trained
    report = bench_device(
        model_dir,
        run_dir / "best.pt",
        corpus,
        "devel",
        limit=3,
        systems=["espnet", "ours-no-pilot", "all, tau=0.5s"],
    )
    rows = {s["system"]: s for s in report["systems"]}
    assert set(rows) == {"espnet", "ours-no-pilot", "all, tau=0.5s"}
    assert rows["espnet"]["wer"] == rows["ours-no-pilot"]["wer"]  # same weights, same search
    assert all(s["peak_rss_mb"] > 0 and s["latency_ms"]["p50"] > 0 for s in rows.values())
    assert "p50 vs ESPnet" in device_table(report)
