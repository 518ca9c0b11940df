"""The `pasu` command-line program. Each subcommand imports what it needs only when it runs."""

import argparse
import json
import shutil
import sys
from pathlib import Path

from pasu.core.errors import ConfigError, PasuError
from pasu.core.modeldir import (
    CARD_MARKDOWN_FILE,
    CLOUD_INTENT_PATH,
    CMVN_FILE,
    DEFAULT_MODEL_DIR,
    TEXT_INTENT_NPZ,
    TOKENIZER_FILE,
)
from pasu.core.paths import REPO_ROOT, slurp_tts_dir

SAMPLES = REPO_ROOT / "samples"

SHIPPED_MODEL_HELP = "device model directory (default: the shipped models/pretrained/pasu-base)"


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
    from pasu.eval.tts.corpus import synthesize_split
    from pasu.eval.tts.voices import voice_by_slug

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
    from pasu.eval.tts.engines import voice_available
    from pasu.eval.tts.voices import VOICE_GROUPS

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


def _adopt_frontend(source: Path, run_dir: Path) -> None:
    """A run started from other weights must use their tokenizer and CMVN."""
    folder = source if source.is_dir() else source.parent
    run_dir.mkdir(parents=True, exist_ok=True)
    for name in (TOKENIZER_FILE, "tokenizer.vocab", CMVN_FILE):
        if (folder / name).is_file() and not (run_dir / name).is_file():
            shutil.copyfile(folder / name, run_dir / name)


def cmd_train(args: argparse.Namespace) -> int:
    from pasu.models.train import TrainConfig, default_run_dir, train

    config = TrainConfig(
        data_dir=str(Path(args.data).expanduser() if args.data else slurp_tts_dir()),
        model_size=args.size,
        seed=args.seed,
        max_epochs=args.epochs,
        max_hours=args.max_hours,
        max_steps=args.max_steps,
        limit=args.limit,
        threads=args.threads,
        peak_lr=args.lr,
        warmup_steps=args.warmup_steps,
        decay_to_zero_at=args.decay_to_zero_at,
        init_from=args.init_from,
        renditions=args.renditions,
        vtlp_warp=args.vtlp,
        tilt_db=args.tilt_db,
    )
    run_dir = Path(args.run_dir).expanduser() if args.run_dir else default_run_dir(args.run)
    if args.init_from:
        _adopt_frontend(Path(args.init_from), run_dir)
    state = train(config, run_dir, progress=not args.quiet)
    last = state["history"][-1] if state["history"] else {}
    print(
        f"run {run_dir}: epoch {state['epoch']}, step {state['step']}, "
        f"{state['train_seconds'] / 3600:.2f} h trained; last validation: {last}"
    )
    return 0


def _train_and_report_intent(
    args: argparse.Namespace, train, what: str, provenance: dict | None = None
) -> int:
    """Fit on devel gold text (plus the train sentences, pseudo-labelled), score on gold test
    text, save."""
    from pasu.core.slurp import load_sentences, unique_sentences
    from pasu.models.intent import accuracy

    devel, test = load_sentences("devel"), load_sentences("test")
    unlabelled = (
        [] if args.no_self_training else [s.text for s in unique_sentences(load_sentences("train"))]
    )
    classifier = train([s.text for s in devel], [s.intent for s in devel], unlabelled)
    test_accuracy = accuracy(classifier, [s.text for s in test], [s.intent for s in test])
    classifier.info |= provenance or {}
    classifier.info["gold_test_text_accuracy"] = round(test_accuracy, 4)
    classifier.save(Path(args.out))
    print(f"{what} -> {args.out}: {classifier.info}")
    return 0


def cmd_train_intent(args: argparse.Namespace) -> int:
    from functools import partial

    from pasu.models.intent import export_numpy_intent, train_intent_classifier
    from pasu.speech.intent import IntentClassifier

    if args.no_self_training and args.teacher is not None:
        raise ConfigError(
            "--teacher labels the train sentences, which --no-self-training leaves out"
        )
    teacher = teacher_path = None
    if not args.no_self_training and (args.teacher or "").lower() != "none":
        from pasu.cloud.intent import load_intent_file

        teacher_path = Path(args.teacher or CLOUD_INTENT_PATH).expanduser()
        teacher = load_intent_file(teacher_path)
    train = partial(train_intent_classifier, teacher=teacher)
    status = _train_and_report_intent(
        args, train, "intent classifier", {"teacher": teacher_path and str(teacher_path)}
    )
    exported = export_numpy_intent(
        IntentClassifier.load(Path(args.out)), Path(args.out).with_suffix(".npz")
    )
    print(f"numpy export for the device -> {exported}")
    return status


def cmd_train_cloud_intent(args: argparse.Namespace) -> int:
    from pasu.cloud.intent import train_embedding_classifier

    def train(texts, intents, unlabelled):
        return train_embedding_classifier(texts, intents, unlabelled, progress=True)

    return _train_and_report_intent(args, train, "cloud intent classifier")


def cmd_serve(args: argparse.Namespace) -> int:
    import os

    import uvicorn

    from pasu.cloud.settings import SETTINGS_ENV, ServiceSettings, check_no_auth_host, read_api_keys

    if args.no_auth:
        check_no_auth_host(args.host)
    settings = ServiceSettings(
        api_keys=() if args.no_auth else read_api_keys(args.api_keys_file),
        require_auth=not args.no_auth,
        max_body_bytes=int(args.max_body_mb * 1024 * 1024),
        max_audio_seconds=args.max_audio_seconds,
        model_workers=args.model_workers,
        max_queue=args.max_queue,
        request_timeout_s=args.timeout,
        model=args.model,
        intent=args.intent,
        intent_path=args.intent_path,
        short_window=args.short_window,
        cpu_threads=args.cpu_threads,
        debug_audio_dir=args.debug_audio_dir,
    )
    os.environ[SETTINGS_ENV] = settings.to_env()
    if args.workers == 1:  # load the model before listening, so start-up errors show here
        from pasu.cloud.app import create_app_from_env

        app = create_app_from_env()
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    else:
        uvicorn.run(
            "pasu.cloud.app:create_app_from_env",
            factory=True,
            host=args.host,
            port=args.port,
            workers=args.workers,
            log_level=args.log_level,
        )
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

    audio = [_existing(a, "audio file") for a in args.audio]
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


def cmd_understand(args: argparse.Namespace) -> int:
    import os

    from pasu.api import Understander

    files = [_existing(f, "audio file") for f in args.files]
    understander = Understander(
        args.model,
        policy=args.policy,
        cloud=args.cloud,
        api_key=args.api_key or os.environ.get("PASU_API_KEY"),
        deadline_s=args.deadline,
    )
    results = []
    with understander:
        for path in files:
            try:
                result = understander.understand(path)
            except PasuError as error:  # one bad file does not stop the others
                print(f"pasu: {path}: {error}", file=sys.stderr)
                continue
            results.append((path, result))
            if args.json:
                print(json.dumps({"file": str(path), **result.to_json()}), flush=True)
    if not args.json:
        print(_understanding_table(results))
    return 0 if len(results) == len(files) else 1


def _understanding_table(results) -> str:
    lines = [
        "| file | text | intent | conf | route | latency ms |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for path, r in results:
        lines.append(
            f"| {path.name} | {r.text} | {r.intent or '-'} | {r.confidence:.2f} | "
            f"{r.route} | {r.latency_ms:.0f} |"
        )
    return "\n".join(lines)


def _runs(args: argparse.Namespace, split: str) -> list[dict]:
    from pasu.eval.corpus_runs import device_runs

    return device_runs(Path(args.model), Path(args.data), split, args.limit)


def cmd_offramp_train(args: argparse.Namespace) -> int:
    from pasu.offramp.fit import train_offramp

    metrics = train_offramp(Path(args.model), _runs(args, "devel"), seed=args.seed)
    print(f"BiLSTM offramp -> {args.model}: {metrics}")
    return 0


def cmd_offramp_calibrate(args: argparse.Namespace) -> int:
    from pasu.eval.corpus_runs import cloud_runs
    from pasu.offramp.fit import calibrate

    rows = _runs(args, "devel")
    cloud = None
    if args.target_wer is not None:
        cloud = cloud_runs(Path(args.data), "devel", args.limit, args.cloud_model)
    config = calibrate(
        Path(args.model),
        rows,
        target_offload=args.target_offload
        if args.target_offload is not None or args.target_wer is not None
        else 0.25,
        target_wer=args.target_wer,
        cloud_rows=cloud,
        default_policy=args.default_policy,
    )
    print(
        json.dumps(
            {k: config[k] for k in ("default_policy", "target", "thresholds", "devel")}, indent=2
        )
    )
    return 0


def cmd_eval_slurp(args: argparse.Namespace) -> int:
    from pasu.eval.reports import save_report
    from pasu.eval.slurp_eval.plots import write_plots
    from pasu.eval.slurp_eval.report import format_report, write_system_predictions
    from pasu.eval.slurp_eval.running import run

    model = _existing(args.model, "device model directory")
    checkpoint = _existing(args.checkpoint, "torch checkpoint")
    report, utterances = run(
        model, Path(args.data), args.split, args.limit, checkpoint, args.link, args.cloud_model
    )
    json_path = Path(args.json) if args.json else None
    if args.plots:
        report["plots"] = write_plots(report, Path(args.plots))
    if json_path:
        report["predictions"] = write_system_predictions(json_path.parent, utterances, model)
    print(save_report(report, format_report(report), json_path))
    return 0


def cmd_pack(args: argparse.Namespace) -> int:
    from pasu.models.features import split_cache_dir
    from pasu.models.packed import pack_run
    from pasu.models.train import TrainConfig, default_run_dir, validation_cache_dir

    run_dir = Path(args.run_dir).expanduser() if args.run_dir else default_run_dir(args.run)
    _existing(str(run_dir / "train_config.json"), "run configuration (run `pasu train` first)")
    config = TrainConfig(**json.loads((run_dir / "train_config.json").read_text()))
    written = pack_run(
        run_dir,
        split_cache_dir(Path(config.data_dir), "train"),
        validation_cache_dir(config),
        Path(args.out),
        packs=args.packs,
        max_bytes=int(args.max_mb * 1e6),
        seed=args.seed,
        skip=args.skip,
    )
    for path in written:
        print(f"{path}  {path.stat().st_size / 1e6:.1f} MB")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from pasu.models.checkpoints import export_model_dir, save_float16_state
    from pasu.models.train import default_run_dir

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
    from pasu.eval.bench_decoders import run, write_report

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
    from pasu.eval.device_eval import evaluate
    from pasu.models.card import write_model_card
    from pasu.models.train import default_run_dir

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
    print((model_dir / CARD_MARKDOWN_FILE).read_text())
    return 0 if card else 1


def cmd_bench_memory(args: argparse.Namespace) -> int:
    from pasu.eval.bench_memory import run, write_report

    model = _existing(args.model, "device model directory")
    intent = _existing(args.intent, "intent classifier") if args.intent else None
    report = run(model, Path(args.data), args.split, args.limit, intent)
    print(write_report(report, Path(args.json) if args.json else None))
    return 0


def cmd_bench_device(args: argparse.Namespace) -> int:
    from pasu.eval.bench_device import SYSTEMS, run, write_report

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
    train.add_argument("--lr", type=float, default=2e-3, help="peak learning rate")
    train.add_argument("--warmup-steps", type=_positive_int, default=1500)
    train.add_argument(
        "--decay-to-zero-at",
        type=_positive_int,
        metavar="STEP",
        help="after the warm-up, lower the learning rate linearly to zero at this step and "
        "stop there (default: inverse-square-root decay)",
    )
    train.add_argument(
        "--init-from",
        help="start from these weights (a folder of GPU weight shards with the tokenizer and "
        "CMVN they were trained with, a checkpoint file, or a model directory such as "
        "models/pretrained/pasu-base); used only when the run is new",
    )
    train.add_argument(
        "--renditions",
        type=_positive_int,
        help="only SLURP-TTS train renditions below this (6: without the extra voices)",
    )
    train.add_argument(
        "--vtlp", type=float, default=0.0, help="voice perturbation: VTLP factor range ±this"
    )
    train.add_argument(
        "--tilt-db", type=float, default=0.0, help="voice perturbation: spectral tilt, ±dB a term"
    )
    train.add_argument("--quiet", action="store_true")
    train.set_defaults(handler=cmd_train)

    intent = commands.add_parser("train-intent", help="train the text intent classifier")
    intent.add_argument("--out", required=True, help="where to write the .joblib file")
    intent.add_argument(
        "--no-self-training", action="store_true", help="gold devel text only, no train sentences"
    )
    intent.add_argument(
        "--teacher",
        help="intent classifier file that labels the train sentences (default: the cloud's "
        "MiniLM classifier, which needs the cloud extra); 'none': the classifier labels them "
        "itself (self-training)",
    )
    intent.set_defaults(handler=cmd_train_intent)

    cloud_intent = commands.add_parser(
        "train-cloud-intent", help="train the cloud's MiniLM intent classifier"
    )
    cloud_intent.add_argument("--out", required=True, help="where to write the .npz file")
    cloud_intent.add_argument("--no-self-training", action="store_true")
    cloud_intent.set_defaults(handler=cmd_train_cloud_intent)

    serve = commands.add_parser("serve", help="run the cloud HTTP service")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument(
        "--workers",
        type=_positive_int,
        default=1,
        help="uvicorn worker processes, each with its own model",
    )
    serve.add_argument(
        "--model-workers",
        type=_positive_int,
        default=1,
        help="utterances each process decodes at once",
    )
    serve.add_argument(
        "--max-queue", type=int, default=8, help="waiting requests per process before answering 503"
    )
    serve.add_argument("--timeout", type=float, default=30.0, help="per-request seconds")
    serve.add_argument("--max-body-mb", type=float, default=10.0)
    serve.add_argument("--max-audio-seconds", type=float, default=30.0)
    serve.add_argument(
        "--model",
        default="whisper-base",
        help="whisper-base, whisper-tiny.en or a CTranslate2 model directory",
    )
    serve.add_argument("--intent", default="minilm", choices=("minilm", "text"))
    serve.add_argument("--intent-path", help="intent classifier file (default: the shipped one)")
    serve.add_argument(
        "--short-window",
        action="store_true",
        help="run Whisper on a 10 s window with guards (faster, +1 WER point measured)",
    )
    serve.add_argument("--cpu-threads", type=_positive_int, default=2)
    serve.add_argument("--api-keys-file", help="one key per line; also read from $PASU_API_KEYS")
    serve.add_argument(
        "--no-auth", action="store_true", help="no API keys (development on a loopback host only)"
    )
    serve.add_argument("--debug-audio-dir", help="keep every received clip here (off by default)")
    serve.add_argument("--log-level", default="info")
    serve.set_defaults(handler=cmd_serve)

    understand = commands.add_parser(
        "understand", help="understand audio files: transcript, intent, route, latency"
    )
    understand.add_argument("files", nargs="+", help="audio files (WAV, FLAC, OGG, ...)")
    understand.add_argument("--json", action="store_true", help="one JSON object per file")
    understand.add_argument("--model", help="device model directory (default: the shipped one)")
    understand.add_argument(
        "--cloud", help="cloud service URL (default: the cloud model in this process)"
    )
    understand.add_argument("--api-key", help="cloud API key (default: $PASU_API_KEY)")
    understand.add_argument(
        "--policy",
        choices=("ppl", "lstm", "never", "always"),
        help="offload policy (default: the model's calibrated one)",
    )
    understand.add_argument(
        "--deadline",
        type=float,
        default=3.0,
        help="seconds to wait for the cloud before answering on the device",
    )
    understand.set_defaults(handler=cmd_understand)

    offramp = commands.add_parser("offramp", help="train and calibrate the offload decision")
    offramp_commands = offramp.add_subparsers(dest="offramp_command", required=True)
    for name, handler, text in (
        ("train", cmd_offramp_train, "train the BiLSTM offramp on devel runs"),
        ("calibrate", cmd_offramp_calibrate, "choose offload thresholds on devel runs"),
    ):
        sub = offramp_commands.add_parser(name, help=text)
        sub.add_argument("--model", required=True, help="device model directory")
        sub.add_argument("--data", default=str(slurp_tts_dir()))
        sub.add_argument("--limit", type=_positive_int, help="a fixed subset of devel")
        sub.set_defaults(handler=handler)
        if name == "train":
            sub.add_argument("--seed", type=int, default=0)
        else:
            target = sub.add_mutually_exclusive_group()
            target.add_argument(
                "--target-offload", type=float, help="share of utterances to offload (default 0.25)"
            )
            target.add_argument(
                "--target-wer", type=float, help="overall WER to reach with the least offloading"
            )
            sub.add_argument("--cloud-model", default="whisper-base")
            sub.add_argument("--default-policy", default="lstm", choices=("lstm", "ppl"))

    evaluation = commands.add_parser("eval", help="evaluations")
    eval_commands = evaluation.add_subparsers(dest="eval_command", required=True)
    slurp = eval_commands.add_parser(
        "slurp", help="WER and intent accuracy vs offload ratio and latency, every system"
    )
    slurp.add_argument("--model", default=str(DEFAULT_MODEL_DIR), help=SHIPPED_MODEL_HELP)
    slurp.add_argument("--checkpoint", help="torch weights for the ESPnet OnDevice baseline")
    slurp.add_argument("--data", default=str(slurp_tts_dir()))
    slurp.add_argument("--split", default="test")
    slurp.add_argument("--limit", type=_positive_int, help="a fixed subset of the split")
    slurp.add_argument("--link", default="wifi", choices=("none", "wifi", "5g", "lte"))
    slurp.add_argument("--cloud-model", default="whisper-base")
    slurp.add_argument("--json", help="write the report (JSON + Markdown + predictions) here")
    slurp.add_argument("--plots", help="write PNG plots into this directory")
    slurp.set_defaults(handler=cmd_eval_slurp)

    pack = commands.add_parser(
        "pack", help="pack a run's train features small enough to carry to a lent GPU"
    )
    pack.add_argument("--run", default="base")
    pack.add_argument("--run-dir")
    pack.add_argument("--out", required=True, help="folder for train-NN.npz.xz and devel-00")
    pack.add_argument("--packs", type=_positive_int, default=4)
    pack.add_argument("--max-mb", type=float, default=42.0, help="size of each pack")
    pack.add_argument(
        "--skip",
        type=int,
        default=0,
        help="leave out the first N of the shuffled order (8000 × the packs of an earlier call)",
    )
    pack.add_argument("--seed", type=int, default=0)
    pack.set_defaults(handler=cmd_pack)

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

    memory = bench_commands.add_parser("memory", help="peak RSS of the device runtime")
    memory.add_argument("--model", default=str(DEFAULT_MODEL_DIR), help=SHIPPED_MODEL_HELP)
    memory.add_argument("--data", default=str(slurp_tts_dir()))
    memory.add_argument("--split", default="test")
    memory.add_argument("--limit", type=_positive_int, default=300)
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
    window.add_argument("--limit", type=_positive_int, default=300)
    window.add_argument("--threads", type=_positive_int, default=2)
    window.add_argument("--window-bucket", type=float, help="short-window step in seconds")
    window.add_argument("--json", help="write the report (JSON + Markdown table) here")
    window.set_defaults(handler=cmd_bench_whisper_window)

    load = bench_commands.add_parser("cloud", help="load benchmark of the cloud service")
    load.add_argument("--url", help="a running service; default: start `pasu serve` here")
    load.add_argument("--key", help="API key for --url")
    load.add_argument("--audio", nargs="+", default=[str(p) for p in sorted(SAMPLES.glob("*.wav"))])
    load.add_argument("--clients", type=_positive_int, nargs="+", default=[1, 4, 16])
    load.add_argument("--seconds", type=float, default=60.0, help="per client count")
    load.add_argument("--model", default="whisper-base")
    load.add_argument("--model-workers", type=_positive_int, default=1)
    load.add_argument("--max-queue", type=int, default=8)
    load.add_argument("--cpu-threads", type=_positive_int, default=2)
    load.add_argument("--json", help="write the report (JSON + Markdown table) here")
    load.set_defaults(handler=cmd_bench_cloud)
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
