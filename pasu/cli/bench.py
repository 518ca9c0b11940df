"""`pasu bench`: the benchmarks (decoders, device, memory, Whisper window, cloud load)."""

import argparse
import sys
from pathlib import Path

from pasu.cli.common import SAMPLES, SHIPPED_MODEL_HELP, Commands, existing_path, positive_int
from pasu.core.errors import PasuError
from pasu.core.modeldir import DEFAULT_MODEL_DIR, TEXT_INTENT_NPZ
from pasu.core.paths import slurp_tts_dir


def cmd_bench_decoders(args: argparse.Namespace) -> int:
    from pasu.eval.bench_decoders import run, write_report

    existing_path(args.model, "model directory")
    existing_path(args.checkpoint, "checkpoint")
    existing_path(args.intent, "intent classifier")
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


def cmd_bench_device(args: argparse.Namespace) -> int:
    from pasu.eval.bench_device import SYSTEMS, run, write_report

    unknown = [n for n in args.system if n not in SYSTEMS]
    if unknown:
        raise PasuError(f"unknown systems {unknown}; choose from {list(SYSTEMS)}")
    existing_path(args.model, "model directory")
    existing_path(args.checkpoint, "checkpoint")
    existing_path(args.intent, "intent classifier")
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


def cmd_bench_memory(args: argparse.Namespace) -> int:
    from pasu.eval.bench_memory import run, write_report

    model = existing_path(args.model, "device model directory")
    intent = existing_path(args.intent, "intent classifier") if args.intent else None
    report = run(model, Path(args.data), args.split, args.limit, intent)
    print(write_report(report, Path(args.json) if args.json else None))
    return 0


def cmd_bench_whisper_window(args: argparse.Namespace) -> int:
    from pasu.eval.bench_whisper_window import run, write_report

    report = run(
        Path(args.data), args.model, args.split, args.limit, args.threads, args.window_bucket
    )
    print(write_report(report, Path(args.json) if args.json else None))
    return 0


def cmd_bench_cloud(args: argparse.Namespace) -> int:
    from pasu.eval.bench_cloud import run, summary_ok, write_report

    audio = [existing_path(a, "audio file") for a in args.audio]
    serve_args = [
        "--model",
        args.model,
        "--model-workers",
        str(args.model_workers),
        "--max-queue",
        str(args.max_queue),
        "--cpu-threads",
        str(args.cpu_threads),
    ]
    report = run(args.url, args.key, audio, args.clients, args.seconds, serve_args)
    print(write_report(report, Path(args.json) if args.json else None))
    return 0 if summary_ok(report) else 1


def _add_decoders(bench_commands: Commands) -> None:
    decoders = bench_commands.add_parser(
        "decoders", help="our device decoder vs ESPnet's BatchBeamSearch, same weights"
    )
    decoders.add_argument("--model", required=True, help="device model directory")
    decoders.add_argument("--checkpoint", required=True, help="torch weights of the same model")
    decoders.add_argument("--data", help=f"SLURP-format corpus (default {slurp_tts_dir()})")
    decoders.add_argument("--split", default="test")
    decoders.add_argument("--limit", type=positive_int, default=300)
    decoders.add_argument("--intent", help="intent classifier (.joblib) to score intents too")
    decoders.add_argument("--threads", type=positive_int, default=1)
    decoders.add_argument("--json", help="write the report (JSON + Markdown table) here")
    decoders.set_defaults(handler=cmd_bench_decoders)


def _add_device(bench_commands: Commands) -> None:
    device = bench_commands.add_parser(
        "device", help="ESPnet baseline vs our runtime with each PASU optimisation (Figure 5)"
    )
    device.add_argument("--model", required=True, help="device model directory")
    device.add_argument("--checkpoint", help="torch weights of the same model (ESPnet row)")
    device.add_argument("--data", help=f"SLURP-format corpus (default {slurp_tts_dir()})")
    device.add_argument("--split", default="test")
    device.add_argument("--limit", type=positive_int, default=500)
    device.add_argument("--system", action="append", default=[], help="only these rows")
    device.add_argument("--intent", help="intent classifier (.joblib)")
    device.add_argument("--json", help="write the report (JSON + Markdown table) here")
    device.set_defaults(handler=cmd_bench_device)


def cmd_bench_real_speech(args: argparse.Namespace) -> int:
    from pasu.eval.bench_real_speech import SYSTEMS, run, write_report

    unknown = [n for n in args.system if n not in SYSTEMS]
    if unknown:
        raise PasuError(f"unknown systems {unknown}; choose from {list(SYSTEMS)}")
    report = run(args.system or None)
    print(write_report(report, Path(args.json) if args.json else None))
    return 0


def _add_real_speech(bench_commands: Commands) -> None:
    real = bench_commands.add_parser(
        "real-speech", help="WER on real human recordings (data/real-speech), every system"
    )
    real.add_argument("--system", action="append", default=[], help="only these rows")
    real.add_argument("--json", help="write the report (JSON + Markdown table) here")
    real.set_defaults(handler=cmd_bench_real_speech)


def _add_memory_window_and_cloud(bench_commands: Commands) -> None:
    memory = bench_commands.add_parser("memory", help="peak RSS of the device runtime")
    memory.add_argument("--model", default=str(DEFAULT_MODEL_DIR), help=SHIPPED_MODEL_HELP)
    memory.add_argument("--data", default=str(slurp_tts_dir()))
    memory.add_argument("--split", default="test")
    memory.add_argument("--limit", type=positive_int, default=300)
    memory.add_argument(
        "--intent",
        default=str(TEXT_INTENT_NPZ),
        help="intent classifier (default: the shipped one)",
    )
    memory.add_argument("--json", help="write the report (JSON + Markdown table) here")
    memory.set_defaults(handler=cmd_bench_memory)

    window = bench_commands.add_parser(
        "whisper-window", help="Whisper short window + guards vs the 30 s padded run"
    )
    window.add_argument("--data", default=str(slurp_tts_dir()))
    window.add_argument("--split", default="test")
    window.add_argument("--model", default="whisper-base")
    window.add_argument("--limit", type=positive_int, default=300)
    window.add_argument("--threads", type=positive_int, default=2)
    window.add_argument("--window-bucket", type=float, help="short-window step in seconds")
    window.add_argument("--json", help="write the report (JSON + Markdown table) here")
    window.set_defaults(handler=cmd_bench_whisper_window)

    load = bench_commands.add_parser("cloud", help="load benchmark of the cloud service")
    load.add_argument("--url", help="a running service; default: start `pasu serve` here")
    load.add_argument("--key", help="API key for --url")
    load.add_argument("--audio", nargs="+", default=[str(p) for p in sorted(SAMPLES.glob("*.wav"))])
    load.add_argument("--clients", type=positive_int, nargs="+", default=[1, 4, 16])
    load.add_argument("--seconds", type=float, default=60.0, help="per client count")
    load.add_argument("--model", default="whisper-base")
    load.add_argument("--model-workers", type=positive_int, default=1)
    load.add_argument("--max-queue", type=int, default=8)
    load.add_argument("--cpu-threads", type=positive_int, default=2)
    load.add_argument("--json", help="write the report (JSON + Markdown table) here")
    load.set_defaults(handler=cmd_bench_cloud)


def add_commands(commands: Commands) -> None:
    bench = commands.add_parser("bench", help="benchmarks")
    bench_commands = bench.add_subparsers(dest="bench_command", required=True)
    _add_decoders(bench_commands)
    _add_device(bench_commands)
    _add_memory_window_and_cloud(bench_commands)
    _add_real_speech(bench_commands)
