"""The HTTP service: FastAPI app answering offloaded utterances.

Endpoints: `POST /v1/understand` (raw audio body or multipart `file`) → text and intent;
`POST /v1/audio/transcriptions` (OpenAI-compatible); `GET /healthz`; `GET /metrics`.
A bounded worker pool runs the models: when every worker is busy and the queue is full the
service answers 503 with Retry-After instead of queueing without limit. Client mistakes get a
4xx with a JSON error body.
"""

import asyncio
import hmac
import io
import logging
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path

import numpy as np
import soundfile as sf
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from starlette.exceptions import HTTPException as StarletteHTTPException

from pasu.cloud.settings import ServiceSettings
from pasu.cloud.understanding import CloudResult, CloudUnderstanding
from pasu.core.audio import SAMPLE_RATE_HZ, to_mono

log = logging.getLogger("pasu.cloud")

ACCEPTED_FORMATS = {"WAV", "WAVEX", "FLAC", "OGG", "MP3"}
MIN_RATE_HZ, MAX_RATE_HZ = 8_000, 192_000
RESPONSE_FORMATS = ("json", "text", "verbose_json")


class ApiError(Exception):
    """An error answered to the client as JSON: {"error": {"code", "message"}}."""

    def __init__(self, status: int, code: str, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers


def _error_response(status: int, code: str, message: str, headers: dict | None = None):
    return JSONResponse(
        {
            "error": {
                "code": code,
                "message": message,
                "type": "invalid_request_error" if status < 500 else "server_error",
            }
        },
        status_code=status,
        headers=headers,
    )


class ServiceMetrics:
    """Prometheus metrics of one replica (each app has its own registry)."""

    def __init__(self):
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)  # resident memory, CPU seconds, open files
        self.requests = Counter(
            "pasu_requests",
            "HTTP requests answered",
            ["endpoint", "status"],
            registry=self.registry,
        )
        self.errors = Counter(
            "pasu_errors",
            "Requests answered with an error",
            ["endpoint", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "pasu_request_seconds",
            "Time to answer a request",
            ["endpoint"],
            registry=self.registry,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32),
        )
        self.queue_depth = Gauge(
            "pasu_queue_depth", "Requests waiting for a model worker", registry=self.registry
        )
        self.busy_workers = Gauge(
            "pasu_busy_workers", "Model workers decoding now", registry=self.registry
        )
        self.audio_seconds = Counter(
            "pasu_audio_seconds", "Seconds of audio understood", registry=self.registry
        )
        self.rejected = Counter(
            "pasu_rejected_overload", "Requests refused with 503", registry=self.registry
        )


class ModelPool:
    """A fixed number of model worker threads with a bounded waiting line."""

    def __init__(
        self, understanding: CloudUnderstanding, settings: ServiceSettings, metrics: ServiceMetrics
    ):
        self.understanding = understanding
        self.settings = settings
        self.metrics = metrics
        self._executor = ThreadPoolExecutor(settings.model_workers, thread_name_prefix="model")
        self._lock = threading.Lock()
        self._admitted = 0  # running + waiting
        self._running = 0

    @property
    def capacity(self) -> int:
        return self.settings.model_workers + self.settings.max_queue

    def _update_gauges(self) -> None:
        self.metrics.busy_workers.set(self._running)
        self.metrics.queue_depth.set(self._admitted - self._running)

    def _run(self, audio: np.ndarray, admitted_at: float) -> tuple[CloudResult, float]:
        with self._lock:
            self._running += 1
            self._update_gauges()
        try:
            waited_ms = (time.perf_counter() - admitted_at) * 1000
            return self.understanding.understand(audio), waited_ms
        finally:
            with self._lock:
                self._running -= 1
                self._admitted -= 1
                self._update_gauges()

    async def understand(self, audio: np.ndarray) -> tuple[CloudResult, float]:
        with self._lock:
            if self._admitted >= self.capacity:
                self.metrics.rejected.inc()
                raise ApiError(
                    503,
                    "overloaded",
                    "all model workers are busy; retry later",
                    {"Retry-After": str(self.settings.retry_after_s)},
                )
            self._admitted += 1
            self._update_gauges()
        try:
            future = self._executor.submit(self._run, audio, time.perf_counter())
        except RuntimeError:  # executor shut down
            with self._lock:
                self._admitted -= 1
            raise ApiError(503, "shutting_down", "the service is shutting down") from None
        try:
            return await asyncio.wait_for(
                asyncio.wrap_future(future), self.settings.request_timeout_s
            )
        except TimeoutError:
            if future.cancel():  # still waiting: it will never run
                with self._lock:
                    self._admitted -= 1
                    self._update_gauges()
            raise ApiError(504, "timeout", "the utterance was not understood in time") from None

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it grows past `limit`."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "body_too_large", f"request body is over {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, "body_too_large", f"request body is over {limit} bytes")
        chunks.append(chunk)
    body = b"".join(chunks)
    request._body = body  # Starlette's own cache, so request.form() parses what was read here
    return body


def decode_audio(data: bytes, max_seconds: float) -> np.ndarray:
    """Encoded audio bytes → 16 kHz mono float32, or an ApiError saying what is wrong."""
    if not data:
        raise ApiError(400, "empty_audio", "no audio in the request")
    try:
        info = sf.info(io.BytesIO(data))
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError):
        raise ApiError(
            415,
            "unsupported_audio",
            f"audio could not be decoded; send one of {sorted(ACCEPTED_FORMATS)}",
        ) from None
    if info.format not in ACCEPTED_FORMATS:
        raise ApiError(415, "unsupported_audio", f"audio format {info.format} is not accepted")
    if not MIN_RATE_HZ <= info.samplerate <= MAX_RATE_HZ:
        raise ApiError(
            400,
            "bad_sample_rate",
            f"sample rate {info.samplerate} Hz is outside {MIN_RATE_HZ}-{MAX_RATE_HZ}",
        )
    if info.frames > max_seconds * info.samplerate:
        raise ApiError(413, "audio_too_long", f"audio is longer than {max_seconds:g} s")
    try:
        samples, rate_hz = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError):
        raise ApiError(400, "corrupt_audio", "audio is truncated or corrupt") from None
    if samples.shape[0] == 0:
        raise ApiError(400, "empty_audio", "audio has no samples")
    if samples.shape[0] > max_seconds * rate_hz:
        raise ApiError(413, "audio_too_long", f"audio is longer than {max_seconds:g} s")
    if not np.isfinite(samples).all():
        raise ApiError(400, "corrupt_audio", "audio contains NaN or infinite samples")
    return to_mono(samples, rate_hz, SAMPLE_RATE_HZ)


def create_app(settings: ServiceSettings, understanding: CloudUnderstanding) -> FastAPI:
    """The service around a loaded model (tests pass their own, `pasu serve` the default)."""
    metrics = ServiceMetrics()
    pool = ModelPool(understanding, settings, metrics)
    keys = [k.encode() for k in settings.api_keys]

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        yield
        pool.shutdown()

    app = FastAPI(title="PASU cloud", version="1", docs_url=None, redoc_url=None, lifespan=lifespan)
    app.state.pool = pool
    app.state.settings = settings

    def authorise(request: Request) -> None:
        if not settings.require_auth:
            return
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise ApiError(
                401,
                "missing_api_key",
                "send an API key as 'Authorization: Bearer'",
                {"WWW-Authenticate": "Bearer"},
            )
        supplied = token.strip().encode()
        if not any(hmac.compare_digest(supplied, key) for key in keys):
            raise ApiError(
                401, "invalid_api_key", "the API key is not valid", {"WWW-Authenticate": "Bearer"}
            )

    async def audio_from(request: Request) -> tuple[np.ndarray, dict]:
        """Audio and the form fields of a raw-body or multipart request."""
        body = await read_body(request, settings.max_body_bytes)
        fields: dict = {}
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            try:
                form = await request.form(max_files=1, max_fields=16)
            except Exception as error:  # malformed multipart: the parser raises many kinds
                raise ApiError(400, "bad_multipart", f"cannot parse the form: {error}") from None
            upload = form.get("file")
            if upload is None or isinstance(upload, str):
                raise ApiError(400, "missing_file", "the form has no 'file' part")
            body = await upload.read()
            fields = {k: v for k, v in form.items() if isinstance(v, str)}
        audio = decode_audio(body, settings.max_audio_seconds)
        if settings.debug_audio_dir:
            _keep_for_debugging(Path(settings.debug_audio_dir), audio)
        return audio, fields

    async def understand_request(request: Request) -> tuple[CloudResult, dict, dict]:
        started = time.perf_counter()
        authorise(request)
        audio, fields = await audio_from(request)
        decoded = time.perf_counter()
        result, waited_ms = await pool.understand(audio)
        metrics.audio_seconds.inc(audio.size / SAMPLE_RATE_HZ)
        timings = {
            "read_decode": round((decoded - started) * 1000, 1),
            "queue": round(waited_ms, 1),
            **result.timings_ms,
            "total": round((time.perf_counter() - started) * 1000, 1),
        }
        return result, fields, timings

    @app.middleware("http")
    async def count(request: Request, call_next):
        started = time.perf_counter()
        endpoint = request.url.path if request.url.path in KNOWN_PATHS else "other"
        try:
            response = await call_next(request)
        except Exception:
            metrics.requests.labels(endpoint, "500").inc()
            raise
        metrics.requests.labels(endpoint, str(response.status_code)).inc()
        metrics.latency.labels(endpoint).observe(time.perf_counter() - started)
        return response

    @app.exception_handler(ApiError)
    async def api_error(request: Request, error: ApiError):
        endpoint = request.url.path if request.url.path in KNOWN_PATHS else "other"
        metrics.errors.labels(endpoint, error.code).inc()
        return _error_response(error.status, error.code, error.message, error.headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException):
        return _error_response(error.status_code, "http_error", str(error.detail))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, error: RequestValidationError):
        return _error_response(400, "bad_request", str(error.errors()[:3]))

    @app.exception_handler(Exception)
    async def internal_error(request: Request, error: Exception):
        log.exception("internal error on %s", request.url.path)
        return _error_response(500, "internal_error", "internal error; see the service log")

    @app.post("/v1/understand")
    async def understand(request: Request):
        result, _, timings = await understand_request(request)
        return {**result.to_json(), "timings": timings}

    @app.post("/v1/audio/transcriptions")
    async def transcriptions(request: Request):
        result, fields, timings = await understand_request(request)
        response_format = fields.get("response_format", "json")
        if response_format not in RESPONSE_FORMATS:
            raise ApiError(
                400, "bad_response_format", f"response_format must be one of {RESPONSE_FORMATS}"
            )
        if response_format == "text":
            return PlainTextResponse(result.text)
        if response_format == "json":
            return {"text": result.text}
        return {
            "task": "transcribe",
            "language": "english",
            "duration": result.duration_s,
            "text": result.text,
            "segments": [{"id": 0, "start": 0.0, "end": result.duration_s, "text": result.text}],
            "intent": result.intent,
            "timings": timings,
        }

    @app.get("/healthz")
    async def healthz():
        return {
            "status": "ok",
            "model": understanding.recognizer.name,
            "workers": settings.model_workers,
            "queue_limit": settings.max_queue,
        }

    @app.get("/metrics")
    async def prometheus():
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app


KNOWN_PATHS = {"/v1/understand", "/v1/audio/transcriptions", "/healthz", "/metrics"}


def _keep_for_debugging(directory: Path, audio: np.ndarray) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    sf.write(directory / f"{uuid.uuid4().hex}.flac", audio, SAMPLE_RATE_HZ)


def create_app_from_env() -> FastAPI:
    """uvicorn factory for `pasu serve`: each worker process loads its own model."""
    from pasu.cloud.asr import WhisperOptions
    from pasu.cloud.understanding import build_understanding

    settings = ServiceSettings.from_env()
    options = WhisperOptions(
        short_window=settings.short_window,
        cpu_threads=settings.cpu_threads,
        concurrent_requests=settings.model_workers,
    )
    intent_path = Path(settings.intent_path) if settings.intent_path else None
    understanding = build_understanding(settings.model, settings.intent, intent_path, options)
    understanding.warm_up()
    return create_app(settings, understanding)
