"""Shared fixtures: a private cache, a tiny room bank, and small corpora in SLURP's layout."""

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Tests never touch the user's ~/.cache/pasu; a small room bank keeps synthesis fast."""
    cache = tmp_path_factory.getbasetemp() / "pasu-cache"
    monkeypatch.setenv("PASU_CACHE", str(cache))
    monkeypatch.setenv("PASU_ROOM_BANK_SIZE", "3")


def tiny_model_config():
    """The tiny model every test that needs a model uses."""
    from pasu.models.asr_model import ModelConfig

    return ModelConfig(
        vocab_size=40,
        subsampling_channels=16,
        d_model=64,
        attention_heads=2,
        ffn_units=128,
        num_conv_blocks=2,
        num_attention_blocks=1,
        conv_kernel=7,
        decoder_ffn_units=128,
    )


def slurp_record(
    slurp_id: int, sentence: str, scenario: str, action: str, files: list[str]
) -> dict:
    return {
        "slurp_id": slurp_id,
        "sentence": sentence,
        "intent": f"{scenario}_{action}",
        "scenario": scenario,
        "action": action,
        "entities": [],
        "recordings": [{"file": f, "wer": 0.0, "ent_wer": 0.0, "status": "correct"} for f in files],
    }


@pytest.fixture
def real_layout_corpus(tmp_path: Path) -> Path:
    """A two-sentence corpus laid out like the real SLURP download (audio in slurp_real/)."""
    audio = tmp_path / "slurp_real"
    audio.mkdir()
    records = [
        slurp_record(
            1, "wake me up at eight am", "alarm", "set", ["audio-1-headset.flac", "audio-1.flac"]
        ),
        slurp_record(2, "what's the weather like", "weather", "query", ["audio-2-headset.flac"]),
    ]
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    tone = 0.1 * np.sin(np.linspace(0, 2000, 16000)).astype(np.float32)
    for record in records:
        for rec in record["recordings"]:
            sf.write(audio / rec["file"], tone, 16000)
    return tmp_path


WORDS = ["turn on the lights", "play some jazz", "wake me up", "what time is it"]


def make_tiny_corpus(root: Path) -> Path:
    """A SLURP-format corpus of tone-coded 'utterances', small enough to train on in seconds."""
    audio = root / "audio"
    audio.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for split, count in (("train", 16), ("devel", 4)):
        lines = []
        for i in range(count):
            name = f"{split}-{i}-headset.flac"
            t = np.arange(int(16000 * rng.uniform(0.8, 1.5))) / 16000
            sf.write(audio / name, 0.2 * np.sin(2 * np.pi * (200 + 100 * (i % 4)) * t), 16000)
            record = slurp_record(i, WORDS[i % 4], "iot", "x", [name])
            record["recordings"][0]["voice"] = f"tone-{i % 2}"
            lines.append(json.dumps(record) + "\n")
        (root / f"{split}.jsonl").write_text("".join(lines))
    return root


@pytest.fixture
def tiny_corpus(tmp_path):
    return make_tiny_corpus(tmp_path)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """A tiny random device model, exported the way shipped models are: (torch model, dir)."""
    torch = pytest.importorskip("torch")
    from pasu.models.asr_model import LateContextModel
    from pasu.models.export import round_weights_to_float16, write_model_dir
    from pasu.speech.frontend import NUM_MEL_BINS, GlobalCmvn
    from pasu.speech.tokenizer import train_tokenizer

    root = tmp_path_factory.mktemp("tiny-model")
    sentences = [
        "wake me up at eight am",
        "play some jazz music",
        "what is the weather like",
        "turn off the kitchen lights",
        "set an alarm for tomorrow morning",
    ] * 20
    tokenizer = train_tokenizer(sentences, root / "sp", 38)  # + sos/eos = 39 < vocab 40
    GlobalCmvn(np.zeros(NUM_MEL_BINS), np.ones(NUM_MEL_BINS)).save(root / "cmvn.npz")
    torch.manual_seed(0)
    config = tiny_model_config()
    model = LateContextModel(config).eval()
    with torch.no_grad():  # peaky outputs, so that searches have clear winners
        model.ctc.ctc_lo.weight.mul_(8)
        model.decoder.output_layer.weight.mul_(8)
    round_weights_to_float16(model)
    write_model_dir(model, tokenizer, root / "cmvn.npz", root / "model")
    return model, root / "model"
