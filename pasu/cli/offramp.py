"""`pasu offramp`: training and calibrating the offload decision."""

import argparse
import json
from pathlib import Path

from pasu.cli.common import Commands, positive_int
from pasu.core.paths import slurp_tts_dir


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


def add_commands(commands: Commands) -> None:
    offramp = commands.add_parser("offramp", help="train and calibrate the offload decision")
    offramp_commands = offramp.add_subparsers(dest="offramp_command", required=True)
    for name, handler, text in (
        ("train", cmd_offramp_train, "train the BiLSTM offramp on devel runs"),
        ("calibrate", cmd_offramp_calibrate, "choose offload thresholds on devel runs"),
    ):
        sub = offramp_commands.add_parser(name, help=text)
        sub.add_argument("--model", required=True, help="device model directory")
        sub.add_argument("--data", default=str(slurp_tts_dir()))
        sub.add_argument("--limit", type=positive_int, help="a fixed subset of devel")
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
