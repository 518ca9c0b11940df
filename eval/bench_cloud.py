"""Load benchmark of the cloud service: N concurrent clients post utterances over loopback for
a bounded time. Every request must get an answer (a result or a 503) before the client's
timeout; the table reports throughput, latency percentiles, errors and the server's memory.

Without a URL the benchmark starts `pasu serve` itself (no auth, loopback) and stops it after.
"""

import contextlib
import os
import platform
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from itertools import cycle
from pathlib import Path

import httpx
import numpy as np

from pasu.core.errors import ConfigError
from pasu.core.metrics import latency_percentiles
from pasu.eval.reports import save_report


@contextlib.contextmanager
def started_server(serve_args: list[str], startup_s: float = 120.0) -> Iterator[str]:
    """`pasu serve --no-auth` on a free loopback port, stopped when the block ends."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        sys.executable,
        "-m",
        "pasu.cli",
        "serve",
        "--no-auth",
        "--port",
        str(port),
        "--log-level",
        "warning",
        *serve_args,
    ]
    process = subprocess.Popen(command)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_s
        while True:
            if process.poll() is not None:
                raise ConfigError(f"`{' '.join(command)}` exited with {process.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise ConfigError("the service did not start in time")
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()


def _resident_bytes(url: str) -> float | None:
    with contextlib.suppress(httpx.HTTPError):
        for line in httpx.get(url + "/metrics", timeout=2).text.splitlines():
            if line.startswith("process_resident_memory_bytes "):
                return float(line.split()[1])
    return None


def drive(
    url: str,
    key: str | None,
    clips: list[bytes],
    clients: int,
    seconds: float,
    timeout_s: float = 60.0,
) -> dict:
    """Run the load and return counts, latencies and memory samples."""
    headers = {"content-type": "audio/wav"}
    if key:
        headers["authorization"] = f"Bearer {key}"
    outcomes: list[tuple[str, float]] = []  # (status or failure, seconds)
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client(index: int) -> None:
        bodies = cycle(clips[index % len(clips) :] + clips[: index % len(clips)])
        with httpx.Client(timeout=timeout_s) as http:
            while time.monotonic() < deadline:
                started = time.perf_counter()
                try:
                    response = http.post(
                        url + "/v1/understand", content=next(bodies), headers=headers
                    )
                    outcome = str(response.status_code)
                except httpx.TimeoutException:
                    outcome = "no answer"
                except httpx.HTTPError as error:
                    outcome = type(error).__name__
                with lock:
                    outcomes.append((outcome, time.perf_counter() - started))
                if outcome == "503":
                    time.sleep(0.2)

    memory = [_resident_bytes(url)]
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    while any(t.is_alive() for t in threads):
        time.sleep(1.0)
        memory.append(_resident_bytes(url))
    elapsed = time.perf_counter() - started
    counts = Counter(o for o, _ in outcomes)
    ok_seconds = [s * 1000 for o, s in outcomes if o == "200"]
    memory_mb = [m / 2**20 for m in memory if m is not None]
    return {
        "clients": clients,
        "seconds": round(elapsed, 1),
        "requests": len(outcomes),
        "answered_ok": counts.get("200", 0),
        "overloaded_503": counts.get("503", 0),
        "other": {k: v for k, v in counts.items() if k not in ("200", "503")},
        "throughput_ok_per_s": counts.get("200", 0) / elapsed,
        "latency_ok_ms": latency_percentiles(ok_seconds) if ok_seconds else None,
        "rss_mb": {"start": memory_mb[0], "peak": max(memory_mb), "end": memory_mb[-1]}
        if memory_mb
        else None,
    }


def run(
    url: str | None,
    key: str | None,
    audio: list[Path],
    client_counts: list[int],
    seconds: float,
    serve_args: list[str],
) -> dict:
    clips = [path.read_bytes() for path in audio]
    if not clips:
        raise ConfigError("no audio files to send")
    with contextlib.ExitStack() as stack:
        target = url or stack.enter_context(started_server(serve_args))
        health = httpx.get(target + "/healthz", timeout=5).json()
        loads = []
        for clients in client_counts:
            loads.append(drive(target, key, clips, clients, seconds))
            print(format_row(loads[-1]), flush=True)
    return {
        "benchmark": "cloud-load",
        "service": health,
        "serve_args": serve_args if url is None else None,
        "clips": [p.name for p in audio],
        "loads": loads,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
    }


HEADER = (
    "| clients | requests | 200 | 503 | other | ok/s | p50 ms | p99 ms | RSS start/peak/end MB |\n"
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
)


def format_row(load: dict) -> str:
    latency = load["latency_ok_ms"] or {"p50": float("nan"), "p99": float("nan")}
    rss = load["rss_mb"]
    memory = f"{rss['start']:.0f} / {rss['peak']:.0f} / {rss['end']:.0f}" if rss else "-"
    return (
        f"| {load['clients']} | {load['requests']} | {load['answered_ok']} | "
        f"{load['overloaded_503']} | {load['other'] or 0} | {load['throughput_ok_per_s']:.2f} | "
        f"{latency['p50']:.0f} | {latency['p99']:.0f} | {memory} |"
    )


def format_table(report: dict) -> str:
    service = report["service"]
    lines = [
        f"cloud load on loopback: {service['model']}, {service['workers']} model worker(s), "
        f"queue limit {service['queue_limit']}; {len(report['clips'])} clips",
        HEADER,
        *(format_row(load) for load in report["loads"]),
    ]
    return "\n".join(lines)


def write_report(report: dict, json_path: Path | None) -> str:
    return save_report(report, format_table(report), json_path)


def summary_ok(report: dict) -> bool:
    """Every request answered with a result or a 503, nothing hung."""
    return all(not load["other"] for load in report["loads"]) and bool(
        np.sum([load["answered_ok"] for load in report["loads"]])
    )
