"""Per-voice accuracy of device-model checkpoints, and how it moves when the audio's formants
are warped at inference (vocal tract length): where the model fails to generalise, and whether
voice perturbation in training (`models.augment`) mends it.

For each split, a fixed subset of recordings per (voice, close/far) is decoded by greedy CTC on
the torch weights (the acoustic model alone, no beam search or attention decoder, so the numbers
sit above the model card's full-beam WER). The warp sweep applies `models.augment`'s VTLP warp
with one fixed factor to every close-talk recording's log-mel energies before CMVN: a factor
below 1 moves formants down (a longer vocal tract).

    python -m pasu.eval.voice_sensitivity --checkpoint shipped=models/pretrained/pasu-base \
        --checkpoint new=~/.cache/pasu/runs/NAME/best.pt --json results/voices/report.json
"""

import argparse
from collections import defaultdict
from pathlib import Path

import torch
from tqdm import tqdm

from pasu.core.audio import load_audio
from pasu.core.metrics import wer
from pasu.core.modeldir import CMVN_FILE, DEFAULT_MODEL_DIR, TOKENIZER_FILE, is_model_dir
from pasu.core.paths import slurp_tts_dir
from pasu.core.slurp import Recording, load_recordings
from pasu.eval.reports import machine, module_command, save_report
from pasu.models.augment import source_positions, warp_bands
from pasu.models.checkpoints import load_checkpoint_model
from pasu.models.loop import greedy_ctc_texts
from pasu.speech.frontend import GlobalCmvn, compute_fbank
from pasu.speech.tokenizer import Tokenizer

DEFAULT_WARPS = (0.85, 0.9, 1.0, 1.1, 1.15)


def _voice(recording: Recording) -> str:
    return recording.voice or "unknown"


def per_voice_subset(recordings: list[Recording], per_group: int) -> list[Recording]:
    """Every k-th recording of each (voice, condition): the same subset on every run."""
    groups: dict[tuple[str, str], list[Recording]] = defaultdict(list)
    for recording in recordings:
        groups[(_voice(recording), recording.condition)].append(recording)
    chosen = []
    for key in sorted(groups):
        members = groups[key]
        step = max(len(members) / per_group, 1.0)
        chosen += [members[int(i * step)] for i in range(min(per_group, len(members)))]
    return chosen


class GreedyCtc:
    """A checkpoint's encoder + CTC head, greedy-decoded, on log-mel energies. A model directory,
    or a checkpoint in a run directory, brings its own CMVN and tokenizer; otherwise those of
    `model_dir` are used."""

    def __init__(self, checkpoint: Path, model_dir: Path):
        run = checkpoint if checkpoint.is_dir() else checkpoint.parent
        home = (
            run if (run / CMVN_FILE).is_file() and (run / TOKENIZER_FILE).is_file() else model_dir
        )
        cmvn = GlobalCmvn.load(home / CMVN_FILE)
        tokenizer = Tokenizer(str(home / TOKENIZER_FILE))
        self.model = load_checkpoint_model(checkpoint).eval()
        self.mean = torch.as_tensor(cmvn.mean)
        self.inv_std = torch.as_tensor(cmvn.inv_std)
        self.tokenizer = tokenizer

    @torch.no_grad()
    def __call__(self, energies: torch.Tensor, warp: float = 1.0) -> str:
        features = energies[None]
        if warp != 1.0:
            features = warp_bands(features, source_positions(torch.tensor([warp])))
        features = (features - self.mean) * self.inv_std
        batch = (features, torch.tensor([features.shape[1]]), None, None)
        return greedy_ctc_texts(self.model, batch, self.tokenizer)[0]


def _wer_by_voice(recordings: list[Recording], hypotheses: list[str]) -> dict[str, float]:
    groups: dict[str, tuple[list[str], list[str]]] = defaultdict(lambda: ([], []))
    for recording, hypothesis in zip(recordings, hypotheses, strict=True):
        for key in (f"{_voice(recording)}/{recording.condition}", f"all/{recording.condition}"):
            groups[key][0].append(recording.text)
            groups[key][1].append(hypothesis)
    return {key: wer(refs, hyps) for key, (refs, hyps) in sorted(groups.items())}


def run(
    checkpoints: dict[str, Path],
    model_dir: Path,
    data_dir: Path,
    splits: list[str],
    per_group: int,
    warps: list[float],
    sweep_split: str = "test",
) -> dict:
    if sweep_split not in splits:
        raise ValueError(f"the warp sweep's split {sweep_split!r} is not among {splits}")
    torch.set_num_threads(1)
    decoders = {name: GreedyCtc(path, model_dir) for name, path in checkpoints.items()}
    report: dict = {
        "benchmark": "voice-sensitivity",
        "decoding": "greedy CTC, torch, one thread",
        "per_group": per_group,
        "sweep_split": sweep_split,
        "checkpoints": {name: str(path) for name, path in checkpoints.items()},
        "machine": machine(),
        "by_voice": {},
        "warp_sweep": {},
    }
    for split in splits:
        recordings = per_voice_subset(load_recordings(data_dir, split), per_group)
        energies = [
            torch.from_numpy(compute_fbank(load_audio(r.audio_path)))
            for r in tqdm(recordings, desc=f"features {split}", unit="utt")
        ]
        for name, decode in decoders.items():
            hypotheses = [decode(e) for e in tqdm(energies, desc=f"{name} {split}", unit="utt")]
            report["by_voice"].setdefault(split, {})[name] = _wer_by_voice(recordings, hypotheses)
        if split != sweep_split:
            continue
        close = [(r, e) for r, e in zip(recordings, energies, strict=True) if r.close_talk]
        for name, decode in decoders.items():
            sweep = {}
            for warp in tqdm(warps, desc=f"{name} warps", unit="warp"):
                hypotheses = [decode(e, warp) for _, e in close]
                sweep[str(warp)] = _wer_by_voice([r for r, _ in close], hypotheses)
            report["warp_sweep"][name] = sweep
    return report


def format_report(report: dict) -> str:
    names = list(report["checkpoints"])
    lines = [
        f"Greedy-CTC WER by voice ({report['per_group']} recordings per voice and condition)",
        "",
    ]
    for split, by_name in report["by_voice"].items():
        lines += [
            f"**{split}**",
            "",
            "| voice | " + " | ".join(names) + " |",
            "| --- |" + " --- |" * len(names),
        ]
        for key in by_name[names[0]]:
            cells = " | ".join(f"{100 * by_name[n][key]:.1f} %" for n in names)
            lines.append(f"| {key} | {cells} |")
        lines.append("")
    for name, sweep in report["warp_sweep"].items():
        warps = list(sweep)
        lines += [
            f"**{name}: {report['sweep_split']} close-talk WER with the formants warped by a fixed"
            " factor**",
            "",
            "| voice | " + " | ".join(f"×{w}" for w in warps) + " |",
            "| --- |" + " --- |" * len(warps),
        ]
        for key in sweep[warps[0]]:
            cells = " | ".join(f"{100 * sweep[w][key]:.1f} %" for w in warps)
            lines.append(f"| {key} | {cells} |")
        lines.append("")
    return "\n".join(lines).rstrip()


def _named_checkpoint(value: str) -> tuple[str, Path]:
    name, sep, path = value.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=PATH, got {value!r}")
    checkpoint = Path(path).expanduser()
    if not (checkpoint.is_file() or is_model_dir(checkpoint)):
        raise argparse.ArgumentTypeError(f"no checkpoint or model directory: {checkpoint}")
    return name, checkpoint


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--checkpoint", type=_named_checkpoint, action="append", required=True,
        help="NAME=PATH of torch weights or a model directory; repeat to compare",
    )  # fmt: skip
    parser.add_argument("--model", default=str(DEFAULT_MODEL_DIR), help="tokenizer, CMVN")
    parser.add_argument("--data", default=str(slurp_tts_dir()))
    parser.add_argument("--splits", default="devel,test")
    parser.add_argument("--per-group", type=int, default=40)
    parser.add_argument("--warps", default=",".join(map(str, DEFAULT_WARPS)))
    parser.add_argument("--sweep-split", default="test", help="split of the warp sweep")
    parser.add_argument("--json", help="write the report (JSON + Markdown) here")
    args = parser.parse_args(argv)
    report = run(
        dict(args.checkpoint),
        Path(args.model),
        Path(args.data),
        args.splits.split(","),
        args.per_group,
        [float(w) for w in args.warps.split(",")],
        args.sweep_split,
    )
    command = module_command(__spec__.name, argv)
    print(
        save_report(report, format_report(report), Path(args.json) if args.json else None, command)
    )


if __name__ == "__main__":
    main()
