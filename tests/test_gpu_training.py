"""Packed data and the time-boxed GPU trainer (run here on the CPU with a tiny model)."""

import json
from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pasu.models.packed import QUANTISATION_STEP, read_pack, write_packs  # noqa: E402
from pasu.models.train import MODEL_SIZES, TrainConfig, prepare_run, train  # noqa: E402
from pasu.models.train_gpu import main as train_gpu  # noqa: E402
from pasu.models.weights import load_shards, load_weights, save_shards  # noqa: E402


def _prepared(tiny_corpus, run_dir):
    config = TrainConfig(
        data_dir=str(tiny_corpus), model_size="tiny", vocab_size=60, validation_utterances=4
    )
    return config, *prepare_run(config, run_dir, progress=False)


def _pack(tiny_corpus, tmp_path):
    from pasu.models.features import iter_cached

    config, tokenizer, cmvn, splits = _prepared(tiny_corpus, tmp_path / "run")
    packs = tmp_path / "packs"
    written = write_packs(
        iter_cached(splits["train"]), tokenizer, cmvn, packs, "train", 20_000, 5, progress=False
    )
    written += write_packs(
        iter_cached(splits["devel"]), tokenizer, cmvn, packs, "devel", 20_000, 1, progress=False
    )
    return config, tokenizer, cmvn, splits, written


def test_packs_hold_every_utterance_within_the_quantisation_step(tiny_corpus, tmp_path):
    from pasu.models.features import iter_cached

    _, tokenizer, cmvn, splits, written = _pack(tiny_corpus, tmp_path)
    assert len(written) >= 3  # 16 train utterances did not fit one 20 kB pack
    assert all(path.stat().st_size <= 20_000 for path in written)
    packed = [u for path in written if "train" in path.name for u in read_pack(path)]
    originals = list(iter_cached(splits["train"]))
    assert [u.id for u in packed] == [u.id for u in originals]
    for mine, original in zip(packed, originals, strict=True):
        exact = cmvn(original.features.astype(np.float32))
        error = np.abs(mine.features - np.clip(exact, -127 * QUANTISATION_STEP, None))
        assert error.max() <= QUANTISATION_STEP / 2 + 1e-6
        assert mine.tokens.tolist() == tokenizer.encode(original.text)


def test_weight_shards_round_trip_at_half_precision(tmp_path):
    state = {"a": torch.randn(300, 300), "b": torch.randn(10), "n": torch.tensor(7)}
    from pasu.models import weights

    original = weights.SHARD_BYTES
    weights.SHARD_BYTES = 100_000  # a (180 kB at fp16) and b land in separate shards
    try:
        paths = save_shards(state, tmp_path)
    finally:
        weights.SHARD_BYTES = original
    assert len(paths) == 2
    loaded = load_shards(tmp_path)
    assert loaded["n"].item() == 7 and loaded["a"].dtype == torch.float32
    assert torch.allclose(loaded["a"], state["a"], atol=2e-3)


def test_gpu_trainer_resumes_and_its_weights_start_a_cpu_run(tiny_corpus, tmp_path, monkeypatch):
    from pasu.models.augment import VoicePerturbation

    perturbed = []
    forward = VoicePerturbation.forward
    monkeypatch.setattr(
        VoicePerturbation,
        "forward",
        lambda self, *batch: perturbed.append(len(batch[0])) or forward(self, *batch),
    )
    _pack(tiny_corpus, tmp_path)
    run = tmp_path / "run"
    common = [
        "--packs", str(tmp_path / "packs"), "--tokenizer", str(run / "tokenizer.model"),
        "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out"), "--size", "tiny",
        "--minutes", "0.02", "--max-frames", "600", "--warmup", "5",
    ]  # fmt: skip
    train_gpu(common)
    first = json.loads((tmp_path / "out" / "history.json").read_text())
    assert first["model_config"]["d_model"] == 64
    assert not perturbed  # off unless asked for
    train_gpu(common)  # a second call on a warm machine carries on from the checkpoint
    second = json.loads((tmp_path / "out" / "history.json").read_text())
    assert first["final"]["step"] >= 1
    assert second["final"]["step"] > first["final"]["step"]
    with pytest.raises(SystemExit, match="same --vtlp"):
        # not halfway through a run trained without it
        train_gpu([*common, "--vtlp", "0.1", "--cmvn", str(run / "cmvn.npz")])

    # a run with voice perturbation, from the shipped weights; it records its settings
    augmented = [
        "--packs", str(tmp_path / "packs"), "--tokenizer", str(run / "tokenizer.model"),
        "--work", str(tmp_path / "work-vtlp"), "--out", str(tmp_path / "out-vtlp"),
        "--size", "tiny", "--minutes", "0.02", "--max-frames", "600", "--warmup", "5",
        "--init", str(tmp_path / "out"), "--vtlp", "0.1", "--tilt-db", "2",
    ]  # fmt: skip
    with pytest.raises(SystemExit, match="cmvn"):
        train_gpu(augmented)  # the packs were written without their CMVN beside them
    train_gpu([*augmented, "--cmvn", str(run / "cmvn.npz")])
    assert perturbed
    history = json.loads((tmp_path / "out-vtlp" / "history.json").read_text())
    assert history["augmentation"] == {"vtlp": 0.1, "tilt_db": 2.0}

    shipped = load_weights(tmp_path / "out")
    config = TrainConfig(
        data_dir=str(tiny_corpus),
        model_size="tiny",
        vocab_size=60,
        validation_utterances=4,
        max_steps=1,
        threads=1,
        init_from=str(tmp_path / "out"),
        vtlp_warp=0.1,
        tilt_db=2.0,
    )
    perturbed.clear()
    fine_tune = tmp_path / "fine-tune"
    fine_tune.mkdir()
    for name in ("tokenizer.model", "cmvn.npz"):
        (fine_tune / name).write_bytes((run / name).read_bytes())
    train(
        config,
        fine_tune,
        progress=False,
    )
    assert "initialised from" in (fine_tune / "train.log").read_text()
    assert perturbed  # the CPU trainer applies it too
    from pasu.core.errors import DataError

    with pytest.raises(DataError, match="vtlp_warp"):
        train(replace(config, vtlp_warp=0.0, max_steps=2), fine_tune, progress=False)
    tuned = torch.load(fine_tune / "checkpoint.pt", weights_only=True)["model"]
    name = "ctc.ctc_lo.weight"
    assert not torch.equal(tuned[name], shipped[name])  # one step moved it ...
    assert torch.allclose(tuned[name], shipped[name], atol=0.05)  # ... from the shipped weights


def test_a_gathered_batch_equals_the_padded_utterances():
    from pasu.models.asr_model import IGNORE_ID
    from pasu.models.packed import PackedUtterance
    from pasu.models.train_gpu import GpuCorpus

    rng = np.random.default_rng(0)
    utterances = [
        PackedUtterance(
            f"u{i}",
            rng.normal(size=(n, 80)).astype(np.float32),
            rng.integers(1, 50, size=m),
            True,
        )
        for i, (n, m) in enumerate([(30, 4), (12, 7), (25, 1)])
    ]
    corpus = GpuCorpus(utterances, torch.device("cpu"))
    features, lengths, tokens, token_lengths = corpus.batch([2, 0, 1])
    assert features.shape == (3, 30, 80) and tokens.shape == (3, 7)
    assert lengths.tolist() == [25, 30, 12] and token_lengths.tolist() == [1, 4, 7]
    for row, i in enumerate([2, 0, 1]):
        n, m = len(utterances[i].features), len(utterances[i].tokens)
        expected = torch.from_numpy(utterances[i].features).half().float()
        assert torch.equal(features[row, :n], expected)
        assert not features[row, n:].any()
        assert tokens[row, :m].tolist() == utterances[i].tokens.tolist()
        assert (tokens[row, m:] == IGNORE_ID).all()


def test_pack_run_saves_the_cmvn_beside_the_packs(tiny_corpus, tmp_path):
    from pasu.models.packed import pack_run
    from pasu.speech.frontend import GlobalCmvn

    _, _, cmvn, splits = _prepared(tiny_corpus, tmp_path / "run")
    out = tmp_path / "packs"
    written = pack_run(
        tmp_path / "run", splits["train"], splits["devel"], out, packs=1, progress=False
    )
    assert any("train" in p.name for p in written) and any("devel" in p.name for p in written)
    saved = GlobalCmvn.load(out / "cmvn.npz")
    np.testing.assert_allclose(saved.mean, cmvn.mean)
    np.testing.assert_allclose(saved.inv_std, cmvn.inv_std, rtol=1e-6)


def test_both_trainers_start_from_a_shipped_model_directory(tiny_corpus, tmp_path, capsys):
    """A fresh machine has no training checkpoint, only the shipped graphs: training carries on
    from the model rebuilt from them, its folded BatchNorms calibrated on training batches."""
    from pasu.models.asr_model import LateContextModel, ModelConfig
    from pasu.models.export import write_model_dir

    config, tokenizer, cmvn, _, _ = _pack(tiny_corpus, tmp_path)
    run = tmp_path / "run"
    model_config = ModelConfig(vocab_size=tokenizer.vocab_size, **MODEL_SIZES["tiny"])
    torch.manual_seed(1)
    write_model_dir(LateContextModel(model_config), run / "tokenizer.model", run / "cmvn.npz",
                    tmp_path / "shipped")  # fmt: skip
    shipped = load_weights(tmp_path / "shipped")

    train_gpu([
        "--packs", str(tmp_path / "packs"), "--tokenizer", str(run / "tokenizer.model"),
        "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out"), "--size", "tiny",
        "--minutes", "0.02", "--max-frames", "600", "--warmup", "5",
        "--init", str(tmp_path / "shipped"),
    ])  # fmt: skip
    assert "calibrated 3 BatchNorms" in capsys.readouterr().out

    fine_tune = tmp_path / "fine-tune"
    fine_tune.mkdir()
    for name in ("tokenizer.model", "cmvn.npz"):
        (fine_tune / name).write_bytes((run / name).read_bytes())
    train(
        replace(config, max_steps=1, threads=1, init_from=str(tmp_path / "shipped")),
        fine_tune,
        progress=False,
    )
    log = (fine_tune / "train.log").read_text()
    assert "initialised from" in log and "calibrated 3 rebuilt BatchNorms" in log
    tuned = torch.load(fine_tune / "checkpoint.pt", weights_only=True)["model"]
    name = "ctc.ctc_lo.weight"
    assert torch.allclose(tuned[name], shipped[name], atol=0.05)
    assert not torch.equal(tuned[name], shipped[name])
