"""The memory benchmark measures a fresh process per configuration."""

from pasu.eval.bench_memory import format_report, run


def test_memory_benchmark_reports_growing_peaks_per_stage(tiny_model, tiny_corpus):
    _, model_dir = tiny_model
    report = run(model_dir, tiny_corpus, "devel", limit=2, intent_path=None)
    assert [row["system"] for row in report["rows"]] == ["device runtime"]
    row = report["rows"][0]
    assert 0 < row["after_import_mb"] <= row["after_load_mb"] <= row["peak_mb"]
    assert "peak while decoding" in format_report(report)
