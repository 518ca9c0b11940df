"""The SLURP evaluation's plots: WER against offload ratio, latency against WER."""

from pathlib import Path


def _plot(report: dict, x, y, labels: tuple[str, str, str], path: Path) -> str:
    """One figure: a line per swept policy, a marker per fixed system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4.5))
    for name, points in report["sweeps"].items():
        axis.plot(
            [x(p) for p in points],
            [y(p) for p in points],
            marker=".",
            label=name,
            linestyle="--" if name == "NaiveHybrid" else "-",
        )
    # Random offloading's expectation is linear in α in both WER and latency, so the paper's
    # NaiveHybrid line is the segment between never and always offloading.
    fixed = {point["system"]: point for point in report["fixed"]}
    ends = [fixed["Ours-OnDevice"], fixed["AllOffload"]]
    axis.plot(
        [x(p) for p in ends],
        [y(p) for p in ends],
        color="grey",
        linestyle=":",
        label="NaiveHybrid, expected (paper's line)",
    )
    for point in report["fixed"]:
        axis.scatter(x(point), y(point), s=60, zorder=3, label=point["system"])
    axis.set(xlabel=labels[0], ylabel=labels[1], title=labels[2])
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return str(path)


def write_plots(report: dict, out_dir: Path) -> list[str]:
    """WER vs offload ratio, and latency vs WER (PASU Figure 4), as PNG."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return [
        _plot(
            report,
            lambda p: 100 * p["offload_ratio"],
            lambda p: 100 * p["wer"],
            ("offloaded recordings (%)", "overall WER (%)", "WER vs offload ratio"),
            out_dir / "wer-vs-offload.png",
        ),
        _plot(
            report,
            lambda p: 100 * p["wer"],
            lambda p: p["latency_mean_ms"],
            (
                "overall WER (%)",
                "mean latency after end of speech (ms)",
                f"latency vs WER ({report['link']['name']} link)",
            ),
            out_dir / "latency-vs-wer.png",
        ),
    ]
