"""The SLURP evaluation runner on a small corpus: report structure and consistency."""

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from pasu.eval.slurp_eval.plots import write_plots
from pasu.eval.slurp_eval.report import format_report, write_system_predictions
from pasu.eval.slurp_eval.running import run
from pasu.eval.slurp_eval.systems import LINKS
from pasu.models.intent import train_intent_classifier
from pasu.offramp.scores import perplexity
from tests.conftest import WORDS, slurp_record, tiny_model_config

pytestmark = pytest.mark.filterwarnings("ignore")

RECORDINGS = 50  # the 50-recording run, on a tiny model and synthetic tones


@pytest.fixture(scope="module")
def setup(tiny_model, tmp_path_factory):
    torch = pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("slurp-eval")
    model, model_dir = tiny_model
    checkpoint = root / "model.pt"
    torch.save(
        {"model": model.state_dict(), "model_config": asdict(tiny_model_config())}, checkpoint
    )
    classifier = train_intent_classifier(list(WORDS), ["iot_x", "iot_y", "iot_x", "iot_y"])
    local_model = root / "model"
    import shutil

    shutil.copytree(model_dir, local_model)
    classifier.save(local_model / "intent.joblib")
    corpus = root / "corpus"
    (corpus / "audio").mkdir(parents=True)
    rng = np.random.default_rng(1)
    lines = []
    for i in range(RECORDINGS):
        name = f"test-{i}-headset.flac" if i % 2 else f"test-{i}.flac"
        t = np.arange(int(16000 * rng.uniform(1.6, 2.4))) / 16000
        tone = 0.2 * np.sin(2 * np.pi * (200 + 60 * (i % 5)) * t) * np.sin(2 * np.pi * 2 * t)
        sf.write(corpus / "audio" / name, tone, 16000)
        record = slurp_record(i, WORDS[i % 4], "iot", "x", [name])
        record["recordings"][0]["voice"] = f"tone-{i % 3}"
        lines.append(json.dumps(record) + "\n")
    (corpus / "test.jsonl").write_text("".join(lines))
    return local_model, checkpoint, corpus


def evaluate_small(setup):
    model_dir, checkpoint, corpus = setup
    return run(
        model_dir,
        corpus,
        "test",
        checkpoint=checkpoint,
        cloud_model="whisper-tiny.en",
        cloud_intent="text",
    )


def test_report_structure_and_consistency(setup, tmp_path):
    report, utterances = evaluate_small(setup)
    assert report["utterances"] == len(utterances) == RECORDINGS
    # the offramp files have a fingerprint of their own, apart from the decoding files'
    assert len(report["offramp_fingerprint"]) == 12
    assert report["offramp_fingerprint"] != report["model_fingerprint"]
    fixed = {p["system"]: p for p in report["fixed"]}
    assert set(fixed) == {"OnDevice (ESPnet)", "Ours-OnDevice", "AllOffload"}
    assert fixed["Ours-OnDevice"]["offload_ratio"] == 0.0
    assert fixed["AllOffload"]["offload_ratio"] == 1.0
    for name, points in report["sweeps"].items():
        first, last = points[0], points[-1]
        assert first["offload_ratio"] == 0.0 and last["offload_ratio"] == 1.0
        assert first["wer"] == pytest.approx(fixed["Ours-OnDevice"]["wer"])
        assert last["wer"] == pytest.approx(fixed["AllOffload"]["wer"])
        if not name.startswith("Ours-after-full"):
            assert first["latency_mean_ms"] == pytest.approx(
                fixed["Ours-OnDevice"]["latency_mean_ms"]
            )
            assert last["latency_mean_ms"] == pytest.approx(fixed["AllOffload"]["latency_mean_ms"])
    after_full = report["sweeps"]["Ours-after-full-decode-PPL"][-1]
    assert after_full["latency_mean_ms"] > fixed["AllOffload"]["latency_mean_ms"]
    counts = report["target_counts"]
    assert counts["targets"] + counts["non_targets"] == RECORDINGS
    assert report["table6"] and "target_wer" in report["table6"][0]
    table5 = {row["variant"]: row for row in report["table5"]["rows"]}
    assert list(table5) == ["none", "tau=2s", "tau=1s", "tau=0.5s (default)"]
    assert table5["none"]["offramp_after_full_decode"]
    assert not table5["tau=0.5s (default)"]["offramp_after_full_decode"]
    default = table5["tau=0.5s (default)"]["ondevice"]
    assert default["wer"] == pytest.approx(fixed["Ours-OnDevice"]["wer"])
    assert default["latency_mean_ms"] == pytest.approx(fixed["Ours-OnDevice"]["latency_mean_ms"])
    for row in table5.values():
        for entry in row["offload"]:
            if entry["point"] is not None:
                offloaded = round(entry["point"]["offload_ratio"] * RECORDINGS)
                assert entry["targets"] + entry["non_targets"] == offloaded
    targets = report["paper_targets"]
    for row in targets["offload_vs_naive"]["rows"]:
        assert fixed["AllOffload"]["wer"] <= row["target_wer"] <= fixed["Ours-OnDevice"]["wer"]
    local = targets["ondevice_latency"]
    assert local["latency_ratio"] == pytest.approx(
        fixed["Ours-OnDevice"]["latency_mean_ms"] / fixed["OnDevice (ESPnet)"]["latency_mean_ms"]
    )
    by_voice = report["by_voice"]
    assert set(by_voice) == {"OnDevice (ESPnet)", "Ours-OnDevice", "AllOffload"}
    groups = {f"{u.voice}/{u.condition}" for u in utterances}
    assert len(groups) == 6 and all(set(wers) == groups for wers in by_voice.values())
    chosen = [u for u in utterances if u.voice == "tone-1" and u.condition == "far"]
    assert by_voice["Ours-OnDevice"]["tone-1/far"] == pytest.approx(
        sum(u.device_errors for u in chosen) / sum(u.words for u in chosen)
    )
    table = format_report(report)
    assert "Ours-OnDevice" in table and "target WER" in table and "Table 5" in table
    assert "| tone-1/far |" in table
    assert "The paper's targets" in table

    plots = write_plots(report, tmp_path / "plots")
    assert all(Path(p).stat().st_size > 1000 for p in plots)
    predictions = write_system_predictions(tmp_path, utterances)
    first = json.loads(Path(predictions[0]).read_text().splitlines()[0])
    assert set(first) == {"file", "text", "scenario", "action", "entities"}

    again, _ = evaluate_small(setup)  # everything cached: the same numbers
    assert again["fixed"] == report["fixed"]


def test_links_have_sources():
    for link in LINKS.values():
        assert link.source and link.rtt_ms >= 0
    assert LINKS["lte"].transfer_ms(63_000) == pytest.approx(55 + 80)


def test_the_shipped_threshold_offloads_what_scores_above_it(setup):
    from pasu.eval.slurp_eval.systems import evaluate

    _, utterances = evaluate_small(setup)
    scores = np.array([perplexity(u.pilot or u.full) for u in utterances])
    threshold = float(np.median(scores))
    result = evaluate(utterances, LINKS["wifi"], None, thresholds={"ppl": threshold})
    point = next(p for p in result["fixed"] if p.system == "Ours-PPL (shipped threshold)")
    assert point.threshold == threshold
    assert point.offload_ratio == pytest.approx(np.mean(scores > threshold))
    assert 0.0 < point.offload_ratio < 1.0


def test_predictions_at_the_shipped_threshold_take_the_cloud_answer_when_offloaded(setup, tmp_path):
    _, utterances = evaluate_small(setup)
    scores = np.array([perplexity(u.pilot or u.full) for u in utterances])
    threshold = float(np.median(scores))
    (tmp_path / "offramp.json").write_text(json.dumps({"thresholds": {"ppl": threshold}}))
    written = write_system_predictions(tmp_path, utterances, tmp_path)
    shipped = next(p for p in written if p.endswith("predictions-ours-ppl-shipped.jsonl"))
    rows = [json.loads(line) for line in Path(shipped).read_text().splitlines()]
    assert len(rows) == len(utterances)
    for row, u, score in zip(rows, utterances, scores, strict=True):
        assert row["text"] == (u.cloud_text if score > threshold else u.device_text)


def test_device_runs_are_keyed_by_the_decoding_files_not_the_offramp(tmp_path):
    from pasu.eval.corpus_runs import fingerprint

    for name, content in (("encoder_top.onnx", b"graph"), ("config.json", b"{}")):
        (tmp_path / name).write_bytes(content)
    before = fingerprint(tmp_path)
    (tmp_path / "offramp.json").write_text('{"thresholds": {}}')  # fit on the runs themselves
    assert fingerprint(tmp_path) == before
    (tmp_path / "encoder_top.onnx").write_bytes(b"retrained")
    assert fingerprint(tmp_path) != before


def _utterance(index: int, device_errors: int, cloud_errors: int, espnet_ms=None):
    from pasu.eval.slurp_eval.systems import Utterance

    return Utterance(
        id=str(index),
        condition="close",
        words=10,
        audio_s=2.0,
        gold_intent=None,
        device_errors=device_errors,
        device_text="a",
        device_intent="x",
        device_ms=40.0,
        device_catch_up_ms=10.0,
        device_compute_ms=300.0,
        cloud_errors=cloud_errors,
        cloud_text="a",
        cloud_intent="x",
        cloud_compute_ms=900.0,
        upload_bytes=40_000,
        pilot=None,
        full=None,
        espnet_errors=device_errors if espnet_ms else None,
        espnet_ms=espnet_ms,
    )


def test_naive_share_is_the_line_from_device_to_cloud():
    from pasu.eval.slurp_eval.targets import naive_share

    assert naive_share(0.5, 0.3, 0.4) == pytest.approx(0.5)
    assert naive_share(0.5, 0.3, 0.6) == 0.0
    assert naive_share(0.5, 0.3, 0.2) is None  # below the cloud: random offloading never gets there


def test_least_share_offloads_the_most_doubtful_first_one_recording_at_a_time():
    from pasu.eval.slurp_eval.targets import least_share

    # 100 words; the device makes 20 errors, the cloud 5. Offloading recording 0 (score 9) saves
    # 8 errors, then recording 1 (score 5) saves 4; the rest save nothing.
    utterances = (
        [_utterance(0, 9, 1), _utterance(1, 5, 1)]
        + [_utterance(i, 1, 1) for i in range(2, 8)]
        + [_utterance(8, 0, 1), _utterance(9, 0, 0)]
    )
    scores = np.array([9.0, 5.0, 1, 1, 1, 1, 1, 1, 0.5, 0.0])
    assert least_share(utterances, scores, 0.20) == 0.0
    assert least_share(utterances, scores, 0.12) == pytest.approx(0.1)
    assert least_share(utterances, scores, 0.08) == pytest.approx(0.2)
    assert least_share(utterances, scores, 0.05) is None  # offloading all gives 7 errors


def test_paper_targets_say_met_only_when_the_numbers_meet_them():
    from pasu.eval.slurp_eval.targets import paper_targets
    from pasu.offramp.features import OfframpFeatures

    # A quarter of the recordings hold all the device's errors, and perplexity (of the full
    # decode: no pilots here) finds them.

    utterances = []
    for i in range(40):
        errors = 6 if i < 10 else 0
        log_probs = np.log(np.full(5, 0.2 if errors else 0.95, np.float32))
        u = _utterance(i, errors, 1 if errors else 0, espnet_ms=200.0)
        features = OfframpFeatures(log_probs, log_probs, 2.0)
        utterances.append(type(u)(**{**u.__dict__, "full": features}))
    checks = paper_targets(utterances, LINKS["wifi"], None)
    rows = checks["offload_vs_naive"]["rows"]
    # The doubtful quarter holds all the gain: the offramp needs a third of NaiveHybrid's share.
    for row in rows:
        assert row["Ours-PPL / NaiveHybrid"] <= 0.5
    assert checks["offload_vs_naive"]["met"] == {"Ours-PPL": True}
    near = checks["near_alloffload"]
    assert near["Ours-PPL"]["offload_ratio"] <= 0.25 and near["met"] == {"Ours-PPL": True}
    local = checks["ondevice_latency"]
    assert local["latency_ratio"] == pytest.approx(40 / 200) and local["met"]


def test_timing_check_pairs_the_same_recordings():
    from pasu.eval.timing_check import _compare

    whole = [{"id": "a", "t": "x", "ms": 30.0}, {"id": "b", "t": "y", "ms": 50.0}]
    quiet = [{"id": "b", "t": "y", "ms": 25.0}]
    row = _compare("s", whole, quiet, "t", lambda r: r["ms"])
    assert row["recordings"] == 1 and row["whole_over_quiet"] == pytest.approx(2.0)
    assert row["same_text"] == 1.0
