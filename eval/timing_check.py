"""Timing check for `pasu eval slurp`: the same recordings' latencies from the whole-split run
and from a `--limit N` re-run, side by side.

The whole-split runs may be made two at a time (one single-threaded job per core) to save hours;
a quiet `--limit N` run of the same command, with nothing else running, shows how much that
moved the timings. Both runs come from the run cache (a missing one is run first, as
`pasu eval slurp` would).

    python -m pasu.eval.timing_check --checkpoint ~/.cache/pasu/models/pasu-base.pt --limit 300 \
        --json results/slurp-test300/timing-check.json
"""

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np

from pasu.core.modeldir import DEFAULT_MODEL_DIR
from pasu.core.paths import slurp_tts_dir
from pasu.device.engine import EngineConfig
from pasu.eval.corpus_runs import baseline_runs, device_runs
from pasu.eval.reports import module_command, save_report


def _compare(name: str, whole: list[dict], quiet: list[dict], text_key: str, ms) -> dict:
    by_id = {row["id"]: row for row in whole}
    pairs = [(by_id[row["id"]], row) for row in quiet]
    parallel = np.array([ms(w) for w, _ in pairs])
    alone = np.array([ms(q) for _, q in pairs])
    return {
        "system": name,
        "recordings": len(pairs),
        "whole_run_mean_ms": float(parallel.mean()),
        "quiet_run_mean_ms": float(alone.mean()),
        "whole_over_quiet": float(parallel.mean() / alone.mean()),
        "same_text": float(np.mean([w[text_key] == q[text_key] for w, q in pairs])),
    }


def run(model_dir: Path, checkpoint: Path, data_dir: Path, split: str, limit: int) -> dict:
    default = EngineConfig()
    settings = {
        "Ours-OnDevice (tau=0.5s)": default,
        "tau=2s": replace(default, pilot_interval_s=2.0),
        "tau=1s": replace(default, pilot_interval_s=1.0),
        "no pilots": replace(default, pilots=False),
    }
    rows = [
        _compare(
            name,
            device_runs(model_dir, data_dir, split, None, config),
            device_runs(model_dir, data_dir, split, limit, config),
            "device_text",
            lambda row: row["latency"]["total_ms"],
        )
        for name, config in settings.items()
    ]
    rows.insert(
        0,
        _compare(
            "OnDevice (ESPnet)",
            baseline_runs(checkpoint, model_dir, data_dir, split),
            baseline_runs(checkpoint, model_dir, data_dir, split, limit),
            "espnet_text",
            lambda row: row["latency_ms"],
        ),
    )
    return {"benchmark": "slurp-eval-timing-check", "split": split, "limit": limit, "rows": rows}


def format_report(report: dict) -> str:
    lines = [
        f"Latency after the end of speech on the same {report['limit']} recordings: the whole-split"
        " run vs a quiet re-run",
        "",
        "| system | whole run mean ms | quiet mean ms | whole / quiet | same text |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in report["rows"]:
        lines.append(
            f"| {row['system']} | {row['whole_run_mean_ms']:.1f} | {row['quiet_run_mean_ms']:.1f}"
            f" | {row['whole_over_quiet']:.3f} | {100 * row['same_text']:.1f} % |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(DEFAULT_MODEL_DIR))
    parser.add_argument("--checkpoint", required=True, help="torch weights (the ESPnet runs)")
    parser.add_argument("--data", default=str(slurp_tts_dir()))
    parser.add_argument("--split", default="test")
    parser.add_argument("--limit", type=int, default=300)
    parser.add_argument("--json", help="write the report (JSON + Markdown) here")
    args = parser.parse_args(argv)
    report = run(
        Path(args.model),
        Path(args.checkpoint).expanduser(),
        Path(args.data),
        args.split,
        args.limit,
    )
    command = module_command(__spec__.name, argv)
    json_path = Path(args.json) if args.json else None
    print(save_report(report, format_report(report), json_path, command))


if __name__ == "__main__":
    main()
