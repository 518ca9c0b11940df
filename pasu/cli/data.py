"""`pasu data`: the SLURP-TTS corpus (synthesis, voices)."""

import argparse
import json
import sys
from pathlib import Path

from pasu.cli.common import Commands, positive_int
from pasu.core.paths import slurp_tts_dir


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


def add_commands(commands: Commands) -> None:
    data = commands.add_parser("data", help="SLURP data and the SLURP-TTS speech corpus")
    data_commands = data.add_subparsers(dest="data_command", required=True)

    synth = data_commands.add_parser(
        "synth", help="render SLURP sentences to speech (resumable, deterministic)"
    )
    synth.add_argument("--split", required=True, choices=("train", "devel", "test"))
    synth.add_argument("--limit", type=positive_int, help="only the first N sentences")
    synth.add_argument("--out", help=f"corpus directory (default {slurp_tts_dir()})")
    synth.add_argument("--workers", type=positive_int, default=2)
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
