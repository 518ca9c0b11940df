"""The cloud service over real HTTP: Whisper tiny.en and the shipped text intent classifier
behind uvicorn on 127.0.0.1, hit with good, bad and hostile requests."""

import io
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf

from pasu.cloud.app import create_app
from pasu.cloud.asr import WhisperTranscript
from pasu.cloud.pipeline import CloudPipeline
from pasu.cloud.settings import ServiceSettings, check_no_auth_host, read_api_keys
from pasu.core.errors import ConfigError
from pasu.core.modeldir import TEXT_INTENT_JOBLIB
from pasu.speech.intent import IntentPrediction
from tests.servers import serving

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
KEY = "test-key-0123456789abcdef"
MILK = SAMPLES / "02-lists_remove-close.wav"


def encoded(samples: np.ndarray, rate_hz: int, audio_format: str = "WAV") -> bytes:
    buffer = io.BytesIO()
    sf.write(buffer, samples, rate_hz, format=audio_format)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def whisper_server():
    from pasu.cloud.asr import WhisperOptions, WhisperRecognizer
    from pasu.speech.intent import IntentClassifier
    from pasu.speech.whisper_checkpoints import whisper_tiny_en

    pipeline = CloudPipeline(
        WhisperRecognizer(whisper_tiny_en(), WhisperOptions(cpu_threads=1, beam_size=2)),
        IntentClassifier.load(TEXT_INTENT_JOBLIB),
    )
    settings = ServiceSettings(api_keys=(KEY,), max_body_bytes=2_000_000, max_audio_seconds=20)
    app = create_app(settings, pipeline)
    with serving(app) as url:
        yield url


def post_audio(url: str, body: bytes, key: str | None = KEY, path: str = "/v1/understand"):
    headers = {"content-type": "audio/wav"}
    if key:
        headers["authorization"] = f"Bearer {key}"
    return httpx.post(url + path, content=body, headers=headers, timeout=60)


def test_understands_good_audio_raw_and_multipart(whisper_server):
    raw = post_audio(whisper_server, MILK.read_bytes())
    assert raw.status_code == 200, raw.text
    body = raw.json()
    assert "milk" in body["text"].lower()
    assert body["intent"] == "lists_remove"
    assert (body["scenario"], body["action"]) == ("lists", "remove")
    assert 0 < body["confidence"] <= 1
    assert {"asr", "intent", "queue", "total"} <= set(body["timings"])

    form = httpx.post(
        whisper_server + "/v1/understand",
        files={"file": ("milk.wav", MILK.read_bytes(), "audio/wav")},
        headers={"authorization": f"Bearer {KEY}"},
        timeout=60,
    )
    assert form.status_code == 200
    assert form.json()["text"] == body["text"]


def test_api_key_required(whisper_server):
    missing = post_audio(whisper_server, MILK.read_bytes(), key=None)
    assert missing.status_code == 401
    assert missing.json()["error"]["code"] == "missing_api_key"
    assert missing.headers["www-authenticate"] == "Bearer"
    wrong = post_audio(whisper_server, MILK.read_bytes(), key="not-the-right-key-at-all")
    assert wrong.status_code == 401
    assert wrong.json()["error"]["code"] == "invalid_api_key"


def test_oversized_body_is_refused(whisper_server):
    response = post_audio(whisper_server, b"\0" * 3_000_000)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "body_too_large"


def test_ten_minutes_of_silence_is_refused(whisper_server):
    silence = encoded(np.zeros(16_000 * 600, dtype=np.float32), 16_000, "FLAC")
    assert len(silence) < 2_000_000  # small enough to pass the body limit: the duration decides
    response = post_audio(whisper_server, silence)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "audio_too_long"


def wav_with_rate(rate_hz: int) -> bytes:
    data = bytearray(encoded(np.zeros(1600, dtype=np.float32), 16_000))
    data[24:28] = rate_hz.to_bytes(4, "little")  # the fmt chunk's sample-rate field
    return bytes(data)


@pytest.mark.parametrize(
    ("name", "body", "status"),
    [
        ("empty", b"", 400),
        ("garbage", bytes(range(256)) * 40, 415),
        ("header only", encoded(np.zeros(16_000, dtype=np.float32), 16_000)[:30], 415),
        ("aiff", encoded(np.zeros(16_000, dtype=np.float32), 16_000, "AIFF"), 415),
        ("zero samples", encoded(np.zeros(0, dtype=np.float32), 16_000), 400),
        ("rate 0", wav_with_rate(0), None),
        ("rate 4 Hz", wav_with_rate(4), 400),
    ],
)
def test_bad_audio_gets_a_client_error(whisper_server, name, body, status):
    response = post_audio(whisper_server, body)
    if status is None:
        assert 400 <= response.status_code < 500, response.text
    else:
        assert response.status_code == status, (name, response.text)
    assert response.json()["error"]["message"]


def test_truncated_audio_gets_a_defined_answer(whisper_server):
    whole = MILK.read_bytes()
    response = post_audio(whisper_server, whole[: len(whole) // 2])
    assert response.status_code == 200 or 400 <= response.status_code < 500
    assert isinstance(response.json(), dict)


def test_96_khz_audio_is_resampled(whisper_server):
    samples, rate_hz = sf.read(MILK, dtype="float32")
    import soxr

    response = post_audio(whisper_server, encoded(soxr.resample(samples, rate_hz, 96_000), 96_000))
    assert response.status_code == 200
    assert "milk" in response.json()["text"].lower()


def test_openai_client_works_unchanged(whisper_server):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=whisper_server + "/v1", api_key=KEY)
    with MILK.open("rb") as audio:
        transcription = client.audio.transcriptions.create(model="whisper-1", file=audio)
    assert "milk" in transcription.text.lower()
    with MILK.open("rb") as audio:
        text = client.audio.transcriptions.create(
            model="whisper-1", file=audio, response_format="text"
        )
    assert "milk" in str(text).lower()
    with MILK.open("rb") as audio:
        verbose = client.audio.transcriptions.create(
            model="whisper-1", file=audio, response_format="verbose_json"
        )
    assert verbose.duration == pytest.approx(sf.info(MILK).duration, abs=0.01)


def test_health_and_metrics(whisper_server):
    health = httpx.get(whisper_server + "/healthz")
    assert health.json()["status"] == "ok"
    post_audio(whisper_server, b"", key=KEY)
    metrics = httpx.get(whisper_server + "/metrics").text
    assert 'pasu_requests_total{endpoint="/v1/understand",status="400"}' in metrics
    assert "pasu_queue_depth" in metrics
    assert "pasu_request_seconds_bucket" in metrics


class BlockingRecognizer:
    """Holds every utterance until released, to fill the worker pool on purpose."""

    name = "blocking"

    def __init__(self):
        self.release = threading.Event()

    def transcribe(self, audio: np.ndarray) -> WhisperTranscript:
        self.release.wait(20)
        return WhisperTranscript("hello there", audio.size / 16_000, -0.1, 0.0, 2.0)


class FixedIntent:
    def predict(self, texts):
        return [IntentPrediction("general_greet", 0.9) for _ in texts]


def wait_until(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_full_pool_answers_503_with_retry_after():
    recognizer = BlockingRecognizer()
    settings = ServiceSettings(require_auth=False, model_workers=1, max_queue=1)
    app = create_app(settings, CloudPipeline(recognizer, FixedIntent()))
    pool = app.state.pool
    body = MILK.read_bytes()
    with serving(app) as url, ThreadPoolExecutor(2) as clients:
        running = clients.submit(post_audio, url, body, None)
        wait_until(lambda: pool._running == 1)
        waiting = clients.submit(post_audio, url, body, None)
        wait_until(lambda: pool._admitted == 2)
        refused = post_audio(url, body, key=None)
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == str(settings.retry_after_s)
        recognizer.release.set()
        assert running.result().status_code == 200
        assert waiting.result().json()["text"] == "hello there"
        assert "pasu_rejected_overload_total 1.0" in httpx.get(url + "/metrics").text


def test_slow_request_times_out_with_504():
    recognizer = BlockingRecognizer()
    settings = ServiceSettings(require_auth=False, request_timeout_s=0.3)
    app = create_app(settings, CloudPipeline(recognizer, FixedIntent()))
    with serving(app) as url:
        response = post_audio(url, MILK.read_bytes(), key=None)
        recognizer.release.set()
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "timeout"


def test_settings_refuse_unsafe_configurations(tmp_path, monkeypatch):
    monkeypatch.delenv("PASU_API_KEYS", raising=False)
    with pytest.raises(ConfigError, match="no API keys"):
        ServiceSettings()
    with pytest.raises(ConfigError, match="loopback"):
        check_no_auth_host("0.0.0.0")
    check_no_auth_host("127.0.0.1")
    keys = tmp_path / "keys"
    keys.write_text("# service keys\nfirst-key-0123456789\n\nsecond-key-0123456789  # ci\n")
    monkeypatch.setenv("PASU_API_KEYS", "env-key-0123456789abc")
    assert read_api_keys(keys) == (
        "env-key-0123456789abc",
        "first-key-0123456789",
        "second-key-0123456789",
    )
    keys.write_text("short\n")
    with pytest.raises(ConfigError, match="shorter than 16"):
        read_api_keys(keys)


def test_settings_round_trip_through_the_environment(monkeypatch):
    settings = ServiceSettings(api_keys=(KEY,), model_workers=2, model="whisper-tiny.en")
    monkeypatch.setenv("PASU_SERVE_SETTINGS", settings.to_env())
    assert ServiceSettings.from_env() == settings
    assert json.loads(settings.to_env())["model_workers"] == 2


class SlowRecognizer:
    name = "slow"

    def transcribe(self, audio: np.ndarray) -> WhisperTranscript:
        time.sleep(0.05)
        return WhisperTranscript("hello there", audio.size / 16_000, -0.1, 0.0, 2.0)


def test_load_benchmark_gets_an_answer_or_a_503_for_every_request():
    from pasu.eval.bench_cloud import drive, format_row

    settings = ServiceSettings(require_auth=False, model_workers=1, max_queue=1)
    app = create_app(settings, CloudPipeline(SlowRecognizer(), FixedIntent()))
    with serving(app) as url:
        load = drive(url, None, [MILK.read_bytes()], clients=6, seconds=1.5, timeout_s=10)
    assert load["other"] == {}
    assert load["answered_ok"] > 0 and load["overloaded_503"] > 0
    assert load["answered_ok"] + load["overloaded_503"] == load["requests"]
    assert load["rss_mb"]["peak"] > 0
    assert format_row(load).startswith("| 6 |")
