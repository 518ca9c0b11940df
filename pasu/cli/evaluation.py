"""`pasu eval`: the SLURP evaluation."""

import argparse
from pathlib import Path

from pasu.cli.common import SHIPPED_MODEL_HELP, Commands, existing_path, positive_int
from pasu.core.modeldir import DEFAULT_MODEL_DIR
from pasu.core.paths import slurp_tts_dir


def cmd_eval_slurp(args: argparse.Namespace) -> int:
    from pasu.eval.reports import save_report
    from pasu.eval.slurp_eval.plots import write_plots
    from pasu.eval.slurp_eval.report import format_report, write_system_predictions
    from pasu.eval.slurp_eval.running import run

    model = existing_path(args.model, "device model directory")
    checkpoint = existing_path(args.checkpoint, "torch checkpoint")
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


def add_commands(commands: Commands) -> None:
    evaluation = commands.add_parser("eval", help="evaluations")
    eval_commands = evaluation.add_subparsers(dest="eval_command", required=True)
    slurp = eval_commands.add_parser(
        "slurp", help="WER and intent accuracy vs offload ratio and latency, every system"
    )
    slurp.add_argument("--model", default=str(DEFAULT_MODEL_DIR), help=SHIPPED_MODEL_HELP)
    slurp.add_argument("--checkpoint", help="torch weights for the ESPnet OnDevice baseline")
    slurp.add_argument("--data", default=str(slurp_tts_dir()))
    slurp.add_argument("--split", default="test")
    slurp.add_argument("--limit", type=positive_int, help="a fixed subset of the split")
    slurp.add_argument("--link", default="wifi", choices=("none", "wifi", "5g", "lte"))
    slurp.add_argument("--cloud-model", default="whisper-base")
    slurp.add_argument("--json", help="write the report (JSON + Markdown + predictions) here")
    slurp.add_argument("--plots", help="write PNG plots into this directory")
    slurp.set_defaults(handler=cmd_eval_slurp)
