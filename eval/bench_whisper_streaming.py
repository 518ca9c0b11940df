"""What late contextualization costs the pretrained Whisper tiny.en, before any fine-tuning:
the encoder's lower blocks chunk-causal (they could run while the user speaks), the upper
blocks full attention, on unpadded input (the clip plus 1 s of silence), greedy decoding with
the hard stops of `pasu.speech.stopping`. WER on real speech (`data/real-speech`) and on a fixed
subset of a SLURP-TTS split, close-talk and far-field apart. Choose on devel.

    python -m pasu.eval.bench_whisper_streaming --split devel --limit 200 \\
        --json results/whisper-streaming/report.json
"""

import argparse
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from pasu.core.audio import SAMPLE_RATE_HZ, load_audio
from pasu.core.metrics import wer
from pasu.core.paths import slurp_tts_dir
from pasu.core.slurp import fixed_subset, load_recordings
from pasu.eval.bench_real_speech import load_real_speech
from pasu.eval.reports import machine, module_command, save_report
from pasu.models.whisper import Whisper, late_context_masks, whisper_from_ct2
from pasu.speech.ct2_weights import read_ct2_model
from pasu.speech.stopping import token_budget
from pasu.speech.whisper_checkpoints import whisper_tiny_en
from pasu.speech.whisper_frontend import whisper_log_mel
from pasu.speech.whisper_tokens import END_OF_TEXT, TRANSCRIBE_PROMPT, WhisperTokenText

ENCODER_FRAMES_PER_S = 50
# (streaming blocks, chunk seconds): 0 = the whole encoder with full attention.
VARIANTS = [(0, 1.0), (1, 1.0), (2, 0.5), (2, 1.0), (2, 2.0), (3, 1.0), (4, 1.0)]


def _name(streaming: int, chunk_s: float) -> str:
    return "full attention" if streaming == 0 else f"blocks 0-{streaming - 1} causal, {chunk_s:g} s"


def transcribe(model: Whisper, text_of, audio: np.ndarray, streaming: int, chunk_s: float) -> str:
    samples = np.pad(audio, (0, SAMPLE_RATE_HZ))  # 1 s of silence lets Whisper end its text
    mel = torch.from_numpy(whisper_log_mel(samples).T[None, :, :3000].copy())
    frames = (mel.shape[2] + 1) // 2
    layers = model.dims.n_encoder_layers
    masks = late_context_masks(frames, layers, streaming, int(chunk_s * ENCODER_FRAMES_PER_S))
    cap = token_budget(len(audio) / SAMPLE_RATE_HZ)
    tokens = model.greedy(
        mel, TRANSCRIBE_PROMPT, END_OF_TEXT, cap, repetition_stop=True, encoder_masks=masks
    )
    return text_of(tokens)


def run(data_dir: Path, split: str, limit: int) -> dict:
    model = whisper_from_ct2(read_ct2_model(whisper_tiny_en().path))
    text_of = WhisperTokenText.load(whisper_tiny_en().path)
    real = load_real_speech()
    recordings = fixed_subset(load_recordings(data_dir, split), limit)
    audio = {r.id: load_audio(r.audio_path) for r in recordings}
    rows = {}
    for streaming, chunk_s in VARIANTS:
        name = _name(streaming, chunk_s)
        real_texts = [transcribe(model, text_of, r["audio"], streaming, chunk_s) for r in real]
        texts = [
            transcribe(model, text_of, audio[r.id], streaming, chunk_s)
            for r in tqdm(recordings, desc=name, unit="utt")
        ]
        row = {"real_speech": wer([r["text"] for r in real], real_texts)}
        for condition in ("close", "far"):
            chosen = [(r.text, t) for r, t in zip(recordings, texts, strict=True)
                      if r.condition == condition]  # fmt: skip
            row[condition] = wer([r for r, _ in chosen], [t for _, t in chosen])
        rows[name] = {k: round(v, 4) for k, v in row.items()}
    return {
        "benchmark": "whisper-streaming",
        "split": split,
        "recordings": len(recordings),
        "real_speech_recordings": len(real),
        "machine": machine(),
        "variants": rows,
    }


def format_report(report: dict) -> str:
    lines = [
        f"Whisper tiny.en, pretrained, unpadded, greedy + hard stops: WER on SLURP-TTS "
        f"{report['split']} ({report['recordings']} recordings) and real speech "
        f"({report['real_speech_recordings']})",
        "",
        f"| encoder | {report['split']} close-talk | {report['split']} far-field | real speech |",
        "| --- | --- | --- | --- |",
    ]
    for name, row in report["variants"].items():
        lines.append(
            f"| {name} | {100 * row['close']:.1f} % | {100 * row['far']:.1f} % | "
            f"{100 * row['real_speech']:.1f} % |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(slurp_tts_dir()))
    parser.add_argument("--split", default="devel")
    parser.add_argument("--limit", type=int, default=200)
    parser.add_argument("--json", help="write the report (JSON + Markdown table) here")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    report = run(Path(args.data), args.split, args.limit)
    command = module_command(__spec__.name, argv)
    print(
        save_report(report, format_report(report), Path(args.json) if args.json else None, command)
    )


if __name__ == "__main__":
    main()
