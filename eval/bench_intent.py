"""Benchmark of intent classifiers: accuracy on SLURP's gold test text and on transcripts that a
speech recogniser made of the SLURP-TTS test recordings (a predictions file of the SLURP
evaluation), close-talk and far-field apart, every classifier on the same texts.

    python -m pasu.eval.bench_intent --classifier self=PATH --classifier distilled=PATH \\
        --transcripts ours-ondevice=results/slurp-test/predictions-ours-ondevice.jsonl

A classifier is a device `.joblib`/`.npz` or the cloud's MiniLM `.npz`.
"""

import argparse
import json
from pathlib import Path

import numpy as np

from pasu.core.errors import DataError
from pasu.core.paths import slurp_tts_dir
from pasu.core.slurp import iter_recordings, load_sentences
from pasu.eval.reports import module_command, save_report


def transcript_sets(name: str, path: Path, data_dir: Path) -> dict[str, tuple[list, list]]:
    """(texts, gold intents) of a predictions file, for close-talk and far-field recordings."""
    recordings = {r.id: r for r in iter_recordings(data_dir, "test", check_audio=False)}
    sets: dict[str, tuple[list, list]] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        recording = recordings.get(Path(row["file"]).stem)
        if recording is None:
            raise DataError(f"{path}: {row['file']} is not a recording of {data_dir} test")
        texts, intents = sets.setdefault(f"{name} {recording.condition}", ([], []))
        texts.append(row["text"])
        intents.append(recording.intent)
    return dict(sorted(sets.items()))


def run(classifiers: dict[str, Path], transcripts: dict[str, Path], data_dir: Path) -> dict:
    from pasu.cloud.intent import load_intent_file

    test = load_sentences("test")
    sets = {"gold test text": ([s.text for s in test], [s.intent for s in test])}
    for name, path in transcripts.items():
        sets |= transcript_sets(name, path, data_dir)
    loaded = {name: load_intent_file(path) for name, path in classifiers.items()}
    rows = []
    for text_set, (texts, intents) in sets.items():
        row: dict = {"texts": text_set, "count": len(texts)}
        for name, classifier in loaded.items():
            predicted = [p.intent for p in classifier.predict(texts)]
            row[name] = float(np.mean([p == g for p, g in zip(predicted, intents, strict=True)]))
        rows.append(row)
    return {
        "benchmark": "intent",
        "classifiers": {name: str(path) for name, path in classifiers.items()},
        "transcripts": {name: str(path) for name, path in transcripts.items()},
        "rows": rows,
    }


def format_report(report: dict) -> str:
    names = list(report["classifiers"])
    first = names[0]
    header = " | ".join(names + [f"{n} − {first}" for n in names[1:]])
    lines = [
        "Intent accuracy of each classifier on the same texts",
        "",
        f"| texts | count | {header} |",
        "| --- | --- |" + " --- |" * (2 * len(names) - 1),
    ]
    for row in report["rows"]:
        cells = [f"{100 * row[n]:.1f} %" for n in names]
        cells += [f"{100 * (row[n] - row[first]):+.1f}" for n in names[1:]]
        lines.append(f"| {row['texts']} | {row['count']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _named_path(value: str) -> tuple[str, Path]:
    name, sep, path = value.partition("=")
    if not sep or not name or not Path(path).expanduser().is_file():
        raise argparse.ArgumentTypeError(f"expected NAME=PATH of an existing file, got {value!r}")
    return name, Path(path).expanduser()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--classifier", type=_named_path, action="append", required=True,
        help="NAME=PATH of an intent classifier; repeat to compare (the first is the reference)",
    )  # fmt: skip
    parser.add_argument(
        "--transcripts", type=_named_path, action="append", default=[],
        help="NAME=PATH of a SLURP predictions file of the test split; repeatable",
    )  # fmt: skip
    parser.add_argument("--data", default=str(slurp_tts_dir()), help="SLURP-TTS corpus")
    parser.add_argument("--json", help="write the report (JSON + Markdown) here")
    args = parser.parse_args(argv)
    names = [name for name, _ in args.classifier]
    if len(set(names)) < len(names) or {"texts", "count"} & set(names):
        parser.error(f"classifier names must be distinct and not 'texts' or 'count': {names}")
    report = run(dict(args.classifier), dict(args.transcripts), Path(args.data))
    command = module_command(__spec__.name, argv)
    print(
        save_report(report, format_report(report), Path(args.json) if args.json else None, command)
    )


if __name__ == "__main__":
    main()
