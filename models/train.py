"""Training the device model on SLURP-TTS train: hybrid CTC/attention loss with SpecAugment.

A run lives in one directory (`~/.cache/pasu/runs/<name>` by default): tokenizer, CMVN, config,
`train.log`, `checkpoint.pt` (written atomically every few minutes) and `best.pt`. Batches of
an epoch are a pure function of (seed, epoch), and the checkpoint holds the model, optimizer,
scheduler, every random generator and the position inside the epoch, so an interrupted run
carries on exactly where it stopped: `pasu train` again with the same arguments.
"""

import json
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from pasu.core.errors import DataError
from pasu.core.metrics import wer
from pasu.core.modeldir import CMVN_FILE, TOKENIZER_FILE, is_model_dir
from pasu.core.paths import cache_dir
from pasu.core.slurp import load_recordings, load_sentences, rendition_of, unique_sentences
from pasu.models.asr_model import IGNORE_ID, LateContextModel, ModelConfig
from pasu.models.augment import build_voice_perturbation
from pasu.models.features import build_feature_cache, compute_cmvn, iter_cached, split_cache_dir
from pasu.models.loop import (
    TrainingStep,
    build_optimizer,
    build_specaug,
    epoch_batches,
    greedy_ctc_texts,
    new_state,
    rng_state,
    run_epochs,
    save_atomically,
    set_rng_state,
)
from pasu.models.onnx_import import CALIBRATION_BATCHES, calibrate_batchnorms
from pasu.models.weights import load_weights
from pasu.speech.frontend import GlobalCmvn
from pasu.speech.subsampling import SUBSAMPLING_CONTEXT
from pasu.speech.tokenizer import Tokenizer, train_tokenizer

MODEL_SIZES = {
    # d=256, 768-unit FFNs, 128-channel subsampling: ~12 M parameters (see the model card).
    "base": {"d_model": 256, "ffn_units": 768, "decoder_ffn_units": 1024},
    "small": {"d_model": 144, "attention_heads": 4, "ffn_units": 576, "decoder_ffn_units": 576},
    "tiny": {
        "d_model": 64,
        "attention_heads": 2,
        "ffn_units": 128,
        "num_conv_blocks": 2,
        "num_attention_blocks": 1,
        "conv_kernel": 7,
        "decoder_ffn_units": 128,
    },
}


@dataclass
class TrainConfig:
    """Everything that defines a run; stored in `run/train_config.json`."""

    data_dir: str
    model_size: str = "base"
    vocab_size: int = 500
    seed: int = 0
    max_epochs: int = 30
    max_hours: float = 8.0
    max_frames_per_batch: int = 12_000
    peak_lr: float = 2e-3
    warmup_steps: int = 1500
    weight_decay: float = 1e-6
    grad_clip: float = 5.0
    checkpoint_minutes: float = 5.0
    validation_utterances: int = 300
    threads: int = 2
    limit: int | None = None
    max_steps: int | None = None
    # Linear decay of the learning rate to zero at this step (after the warm-up), instead of
    # the inverse-square-root tail; training stops there.
    decay_to_zero_at: int | None = None
    overrides: dict = field(default_factory=dict)
    # Weights to start from (GPU shards or a checkpoint); optimizer and schedule start fresh.
    init_from: str | None = None
    # Only SLURP-TTS train renditions below this (6: the first voices, without the extra ones).
    renditions: int | None = None
    # Voice perturbation (`models.augment`): VTLP factor range ±vtlp_warp, tilt ±tilt_db per term.
    vtlp_warp: float = 0.0
    tilt_db: float = 0.0


@dataclass
class Utterance:
    features: np.ndarray  # float16 (frames, 80), before CMVN
    tokens: np.ndarray  # int64


def _log(run_dir: Path, message: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    with (run_dir / "train.log").open("a") as log:
        log.write(f"{stamp} {message}\n")
    tqdm.write(message)


def prepare_run(config: TrainConfig, run_dir: Path, progress: bool = True):
    """Tokenizer, features and CMVN for a run (each computed once, then reused)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    tokenizer_path = run_dir / TOKENIZER_FILE
    if not tokenizer_path.is_file():
        texts = [s.text for s in unique_sentences(load_sentences("train"))]
        train_tokenizer(texts, run_dir / "tokenizer", config.vocab_size)
    tokenizer = Tokenizer(tokenizer_path)

    data_dir = Path(config.data_dir)
    splits = {}
    for split in ("train", "devel"):
        recordings = load_recordings(data_dir, split, limit=config.limit)
        if split == "train" and config.renditions is not None:
            recordings = _first_renditions(recordings, config.renditions)
        if split == "devel":
            rng = random.Random(config.seed)
            recordings = rng.sample(recordings, min(config.validation_utterances, len(recordings)))
        directory = split_cache_dir(data_dir, split)
        if split == "devel":
            directory = validation_cache_dir(config, len(recordings))
        elif config.limit or config.renditions is not None:
            directory = directory.with_name(
                f"train-limit{config.limit}-renditions{config.renditions}"
            )
        build_feature_cache(recordings, directory, progress=progress)
        splits[split] = directory

    cmvn_path = run_dir / CMVN_FILE
    if not cmvn_path.is_file():
        compute_cmvn(iter_cached(splits["train"])).save(cmvn_path)
    return tokenizer, GlobalCmvn.load(cmvn_path), splits


def _first_renditions(recordings: list, count: int) -> list:
    """The recordings of renditions 0 … count − 1 (SLURP-TTS names them); others are refused."""
    kept = []
    for recording in recordings:
        rendition = rendition_of(recording.audio_path.name)
        if rendition is None:
            raise DataError(f"--renditions needs SLURP-TTS file names, not {recording.audio_path}")
        if rendition < count:
            kept.append(recording)
    return kept


def validation_cache_dir(config: TrainConfig, count: int | None = None) -> Path:
    """Where a run's validation sample (`count` devel recordings) has its features."""
    count = config.validation_utterances if count is None else count
    return split_cache_dir(Path(config.data_dir), "devel").with_name(
        f"devel-sample{count}-seed{config.seed}-limit{config.limit}"
    )


def load_utterances(directory: Path, tokenizer: Tokenizer) -> list[Utterance]:
    utterances = [
        Utterance(u.features, np.array(tokenizer.encode(u.text), np.int64))
        for u in iter_cached(directory)
    ]
    utterances = [u for u in utterances if len(u.tokens) and len(u.features) >= SUBSAMPLING_CONTEXT]
    if not utterances:
        raise DataError(f"no usable utterances in {directory}")
    return utterances


def collate(utterances: Sequence[Utterance], cmvn: GlobalCmvn):
    lengths = torch.tensor([len(u.features) for u in utterances])
    token_lengths = torch.tensor([len(u.tokens) for u in utterances])
    features = torch.zeros(len(utterances), int(lengths.max()), utterances[0].features.shape[1])
    tokens = torch.full((len(utterances), int(token_lengths.max())), IGNORE_ID, dtype=torch.long)
    for i, u in enumerate(utterances):
        features[i, : len(u.features)] = torch.from_numpy(cmvn(u.features.astype(np.float32)))
        tokens[i, : len(u.tokens)] = torch.from_numpy(u.tokens)
    return features, lengths, tokens, token_lengths


@torch.no_grad()
def validate(model, utterances, cmvn, tokenizer, references) -> dict[str, float]:
    model.eval()
    losses, hypotheses = [], []
    for start in range(0, len(utterances), 32):
        batch = collate(utterances[start : start + 32], cmvn)
        losses.append(float(model(*batch)["loss"]))
        hypotheses += greedy_ctc_texts(model, batch, tokenizer)
    model.train()
    return {"loss": float(np.mean(losses)), "ctc_greedy_wer": wer(references, hypotheses)}


class _CpuHooks:
    """The CPU trainer's side of the loop: batches from the feature cache, a progress bar, a
    checkpoint every few minutes, validation and the best weights after each epoch."""

    def __init__(self, config, run_dir, data, step: TrainingStep, model_config, progress):
        self.config, self.run_dir, self.step, self.progress = config, run_dir, step, progress
        self.train_set, self.devel_set, self.devel_refs, self.cmvn, self.tokenizer = data
        self.lengths = [len(u.features) for u in self.train_set]
        self.model_config = model_config
        self.bar, self.running, self.last_checkpoint = None, [], time.monotonic()

    def epoch_batches(self, state: dict) -> list[list[int]]:
        config = self.config
        batches = epoch_batches(
            self.lengths, config.max_frames_per_batch, config.seed, state["epoch"]
        )
        self.bar = tqdm(
            total=len(batches),
            initial=state["batch_in_epoch"],
            disable=not self.progress,
            desc=f"epoch {state['epoch']}",
            unit="batch",
        )
        self.running = []
        return batches

    def fetch(self, indices: list[int]):
        return collate([self.train_set[i] for i in indices], self.cmvn)

    def out_of_budget(self, state: dict) -> bool:
        over_time = state["train_seconds"] >= self.config.max_hours * 3600
        return over_time or _step_limit_reached(self.config, state)

    def after_step(self, state: dict, out: dict) -> None:
        self.running.append({k: float(v.detach()) for k, v in out.items()})
        self.bar.update()
        self.bar.set_postfix(
            loss=f"{self.running[-1]['loss']:.2f}", acc=f"{self.running[-1]['accuracy']:.2f}"
        )
        if time.monotonic() - self.last_checkpoint > self.config.checkpoint_minutes * 60:
            self.checkpoint(state)

    def after_pass(self, state: dict, finished_epoch: int | None) -> None:
        self.bar.close()
        if finished_epoch is None:
            return  # the budget ran out mid-epoch
        model = self.step.model
        scores = validate(model, self.devel_set, self.cmvn, self.tokenizer, self.devel_refs)
        running = self.running
        means = {k: float(np.mean([r[k] for r in running])) for k in running[0]} if running else {}
        record = {
            "epoch": finished_epoch,
            "step": state["step"],
            "train_hours": round(state["train_seconds"] / 3600, 3),
            **{f"train_{k}": round(v, 4) for k, v in means.items()},
            **{f"valid_{k}": round(v, 4) for k, v in scores.items()},
        }
        state["history"].append(record)
        _log(self.run_dir, json.dumps(record))
        if scores["loss"] < state["best_validation"]:
            state["best_validation"] = scores["loss"]
            best = {"model": model.state_dict(), "model_config": self.model_config.to_dict()}
            save_atomically(
                self.run_dir / "best.pt", {**best, "epoch": finished_epoch, "scores": scores}
            )
        self.checkpoint(state)

    def checkpoint(self, state: dict) -> None:
        payload = {**self.step.state_dict(), "rng": rng_state(), "state": state}
        save_atomically(
            self.run_dir / "checkpoint.pt", {**payload, "model_config": self.model_config.to_dict()}
        )
        self.last_checkpoint = time.monotonic()


def _resume_or_start(config: TrainConfig, run_dir: Path, step: TrainingStep) -> dict:
    """The saved state of an interrupted run (weights, optimizer, schedule, random states), or
    a new one, from `init_from`'s weights if given."""
    checkpoint_path = run_dir / "checkpoint.pt"
    if checkpoint_path.is_file():
        saved = torch.load(checkpoint_path, weights_only=True)
        step.load_state_dict(saved)
        set_rng_state(saved["rng"])
        state = saved["state"]
        _log(
            run_dir,
            f"resumed at epoch {state['epoch']} batch {state['batch_in_epoch']} "
            f"(step {state['step']}, {state['train_seconds'] / 3600:.2f} h trained)",
        )
        return state
    if config.init_from:
        step.model.load_state_dict(load_weights(Path(config.init_from)))
        _log(run_dir, f"initialised from {config.init_from}")
    return {**new_state(), "best_validation": float("inf")}


def _calibrate_rebuilt_batchnorms(config, run_dir, model, train_set, cmvn) -> None:
    """A model rebuilt from a model directory has folded BatchNorms: give them statistics."""
    lengths = [len(u.features) for u in train_set]
    calibration = epoch_batches(lengths, config.max_frames_per_batch, config.seed, 0)
    collated = [
        collate([train_set[i] for i in batch], cmvn)[:2]
        for batch in calibration[:CALIBRATION_BATCHES]
    ]
    count = calibrate_batchnorms(model, collated)
    _log(run_dir, f"calibrated {count} rebuilt BatchNorms on {len(collated)} batches")


def train(config: TrainConfig, run_dir: Path, progress: bool = True) -> dict:
    """Train (or resume) a run; returns the final state summary."""
    torch.set_num_threads(config.threads)
    tokenizer, cmvn, splits = prepare_run(config, run_dir, progress)
    model_config = ModelConfig(
        vocab_size=tokenizer.vocab_size, **{**MODEL_SIZES[config.model_size], **config.overrides}
    )
    _check_same_recipe(config, run_dir)
    (run_dir / "train_config.json").write_text(json.dumps(asdict(config), indent=2) + "\n")
    (run_dir / "model_config.json").write_text(json.dumps(model_config.to_dict(), indent=2) + "\n")

    torch.manual_seed(config.seed)
    model = LateContextModel(model_config)
    optimizer, scheduler = build_optimizer(
        model, config.peak_lr, config.weight_decay, config.warmup_steps, config.decay_to_zero_at
    )
    specaug = build_specaug()
    perturb = build_voice_perturbation(cmvn, config.vtlp_warp, config.tilt_db)
    step = TrainingStep(model, optimizer, scheduler, specaug, perturb, config.grad_clip)
    resuming = (run_dir / "checkpoint.pt").is_file()
    state = _resume_or_start(config, run_dir, step)

    train_set = load_utterances(splits["train"], tokenizer)
    devel_set = load_utterances(splits["devel"], tokenizer)
    devel_refs = [tokenizer.decode(u.tokens.tolist()) for u in devel_set]
    if not resuming and config.init_from and is_model_dir(config.init_from):
        _calibrate_rebuilt_batchnorms(config, run_dir, model, train_set, cmvn)
    hours = sum(len(u.features) for u in train_set) / 100 / 3600
    _log(
        run_dir,
        f"{len(train_set)} train utterances ({hours:.1f} h), {len(devel_set)} validation; "
        f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters",
    )
    hooks = _CpuHooks(
        config, run_dir, (train_set, devel_set, devel_refs, cmvn, tokenizer), step, model_config,
        progress,
    )  # fmt: skip
    run_epochs(step, hooks, state, config.max_epochs)
    hooks.checkpoint(state)
    return state


def _check_same_recipe(config: TrainConfig, run_dir: Path) -> None:
    """A resumed run keeps its voice perturbation and learning-rate schedule: other settings
    would change the recipe (and the random stream) halfway without a trace."""
    saved_path = run_dir / "train_config.json"
    if not (run_dir / "checkpoint.pt").is_file() or not saved_path.is_file():
        return
    saved = json.loads(saved_path.read_text())
    flags = {
        "vtlp_warp": "--vtlp",
        "tilt_db": "--tilt-db",
        "decay_to_zero_at": "--decay-to-zero-at",
    }
    for name, flag in flags.items():
        default = TrainConfig.__dataclass_fields__[name].default  # runs saved before the field
        if saved.get(name, default) != getattr(config, name):
            raise DataError(
                f"{run_dir} was trained with {name}={saved.get(name, default)}, not "
                f"{getattr(config, name)}: resume it with the same {flag}"
            )


def _step_limit_reached(config: TrainConfig, state: dict) -> bool:
    limits = [n for n in (config.max_steps, config.decay_to_zero_at) if n is not None]
    return bool(limits) and state["step"] >= min(limits)


def default_run_dir(name: str) -> Path:
    return cache_dir() / "runs" / name
