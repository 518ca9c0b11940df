"""The offload path end to end: `Understander` with a tiny device model against real HTTP
servers on 127.0.0.1 — a working cloud service and servers that fail in every way we know."""

import json
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import soundfile as sf
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from pasu.api import Understander
from pasu.cloud.app import create_app
from pasu.cloud.asr import WhisperTranscript
from pasu.cloud.pipeline import CloudPipeline
from pasu.cloud.settings import ServiceSettings
from pasu.core.errors import ConfigError
from pasu.device.offload import AzureSpeechClient, HttpCloudClient, OffloadFailed
from pasu.models.intent import train_intent_classifier
from pasu.speech.intent import IntentPrediction
from tests.servers import serving

KEY = "offload-test-key-0123456789"


@pytest.fixture(scope="module")
def model_dir(tiny_model, tmp_path_factory):
    """The tiny device model with a small intent classifier beside it."""
    directory = tmp_path_factory.mktemp("offload") / "model"
    shutil.copytree(tiny_model[1], directory)
    texts = ["wake me up at eight", "set an alarm", "what is the weather", "is it raining"]
    classifier = train_intent_classifier(texts, ["alarm_set"] * 2 + ["weather_query"] * 2)
    classifier.save(directory / "intent.joblib")
    return directory


@pytest.fixture(scope="module")
def speech():
    t = np.arange(int(16_000 * 2.2)) / 16_000
    return (0.3 * np.sin(2 * np.pi * 220 * t) * np.sin(2 * np.pi * 3 * t)).astype(np.float32)


class RecordingRecognizer:
    """A cloud recogniser that answers at once and remembers what it heard."""

    name = "stub-cloud"

    def __init__(self, delay_s: float = 0.0):
        self.delay_s = delay_s
        self.heard: list[np.ndarray] = []

    def transcribe(self, audio: np.ndarray) -> WhisperTranscript:
        time.sleep(self.delay_s)
        self.heard.append(audio)
        return WhisperTranscript("wake me up at eight", audio.size / 16_000, -0.1, 0.0, 4.0)


class FixedIntent:
    def predict(self, texts):
        return [IntentPrediction("alarm_set", 0.93) for _ in texts]


def cloud_app(recognizer) -> object:
    settings = ServiceSettings(api_keys=(KEY,))
    return create_app(settings, CloudPipeline(recognizer, FixedIntent()))


def test_offloaded_utterance_is_answered_by_the_cloud(model_dir, speech):
    recognizer = RecordingRecognizer()
    with (
        serving(cloud_app(recognizer)) as url,
        Understander(model_dir, policy="always", cloud=url, api_key=KEY) as device,
    ):
        result = device.understand(speech, sample_rate_hz=16_000)
    assert result.route == "cloud"
    assert (result.text, result.intent) == ("wake me up at eight", "alarm_set")
    assert (result.scenario, result.action) == ("alarm", "set")
    assert "policy always" in result.reason and "cloud" in result.reason
    assert result.latency.cloud_ms > 0 and result.latency.total_ms >= result.latency.cloud_ms
    heard = recognizer.heard[0]
    assert heard.size == speech.size  # the whole utterance, nothing lost
    np.testing.assert_allclose(heard, speech, atol=1e-4)  # 16-bit FLAC on the wire


def test_confident_utterance_stays_on_the_device(model_dir, speech):
    with Understander(model_dir, policy="never", cloud="http://127.0.0.1:9") as device:
        result = device.understand(speech, sample_rate_hz=16_000)
    assert result.route == "device"
    assert result.latency.cloud_ms is None and result.latency.device_decode_ms > 0
    assert set(result.to_json()) >= {"text", "intent", "route", "reason", "latency_ms"}


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def fallback_for(model_dir, speech, url: str, deadline_s: float = 1.0):
    with Understander(
        model_dir, policy="always", cloud=url, api_key=KEY, deadline_s=deadline_s
    ) as device:
        started = time.perf_counter()
        result = device.understand(speech, sample_rate_hz=16_000)
        elapsed = time.perf_counter() - started
    assert result.route == "fallback", result.reason
    assert result.latency.device_decode_ms is not None
    return result, elapsed


def test_server_down_falls_back(model_dir, speech):
    result, _ = fallback_for(model_dir, speech, closed_port_url())
    assert "unreachable" in result.reason


def test_slow_cloud_past_the_deadline_falls_back_in_time(model_dir, speech):
    with serving(cloud_app(RecordingRecognizer(delay_s=3.0))) as url:
        result, elapsed = fallback_for(model_dir, speech, url, deadline_s=0.5)
    assert "deadline" in result.reason
    assert elapsed < 2.5  # the device did not wait for the slow answer


def broken_app(response):
    return Starlette(routes=[Route("/v1/understand", lambda request: response, methods=["POST"])])


def test_http_500_falls_back(model_dir, speech):
    app = broken_app(JSONResponse({"error": {"message": "boom"}}, status_code=500))
    with serving(app) as url:
        result, _ = fallback_for(model_dir, speech, url)
    assert "HTTP 500" in result.reason and "boom" in result.reason


def test_garbage_json_falls_back(model_dir, speech):
    with serving(broken_app(PlainTextResponse("<html>proxy error</html>"))) as url:
        result, _ = fallback_for(model_dir, speech, url)
    assert "not the expected JSON" in result.reason


@pytest.fixture
def resetting_server():
    """Accepts connections and resets them (RST) without answering."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def serve():
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            connection.recv(1024)
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    server.close()


def test_connection_reset_falls_back(model_dir, speech, resetting_server):
    result, _ = fallback_for(model_dir, speech, resetting_server)
    assert "offload failed: cloud" in result.reason


def test_http_client_retries_a_refused_connection_once():
    client = HttpCloudClient(closed_port_url(), retries=1, backoff_s=0.01)
    attempts = []
    original = client._http.post

    def counting_post(*args, **kwargs):
        attempts.append(1)
        return original(*args, **kwargs)

    client._http.post = counting_post
    with pytest.raises(OffloadFailed, match="unreachable"):
        client.offload(np.zeros(16_000, np.float32), deadline_s=2.0)
    assert len(attempts) == 2


def test_bad_cloud_configuration_is_refused_up_front(model_dir, monkeypatch):
    with pytest.raises(ConfigError, match="http"):
        HttpCloudClient("ftp://example.org")
    monkeypatch.delenv("AZURE_SPEECH_KEY", raising=False)
    monkeypatch.delenv("AZURE_SPEECH_REGION", raising=False)
    with pytest.raises(ConfigError, match="AZURE_SPEECH_KEY"):
        AzureSpeechClient(intent_model=FixedIntent())
    with pytest.raises(ConfigError, match="no device model"):
        Understander(model_dir.parent / "nowhere")


def test_azure_failure_falls_back_without_raising(model_dir, speech):
    pytest.importorskip("azure.cognitiveservices.speech")
    client = AzureSpeechClient(FixedIntent(), key="0" * 32, region="westeurope")
    with Understander(model_dir, policy="always", cloud=client, deadline_s=8.0) as device:
        result = device.understand(speech, sample_rate_hz=16_000)
    assert result.route == "fallback"
    assert "Azure" in result.reason


def test_cli_prints_one_json_object_per_file(model_dir, speech, tmp_path):
    first, second = tmp_path / "a.wav", tmp_path / "b.flac"
    sf.write(first, speech, 16_000)
    sf.write(second, speech[:8000], 16_000)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pasu.cli",
            "understand",
            str(first),
            str(second),
            "--json",
            "--model",
            str(model_dir),
            "--policy",
            "never",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["file"] for r in rows] == [str(first), str(second)]
    for row in rows:
        assert {"file", "text", "intent", "route", "latency_ms"} <= set(row)
        assert row["route"] == "device"
