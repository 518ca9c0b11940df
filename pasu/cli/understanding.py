"""`pasu understand`: the main job, audio files in, transcripts and intents out."""

import argparse
import json
import sys

from pasu.cli.common import Commands, existing_path
from pasu.core.errors import PasuError


def cmd_understand(args: argparse.Namespace) -> int:
    import os

    from pasu.api import Understander

    files = [existing_path(f, "audio file") for f in args.files]
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


def add_commands(commands: Commands) -> None:
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
