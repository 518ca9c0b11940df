"""The `pasu` command-line program. Each subcommand imports what it needs only when it runs."""

import argparse
import sys

from pasu.cli import bench, data, evaluation, offramp, serving, training, understanding
from pasu.core.errors import PasuError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pasu", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    data.add_commands(commands)
    training.add_training_commands(commands)
    serving.add_commands(commands)
    understanding.add_commands(commands)
    offramp.add_commands(commands)
    evaluation.add_commands(commands)
    training.add_export_commands(commands)
    bench.add_commands(commands)
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
