"""From a corpus to a trained, exported model: benchmarks, evaluation and model card (tiny)."""

import pytest

torch = pytest.importorskip("torch")

from pasu.eval.bench_decoders import format_table, run  # noqa: E402
from pasu.models.checkpoints import export_model_dir  # noqa: E402
from pasu.models.train import TrainConfig, train  # noqa: E402


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
    from pasu.eval.device_eval import evaluate
    from pasu.models.card import write_model_card

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
    from pasu.eval.bench_device import format_table as device_table
    from pasu.eval.bench_device import run as bench_device

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


def test_voice_sensitivity_compares_checkpoints_by_voice_and_warp(trained):
    from pasu.eval.voice_sensitivity import format_report
    from pasu.eval.voice_sensitivity import run as voice_sensitivity

    corpus, run_dir, model_dir = trained
    report = voice_sensitivity(
        {"best": run_dir / "best.pt", "same": run_dir / "best.pt"},
        model_dir,
        corpus,
        ["devel"],
        per_group=2,
        warps=[0.9, 1.0],
        sweep_split="devel",
    )
    by_voice = report["by_voice"]["devel"]
    assert set(by_voice["best"]) == {"tone-0/close", "tone-1/close", "all/close"}
    assert by_voice["best"] == by_voice["same"]  # the same weights decode the same
    assert all(value >= 0 for value in by_voice["best"].values())
    # the unwarped sweep column is the per-voice table's close-talk WER
    close = {k: v for k, v in by_voice["best"].items() if k.endswith("/close")}
    assert report["warp_sweep"]["best"]["1.0"] == close
    table = format_report(report)
    assert "| tone-0/close |" in table and "×0.9" in table
