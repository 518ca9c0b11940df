"""Training the device model on a lent GPU from packed data (`models.packed`).

A lent GPU machine runs one command for at most 10 minutes and is given back after 30 s idle,
so a run here is a sequence of time-boxed calls: each loads the packs, resumes from its local
checkpoint if the machine is still warm (or from shipped-back weights otherwise), trains until
its minutes are spent, validates, and writes fp16 weight shards small enough to come back.
The weights load into `LateContextModel` on the CPU (`pasu train --init-from`), where training
carries on over the full feature cache.
"""

import argparse
import json
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from pasu.core.metrics import wer
from pasu.core.modeldir import CMVN_FILE, is_model_dir
from pasu.models.asr_model import IGNORE_ID, LateContextModel, ModelConfig
from pasu.models.augment import VoicePerturbation, build_voice_perturbation
from pasu.models.loop import (
    TrainingStep,
    build_optimizer,
    build_specaug,
    epoch_batches,
    greedy_ctc_texts,
    new_state,
    run_epochs,
)
from pasu.models.onnx_import import CALIBRATION_BATCHES, calibrate_batchnorms
from pasu.models.packed import PackedUtterance, read_pack
from pasu.models.train import MODEL_SIZES
from pasu.models.weights import load_weights, save_shards
from pasu.speech.frontend import GlobalCmvn
from pasu.speech.tokenizer import Tokenizer


class GpuCorpus:
    """All packed utterances in one device tensor; a batch is one gather, not a loop over rows
    (the loop kept a lent H100 ~60 % idle, waiting on Python)."""

    def __init__(self, utterances: Sequence[PackedUtterance], device: torch.device):
        self.lengths = [len(u.features) for u in utterances]
        self.tokens = [torch.from_numpy(u.tokens) for u in utterances]
        self.device = device
        self.features = torch.from_numpy(np.concatenate([u.features for u in utterances])).to(
            device, torch.float16
        )
        self._frame_starts = _starts(self.lengths, device)
        self._frame_counts = torch.tensor(self.lengths, device=device)
        token_counts = [len(t) for t in self.tokens]
        self._token_starts = _starts(token_counts, device)
        self._token_counts = torch.tensor(token_counts, device=device)
        self._all_tokens = torch.cat(self.tokens).to(device)

    def __len__(self) -> int:
        return len(self.lengths)

    def batch(self, indices: Sequence[int]):
        rows = torch.as_tensor(list(indices), device=self.device)
        lengths = self._frame_counts[rows]
        token_lengths = self._token_counts[rows]
        longest = max(self.lengths[i] for i in indices)
        longest_tokens = max(len(self.tokens[i]) for i in indices)
        features = _gather(self.features, self._frame_starts[rows], lengths, longest, 0.0)
        tokens = _gather(
            self._all_tokens, self._token_starts[rows], token_lengths, longest_tokens, IGNORE_ID
        )
        return features.float(), lengths, tokens, token_lengths


def _starts(counts: Sequence[int], device: torch.device) -> torch.Tensor:
    return torch.tensor(np.concatenate([[0], np.cumsum(counts)[:-1]]), device=device)


def _gather(
    flat: torch.Tensor, starts: torch.Tensor, counts: torch.Tensor, width: int, fill: float
) -> torch.Tensor:
    """Rows `flat[start : start + count]`, padded with `fill` to `width`."""
    offsets = torch.arange(width, device=flat.device)
    valid = offsets[None, :] < counts[:, None]
    index = torch.where(valid, starts[:, None] + offsets[None, :], 0)
    out = flat[index]
    mask = valid if out.dim() == 2 else valid[..., None]
    return out.masked_fill(~mask, fill)


@torch.no_grad()
def validate(model: LateContextModel, corpus: GpuCorpus, tokenizer: Tokenizer) -> dict:
    model.eval()
    losses, hypotheses, references = [], [], []
    for start in range(0, len(corpus), 64):
        indices = list(range(start, min(start + 64, len(corpus))))
        batch = corpus.batch(indices)
        losses.append(float(model(*batch)["loss"]))
        hypotheses += greedy_ctc_texts(model, batch, tokenizer)
        references += [tokenizer.decode(corpus.tokens[i].tolist()) for i in indices]
    model.train()
    return {"loss": float(np.mean(losses)), "ctc_greedy_wer": wer(references, hypotheses)}


def _read_packs(folder: Path, prefix: str) -> list[PackedUtterance]:
    return [u for path in sorted(folder.glob(f"{prefix}-*.npz.xz")) for u in read_pack(path)]


class _GpuHooks:
    """The GPU trainer's side of the loop: batches gathered on the device from the packs (and
    from packs that arrive while it runs), a wall-clock budget, and a validation report with
    shipped-back weights every `report_seconds`."""

    def __init__(self, args, step: TrainingStep, corpus, valid, tokenizer, config, device):
        self.args, self.step, self.corpus, self.valid = args, step, corpus, valid
        self.tokenizer, self.config, self.device = tokenizer, config, device
        self.deadline = time.monotonic() + args.minutes * 60
        self.last_report = time.monotonic()
        self.running: list[torch.Tensor] = []
        self.packs = _pack_names(Path(args.packs))

    def epoch_batches(self, state: dict) -> list[list[int]]:
        packs = Path(self.args.packs)
        if state["batch_in_epoch"] == 0 and _pack_names(packs) != self.packs:
            # More packs arrived while this ran (uploaded by later calls): use them from now on.
            self.packs = _pack_names(packs)
            self.corpus = GpuCorpus(_read_packs(packs, "train"), self.device)
            name, count = self.args.name, len(self.corpus)
            print(f"{name}: {count} train utterances from {len(self.packs)} packs", flush=True)
        return epoch_batches(
            self.corpus.lengths, self.args.max_frames, self.args.seed, state["epoch"]
        )

    def fetch(self, indices: list[int]):
        return self.corpus.batch(indices)

    def out_of_budget(self, state: dict) -> bool:
        return time.monotonic() >= self.deadline

    def after_step(self, state: dict, out: dict) -> None:
        self.running.append(torch.stack([out["loss"].detach(), out["ctc"], out["accuracy"]]))
        if time.monotonic() - self.last_report > self.args.report_seconds:
            self.report(state)

    def after_pass(self, state: dict, finished_epoch: int | None) -> None:
        pass  # validation is by the clock (`report`), not by the epoch

    def report(self, state: dict) -> None:
        scores = validate(self.step.model, self.valid, self.tokenizer)
        loss, ctc, accuracy = torch.stack(self.running).mean(0).tolist()
        record = {
            "step": state["step"],
            "epoch": state["epoch"],
            "lr": self.step.scheduler.get_last_lr()[0],
            "train_loss": round(float(loss), 3),
            "train_ctc": round(float(ctc), 3),
            "train_accuracy": round(float(accuracy), 4),
            **{f"valid_{k}": round(v, 4) for k, v in scores.items()},
        }
        state["history"].append(record)
        print(self.args.name, json.dumps(record), flush=True)
        _publish(self.step.model, self.config, state, Path(self.args.out))
        self.running, self.last_report = [], time.monotonic()


def _resume_or_start(args, step: TrainingStep, corpus: GpuCorpus, checkpoint: Path) -> dict:
    """The local checkpoint of a warm machine, or a new run from `--init`'s weights if given."""
    if checkpoint.is_file():
        saved = torch.load(checkpoint, weights_only=True)
        step.load_state_dict(saved)
        state = saved["state"]
        # a checkpoint from before voice perturbation existed was trained without it
        state.setdefault("augmentation", {"vtlp": 0.0, "tilt_db": 0.0})
        state.setdefault("train_seconds", state.pop("seconds", 0.0))
        if state["augmentation"] != _augmentation(args):
            raise SystemExit(
                f"{checkpoint} was trained with {state['augmentation']}, not "
                f"{_augmentation(args)}: resume with the same --vtlp/--tilt-db"
            )
        return state
    if args.init:
        step.model.load_state_dict(load_weights(Path(args.init)))
        if is_model_dir(args.init):
            first = epoch_batches(corpus.lengths, args.max_frames, args.seed, 0)
            batches = [corpus.batch(indices)[:2] for indices in first[:CALIBRATION_BATCHES]]
            print(f"calibrated {calibrate_batchnorms(step.model, batches)} BatchNorms", flush=True)
    return {**new_state(), "augmentation": _augmentation(args)}


def train(args: argparse.Namespace) -> dict:
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer = Tokenizer(args.tokenizer)
    train_set = _read_packs(Path(args.packs), "train")
    valid_set = _read_packs(Path(args.packs), "devel")
    corpus, valid = GpuCorpus(train_set, device), GpuCorpus(valid_set, device)
    overrides = json.loads(args.overrides)
    config = ModelConfig(vocab_size=tokenizer.vocab_size, **{**MODEL_SIZES[args.size], **overrides})
    model = LateContextModel(config).to(device)
    optimizer, scheduler = build_optimizer(model, args.lr, 1e-6, args.warmup)
    specaug = build_specaug()
    perturb = _voice_perturbation(args, device)
    step = TrainingStep(model, optimizer, scheduler, specaug, perturb, grad_clip=5.0)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    checkpoint = work / "checkpoint.pt"
    state = _resume_or_start(args, step, corpus, checkpoint)
    print(
        f"{args.name}: {len(corpus)} train / {len(valid)} valid utterances, "
        f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters, "
        f"resuming at step {state['step']}",
        flush=True,
    )
    run_epochs(step, _GpuHooks(args, step, corpus, valid, tokenizer, config, device), state)
    scores = validate(model, valid, tokenizer)
    state["final"] = {"step": state["step"], **scores}
    print(args.name, "final", json.dumps(state["final"]), flush=True)
    torch.save({**step.state_dict(), "state": state}, checkpoint)
    _publish(model, config, state, Path(args.out))
    return state


def _augmentation(args: argparse.Namespace) -> dict:
    return {"vtlp": args.vtlp, "tilt_db": args.tilt_db}


def _voice_perturbation(args: argparse.Namespace, device: torch.device) -> VoicePerturbation | None:
    """VTLP and tilt act on un-normalised energies, so they need the CMVN the packs used
    (`pasu pack` saves it beside the packs)."""
    if args.vtlp <= 0 and args.tilt_db <= 0:
        return None
    cmvn_path = Path(args.cmvn) if args.cmvn else Path(args.packs) / CMVN_FILE
    if not cmvn_path.is_file():
        raise SystemExit(
            f"--vtlp/--tilt-db need the CMVN the packs used: {cmvn_path} not found (--cmvn)"
        )
    perturbation = build_voice_perturbation(GlobalCmvn.load(cmvn_path), args.vtlp, args.tilt_db)
    return perturbation.to(device)


def _pack_names(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.glob("train-*.npz.xz"))


def _publish(model: LateContextModel, config: ModelConfig, state: dict, out: Path) -> None:
    """Weights and history where the next call can send them back (written atomically)."""
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    save_shards(model.state_dict(), partial)
    history = {"model_config": config.to_dict(), **state}
    (partial / "history.json").write_text(json.dumps(history, indent=1, default=float) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="gpu")
    parser.add_argument("--packs", required=True, help="folder of train-*.npz.xz, devel-*.npz.xz")
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--work", required=True, help="local folder for the exact checkpoint")
    parser.add_argument("--out", required=True, help="folder for the weight shards to bring back")
    parser.add_argument(
        "--init", help="weights to start from: a folder of weight shards, or a model directory"
    )
    parser.add_argument("--size", default="base", choices=sorted(MODEL_SIZES))
    parser.add_argument("--overrides", default="{}", help="ModelConfig fields as JSON")
    parser.add_argument("--minutes", type=float, default=8.0)
    parser.add_argument("--lr", type=float, default=1.5e-3)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--max-frames", type=int, default=24_000)
    parser.add_argument("--report-seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vtlp", type=float, default=0.0, help="VTLP factor range ±this")
    parser.add_argument("--tilt-db", type=float, default=0.0, help="spectral tilt per term, ±dB")
    parser.add_argument(
        "--cmvn", help="the packs' cmvn.npz for --vtlp/--tilt-db (default: PACKS/cmvn.npz)"
    )
    train(parser.parse_args(argv))


if __name__ == "__main__":
    main()
