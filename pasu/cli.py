"""The `pasu` command-line program. Each subcommand imports what it needs only when it runs."""

import argparse
import json
import sys
from pathlib import Path

from pasu.errors import PasuError
from pasu.paths import slurp_tts_dir


def _existing(path: str | None, what: str) -> Path | None:
    """A path the user named, checked before any long work starts."""
    if path is None:
        return None
    resolved = Path(path).expanduser()
    if not resolved.exists():
        raise PasuError(f"{what} not found: {resolved}")
    return resolved


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def cmd_data_synth(args: argparse.Namespace) -> int:
    from eval.tts.corpus import synthesize_split
    from eval.tts.voices import voice_by_slug

    voices = [voice_by_slug(slug) for slug in args.voice] if args.voice else None
    out = Path(args.out).expanduser() if args.out else slurp_tts_dir()
    report = synthesize_split(
        args.split,
        out,
        limit=args.limit,
        workers=args.workers,
        seed=args.seed,
        voices=voices,
        progress=not args.quiet,
    )
    print(
        f"{args.split}: {report.clips_planned} clips of {report.sentences} sentences in {out} "
        f"({report.clips_rendered_now} rendered now, {report.clips_skipped_existing} already "
        f"there), {report.audio_s / 3600:.2f} h of audio, {report.wall_s:.0f} s"
    )
    for file_name, error in list(report.failures.items())[:10]:
        print(f"  failed: {file_name}: {error}", file=sys.stderr)
    if report.failures:
        print(f"{len(report.failures)} clips failed; run again to retry them", file=sys.stderr)
        return 1
    return 0


def cmd_data_voices(args: argparse.Namespace) -> int:
    from eval.tts.engines import voice_available
    from eval.tts.voices import VOICE_GROUPS

    rows = [
        {"voice": v.slug, "group": split, "engine": v.engine, "installed": voice_available(v)}
        for split, voices in VOICE_GROUPS.items()
        for v in voices
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for split, voices in VOICE_GROUPS.items():
        ready = [r for r in rows if r["group"] == split and r["installed"]]
        print(f"{split}: {len(ready)} of {len(voices)} voices installed")
        shown = voices if split != "train" or args.all else voices[:0]
        for voice in shown:
            mark = "ok" if voice_available(voice) else "missing"
            print(f"  {voice.slug:40s} {mark}")
    if not args.all:
        print("(train voices: pass --all to list them)")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from models.train import TrainConfig, default_run_dir, train

    config = TrainConfig(
        data_dir=str(Path(args.data).expanduser() if args.data else slurp_tts_dir()),
        model_size=args.size,
        seed=args.seed,
        max_epochs=args.epochs,
        max_hours=args.max_hours,
        max_steps=args.max_steps,
        limit=args.limit,
        threads=args.threads,
    )
    run_dir = Path(args.run_dir).expanduser() if args.run_dir else default_run_dir(args.run)
    state = train(config, run_dir, progress=not args.quiet)
    last = state["history"][-1] if state["history"] else {}
    print(
        f"run {run_dir}: epoch {state['epoch']}, step {state['step']}, "
        f"{state['train_seconds'] / 3600:.2f} h trained; last validation: {last}"
    )
    return 0


def cmd_train_intent(args: argparse.Namespace) -> int:
    from eval.slurp import load_sentences, unique_sentences
    from models.intent import accuracy, train_intent_classifier

    devel, test = load_sentences("devel"), load_sentences("test")
    unlabelled = (
        [] if args.no_self_training else [s.text for s in unique_sentences(load_sentences("train"))]
    )
    classifier = train_intent_classifier(
        [s.text for s in devel], [s.intent for s in devel], unlabelled
    )
    test_accuracy = accuracy(classifier, [s.text for s in test], [s.intent for s in test])
    classifier.info["gold_test_text_accuracy"] = round(test_accuracy, 4)
    classifier.save(Path(args.out))
    print(f"intent classifier -> {args.out}: {classifier.info}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from models.export import export_model_dir, save_float16_state
    from models.train import default_run_dir

    run_dir = Path(args.run_dir).expanduser() if args.run_dir else default_run_dir(args.run)
    checkpoint = run_dir / f"{args.checkpoint}.pt"
    if not checkpoint.is_file():
        raise PasuError(f"no {checkpoint.name} in {run_dir}; train first (`pasu train`)")
    out = Path(args.out)
    export_model_dir(checkpoint, run_dir, out)
    print(f"device model -> {out}")
    if args.torch_out:
        print(f"torch weights (float16) -> {save_float16_state(checkpoint, Path(args.torch_out))}")
    return 0


def cmd_bench_decoders(args: argparse.Namespace) -> int:
    from eval.bench_decoders import run, write_report

    _existing(args.model, "model directory")
    _existing(args.checkpoint, "checkpoint")
    _existing(args.intent, "intent classifier")
    report = run(
        Path(args.model),
        Path(args.checkpoint),
        Path(args.data).expanduser() if args.data else slurp_tts_dir(),
        split=args.split,
        limit=args.limit,
        intent_path=Path(args.intent) if args.intent else None,
        threads=args.threads,
    )
    print(write_report(report, Path(args.json) if args.json else None))
    return 0


def cmd_model_card(args: argparse.Namespace) -> int:
    from eval.device_eval import evaluate
    from models.card import write_model_card
    from models.train import default_run_dir

    model_dir = _existing(args.model, "model directory")
    run_dir = Path(args.run_dir).expanduser() if args.run_dir else default_run_dir(args.run)
    _existing(str(run_dir / f"{args.checkpoint}.pt"), "checkpoint")
    _existing(str(run_dir / "train_config.json"), "run configuration")
    data_dir = Path(args.data).expanduser() if args.data else slurp_tts_dir()
    intent = _existing(args.intent, "intent classifier")
    accuracy = [
        evaluate(model_dir, data_dir, split, args.limit, intent).to_dict() for split in args.splits
    ]
    command = (
        "pasu " + " ".join(sys.argv[1:]) if sys.argv[0].endswith("pasu") else "pasu model-card"
    )
    card = write_model_card(
        model_dir, run_dir / f"{args.checkpoint}.pt", run_dir, accuracy, command, args.notes or ""
    )
    print((model_dir / "MODEL_CARD.md").read_text())
    return 0 if card else 1


def cmd_bench_device(args: argparse.Namespace) -> int:
    from eval.bench_device import SYSTEMS, run, write_report

    unknown = [n for n in args.system if n not in SYSTEMS]
    if unknown:
        raise PasuError(f"unknown systems {unknown}; choose from {list(SYSTEMS)}")
    _existing(args.model, "model directory")
    _existing(args.checkpoint, "checkpoint")
    _existing(args.intent, "intent classifier")
    if "espnet" in args.system and not args.checkpoint:
        raise PasuError("the espnet row needs --checkpoint (torch weights of the same model)")
    report = run(
        Path(args.model),
        Path(args.checkpoint) if args.checkpoint else None,
        Path(args.data).expanduser() if args.data else slurp_tts_dir(),
        args.split,
        args.limit,
        args.system or None,
        Path(args.intent) if args.intent else None,
    )
    command = "pasu " + " ".join(sys.argv[1:])
    print(write_report(report, Path(args.json) if args.json else None, command))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pasu", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    data = commands.add_parser("data", help="SLURP data and the SLURP-TTS speech corpus")
    data_commands = data.add_subparsers(dest="data_command", required=True)

    synth = data_commands.add_parser(
        "synth", help="render SLURP sentences to speech (resumable, deterministic)"
    )
    synth.add_argument("--split", required=True, choices=("train", "devel", "test"))
    synth.add_argument("--limit", type=_positive_int, help="only the first N sentences")
    synth.add_argument("--out", help=f"corpus directory (default {slurp_tts_dir()})")
    synth.add_argument("--workers", type=_positive_int, default=2)
    synth.add_argument("--seed", type=int, default=0)
    synth.add_argument(
        "--voice",
        action="append",
        default=[],
        help="only this voice of the split's group (repeatable)",
    )
    synth.add_argument("--quiet", action="store_true", help="no progress bar")
    synth.set_defaults(handler=cmd_data_synth)

    voices = data_commands.add_parser("voices", help="list the TTS voices of each split")
    voices.add_argument("--all", action="store_true", help="also list every train voice")
    voices.add_argument("--json", action="store_true")
    voices.set_defaults(handler=cmd_data_voices)

    train = commands.add_parser(
        "train", help="train the device model on SLURP-TTS (resumes a stopped run)"
    )
    train.add_argument("--data", help=f"SLURP-format corpus (default {slurp_tts_dir()})")
    train.add_argument("--run", default="base", help="run name under ~/.cache/pasu/runs")
    train.add_argument("--run-dir", help="run directory (overrides --run)")
    train.add_argument("--size", default="base", choices=("base", "small", "tiny"))
    train.add_argument("--epochs", type=_positive_int, default=30)
    train.add_argument("--max-hours", type=float, default=8.0, help="training-time budget")
    train.add_argument("--max-steps", type=_positive_int)
    train.add_argument("--limit", type=_positive_int, help="only the first N recordings")
    train.add_argument("--threads", type=_positive_int, default=2)
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--quiet", action="store_true")
    train.set_defaults(handler=cmd_train)

    intent = commands.add_parser("train-intent", help="train the text intent classifier")
    intent.add_argument("--out", required=True, help="where to write the .joblib file")
    intent.add_argument("--no-self-training", action="store_true")
    intent.set_defaults(handler=cmd_train_intent)

    export = commands.add_parser("export", help="export a trained run as a device model directory")
    export.add_argument("--run", default="base")
    export.add_argument("--run-dir")
    export.add_argument("--checkpoint", default="best", choices=("best", "checkpoint"))
    export.add_argument("--out", required=True, help="device model directory to write")
    export.add_argument("--torch-out", help="also save float16 torch weights here (baseline)")
    export.set_defaults(handler=cmd_export)

    card = commands.add_parser("model-card", help="measure a device model and write its card")
    card.add_argument("--model", required=True, help="device model directory")
    card.add_argument("--run", default="base")
    card.add_argument("--run-dir")
    card.add_argument("--checkpoint", default="best", choices=("best", "checkpoint"))
    card.add_argument("--data", help=f"SLURP-format corpus (default {slurp_tts_dir()})")
    card.add_argument("--splits", nargs="+", default=["devel", "test"])
    card.add_argument(
        "--limit", type=_positive_int, help="a fixed subset of N recordings per split"
    )
    card.add_argument("--intent", help="intent classifier (.joblib)")
    card.add_argument("--notes", help="free text for the card")
    card.set_defaults(handler=cmd_model_card)

    bench = commands.add_parser("bench", help="benchmarks")
    bench_commands = bench.add_subparsers(dest="bench_command", required=True)
    decoders = bench_commands.add_parser(
        "decoders", help="our device decoder vs ESPnet's BatchBeamSearch, same weights"
    )
    decoders.add_argument("--model", required=True, help="device model directory")
    decoders.add_argument("--checkpoint", required=True, help="torch weights of the same model")
    decoders.add_argument("--data", help=f"SLURP-format corpus (default {slurp_tts_dir()})")
    decoders.add_argument("--split", default="test")
    decoders.add_argument("--limit", type=_positive_int, default=300)
    decoders.add_argument("--intent", help="intent classifier (.joblib) to score intents too")
    decoders.add_argument("--threads", type=_positive_int, default=1)
    decoders.add_argument("--json", help="write the report (JSON + Markdown table) here")
    decoders.set_defaults(handler=cmd_bench_decoders)

    device = bench_commands.add_parser(
        "device", help="ESPnet baseline vs our runtime with each PASU optimisation (Figure 5)"
    )
    device.add_argument("--model", required=True, help="device model directory")
    device.add_argument("--checkpoint", help="torch weights of the same model (ESPnet row)")
    device.add_argument("--data", help=f"SLURP-format corpus (default {slurp_tts_dir()})")
    device.add_argument("--split", default="test")
    device.add_argument("--limit", type=_positive_int, default=500)
    device.add_argument("--system", action="append", default=[], help="only these rows")
    device.add_argument("--intent", help="intent classifier (.joblib)")
    device.add_argument("--json", help="write the report (JSON + Markdown table) here")
    device.set_defaults(handler=cmd_bench_device)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except PasuError as error:
        print(f"pasu: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pasu: interrupted; run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
