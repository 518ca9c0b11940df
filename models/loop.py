"""The one training loop of the device model, for the CPU trainer (`pasu.models.train`: the
feature cache, checkpoints every few minutes, validation after each epoch) and the GPU trainer
(`pasu.models.train_gpu`: packs held on the device, a wall-clock budget, reports every minute).

What differs between the two (where batches come from, when to stop, what to do after a step or
a pass over an epoch) is a `TrainingHooks` object. The step (voice perturbation, SpecAugment,
forward, backward, clipping, AdamW under its schedule) and the epoch/batch bookkeeping that lets
an interrupted run resume exactly are written once, here.
"""

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from espnet2.asr.specaug.specaug import SpecAug

from pasu.models.asr_model import LateContextModel
from pasu.models.augment import VoicePerturbation
from pasu.speech.tokenizer import BLANK_ID, Tokenizer


def epoch_batches(
    lengths: Sequence[int], max_frames: int, seed: int, epoch: int
) -> list[list[int]]:
    """Length-bucketed batches under a frame budget, shuffled by (seed, epoch) alone."""
    rng = np.random.default_rng([seed, epoch])
    order = np.argsort(np.asarray(lengths) + rng.uniform(0, 30, len(lengths)), kind="stable")
    batches, batch, longest = [], [], 0
    for index in order:
        longest_if_added = max(longest, lengths[index])
        if batch and longest_if_added * (len(batch) + 1) > max_frames:
            batches.append(batch)
            batch, longest_if_added = [], lengths[index]
        batch.append(int(index))
        longest = longest_if_added
    if batch:
        batches.append(batch)
    rng.shuffle(batches)
    return batches


def warmup_schedule(warmup_steps: int, decay_to_zero_at: int | None = None):
    """Linear warm-up to the peak, then inverse-square-root decay (ESPnet's WarmupLR shape), or
    with `decay_to_zero_at` a straight line from the peak down to zero at that step."""

    def factor(step: int) -> float:
        step = max(step, 1)
        if decay_to_zero_at is None:
            return min(step / warmup_steps, math.sqrt(warmup_steps / step))
        if step < warmup_steps:
            return step / warmup_steps
        return max(0.0, (decay_to_zero_at - step) / max(decay_to_zero_at - warmup_steps, 1))

    return factor


def build_optimizer(
    model: torch.nn.Module,
    peak_lr: float,
    weight_decay: float,
    warmup: int,
    decay_to_zero_at: int | None = None,
):
    """AdamW under the warm-up schedule: the same for CPU and GPU training."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=peak_lr, weight_decay=weight_decay)
    schedule = warmup_schedule(warmup, decay_to_zero_at)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)


def build_specaug() -> SpecAug:
    return SpecAug(
        freq_mask_width_range=(0, 27),
        num_freq_mask=2,
        time_mask_width_ratio_range=(0.0, 0.05),
        num_time_mask=2,
    )


def greedy_ctc_texts(model: LateContextModel, batch, tokenizer: Tokenizer) -> list[str]:
    features, lengths, _, _ = batch
    encoded, encoded_lengths = model.encode(features, lengths)
    best = model.ctc.argmax(encoded)
    texts = []
    for row, n in zip(best, encoded_lengths, strict=True):
        ids = torch.unique_consecutive(row[: int(n)]).tolist()
        texts.append(tokenizer.decode([i for i in ids if i != BLANK_ID]))
    return texts


def rng_state() -> dict:
    """Random states as tensors and plain values, so that checkpoints load with
    `weights_only=True`."""
    kind, keys, position, has_gauss, cached_gaussian = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "numpy": [
            kind,
            torch.from_numpy(keys.astype(np.int64)),
            position,
            has_gauss,
            cached_gaussian,
        ],
        "python": random.getstate(),
    }


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    kind, keys, position, has_gauss, cached_gaussian = state["numpy"]
    np.random.set_state(
        (kind, keys.numpy().astype(np.uint32), position, has_gauss, cached_gaussian)
    )
    random.setstate(state["python"])


def save_atomically(path: Path, payload: dict) -> None:
    partial = path.with_name(path.name + ".partial")
    torch.save(payload, partial)
    partial.replace(path)


@dataclass
class TrainingStep:
    """One optimisation step on a batch (features, lengths, tokens, token lengths)."""

    model: LateContextModel
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    specaug: SpecAug
    perturb: VoicePerturbation | None
    grad_clip: float

    def __call__(self, features, lengths, tokens, token_lengths) -> dict[str, torch.Tensor]:
        if self.perturb is not None:
            features, lengths = self.perturb(features, lengths)
        features, lengths = self.specaug(features, lengths)
        out = self.model(features, lengths, tokens, token_lengths)
        self.optimizer.zero_grad(set_to_none=True)
        out["loss"].backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
        return out

    def state_dict(self) -> dict:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
        }

    def load_state_dict(self, saved: dict) -> None:
        self.model.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        self.scheduler.load_state_dict(saved["scheduler"])


class TrainingHooks(Protocol):
    """What a trainer decides; the loop calls these in order."""

    def epoch_batches(self, state: dict) -> list[list[int]]:
        """The current epoch's batches (utterance indices), at the start of a pass over it."""

    def fetch(self, indices: list[int]) -> tuple[torch.Tensor, ...]:
        """A batch's (features, lengths, tokens, token lengths)."""

    def out_of_budget(self, state: dict) -> bool: ...

    def after_step(self, state: dict, out: dict[str, torch.Tensor]) -> None: ...

    def after_pass(self, state: dict, finished_epoch: int | None) -> None:
        """After a pass over an epoch: `finished_epoch` is its number if it ran to the end,
        None if the budget ran out first."""


def new_state() -> dict:
    """Where a run is: the loop advances these, and a checkpoint stores them."""
    return {"epoch": 0, "batch_in_epoch": 0, "step": 0, "train_seconds": 0.0, "history": []}


def run_epochs(
    step: TrainingStep, hooks: TrainingHooks, state: dict, max_epochs: float = math.inf
) -> dict:
    """Train from `state`'s epoch and batch until `max_epochs` are done or the budget is out."""
    step.model.train()
    while state["epoch"] < max_epochs and not hooks.out_of_budget(state):
        batches = hooks.epoch_batches(state)
        for indices in batches[state["batch_in_epoch"] :]:
            started = time.monotonic()
            out = step(*hooks.fetch(indices))
            state["step"] += 1
            state["batch_in_epoch"] += 1
            state["train_seconds"] += time.monotonic() - started
            hooks.after_step(state, out)
            if hooks.out_of_budget(state):
                break
        finished = state["batch_in_epoch"] >= len(batches)
        if finished:
            state["epoch"] += 1
            state["batch_in_epoch"] = 0
        hooks.after_pass(state, state["epoch"] - 1 if finished else None)
        if not finished:
            break
    return state
