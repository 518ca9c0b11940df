"""`pasu train`, `train-intent`, `train-cloud-intent`, `pack`, `export` and `model-card`:
training the models and shipping them."""

import argparse
import json
import shutil
import sys
from pathlib import Path

from pasu.cli.common import Commands, existing_path, positive_int
from pasu.core.errors import ConfigError, PasuError
from pasu.core.modeldir import (
    CARD_MARKDOWN_FILE,
    CLOUD_INTENT_PATH,
    CMVN_FILE,
    TOKENIZER_FILE,
)
from pasu.core.paths import slurp_tts_dir


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


def cmd_pack(args: argparse.Namespace) -> int:
    from pasu.models.features import split_cache_dir
    from pasu.models.packed import pack_run
    from pasu.models.train import TrainConfig, default_run_dir, validation_cache_dir

    run_dir = Path(args.run_dir).expanduser() if args.run_dir else default_run_dir(args.run)
    existing_path(str(run_dir / "train_config.json"), "run configuration (run `pasu train` first)")
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


def cmd_model_card(args: argparse.Namespace) -> int:
    from pasu.eval.device_eval import evaluate
    from pasu.models.card import write_model_card
    from pasu.models.train import default_run_dir

    model_dir = existing_path(args.model, "model directory")
    run_dir = Path(args.run_dir).expanduser() if args.run_dir else default_run_dir(args.run)
    existing_path(str(run_dir / f"{args.checkpoint}.pt"), "checkpoint")
    existing_path(str(run_dir / "train_config.json"), "run configuration")
    data_dir = Path(args.data).expanduser() if args.data else slurp_tts_dir()
    intent = existing_path(args.intent, "intent classifier")
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


def add_training_commands(commands: Commands) -> None:
    train = commands.add_parser(
        "train", help="train the device model on SLURP-TTS (resumes a stopped run)"
    )
    train.add_argument("--data", help=f"SLURP-format corpus (default {slurp_tts_dir()})")
    train.add_argument("--run", default="base", help="run name under ~/.cache/pasu/runs")
    train.add_argument("--run-dir", help="run directory (overrides --run)")
    train.add_argument("--size", default="base", choices=("base", "small", "tiny"))
    train.add_argument("--epochs", type=positive_int, default=30)
    train.add_argument("--max-hours", type=float, default=8.0, help="training-time budget")
    train.add_argument("--max-steps", type=positive_int)
    train.add_argument("--limit", type=positive_int, help="only the first N recordings")
    train.add_argument("--threads", type=positive_int, default=2)
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--lr", type=float, default=2e-3, help="peak learning rate")
    train.add_argument("--warmup-steps", type=positive_int, default=1500)
    train.add_argument(
        "--decay-to-zero-at",
        type=positive_int,
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
        type=positive_int,
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


def _add_pack_and_export(commands: Commands) -> None:
    pack = commands.add_parser(
        "pack", help="pack a run's train features small enough to carry to a lent GPU"
    )
    pack.add_argument("--run", default="base")
    pack.add_argument("--run-dir")
    pack.add_argument("--out", required=True, help="folder for train-NN.npz.xz and devel-00")
    pack.add_argument("--packs", type=positive_int, default=4)
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


def add_export_commands(commands: Commands) -> None:
    _add_pack_and_export(commands)

    card = commands.add_parser("model-card", help="measure a device model and write its card")
    card.add_argument("--model", required=True, help="device model directory")
    card.add_argument("--run", default="base")
    card.add_argument("--run-dir")
    card.add_argument("--checkpoint", default="best", choices=("best", "checkpoint"))
    card.add_argument("--data", help=f"SLURP-format corpus (default {slurp_tts_dir()})")
    card.add_argument("--splits", nargs="+", default=["devel", "test"])
    card.add_argument("--limit", type=positive_int, help="a fixed subset of N recordings per split")
    card.add_argument("--intent", help="intent classifier (.joblib)")
    card.add_argument("--notes", help="free text for the card")
    card.set_defaults(handler=cmd_model_card)
