"""The HTTP service: FastAPI app answering offloaded utterances.

Endpoints (`pasu.cloud.routes`): `POST /v1/understand` (raw audio body or multipart `file`) →
text and intent; `POST /v1/audio/transcriptions` (OpenAI-compatible); `GET /healthz`;
`GET /metrics`. A bounded worker pool runs the models (`pasu.cloud.pool`): when every worker is
busy and the queue is full the service answers 503 with Retry-After instead of queueing without
limit. Client mistakes get a 4xx with a JSON error body (`pasu.cloud.requests`).
"""

import logging
import time
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from pasu.cloud.pipeline import CloudPipeline
from pasu.cloud.pool import ModelPool, ServiceMetrics
from pasu.cloud.requests import ApiError, error_response
from pasu.cloud.routes import KNOWN_PATHS, router
from pasu.cloud.settings import ServiceSettings

log = logging.getLogger("pasu.cloud")


def _endpoint(request: Request) -> str:
    return request.url.path if request.url.path in KNOWN_PATHS else "other"


def _add_metrics_middleware(app: FastAPI, metrics: ServiceMetrics) -> None:
    @app.middleware("http")
    async def count(request: Request, call_next):
        started = time.perf_counter()
        try:
            response = await call_next(request)
        except Exception:
            metrics.requests.labels(_endpoint(request), "500").inc()
            raise
        metrics.requests.labels(_endpoint(request), str(response.status_code)).inc()
        metrics.latency.labels(_endpoint(request)).observe(time.perf_counter() - started)
        return response


def _add_error_handlers(app: FastAPI, metrics: ServiceMetrics) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, error: ApiError):
        metrics.errors.labels(_endpoint(request), error.code).inc()
        return error_response(error.status, error.code, error.message, error.headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException):
        return error_response(error.status_code, "http_error", str(error.detail))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, error: RequestValidationError):
        return error_response(400, "bad_request", str(error.errors()[:3]))

    @app.exception_handler(Exception)
    async def internal_error(request: Request, error: Exception):
        log.exception("internal error on %s", request.url.path)
        return error_response(500, "internal_error", "internal error; see the service log")


def create_app(settings: ServiceSettings, pipeline: CloudPipeline) -> FastAPI:
    """The service around a loaded model (tests pass their own, `pasu serve` the default)."""
    metrics = ServiceMetrics()
    pool = ModelPool(pipeline, settings, metrics)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        yield
        pool.shutdown()

    app = FastAPI(title="PASU cloud", version="1", docs_url=None, redoc_url=None, lifespan=lifespan)
    app.state.pool = pool
    app.state.settings = settings
    app.state.metrics = metrics
    _add_metrics_middleware(app, metrics)
    _add_error_handlers(app, metrics)
    app.include_router(router)
    return app


def create_app_from_env() -> FastAPI:
    """uvicorn factory for `pasu serve`: each worker process loads its own model."""
    from pasu.cloud.asr import WhisperOptions
    from pasu.cloud.pipeline import build_pipeline

    settings = ServiceSettings.from_env()
    options = WhisperOptions(
        short_window=settings.short_window,
        cpu_threads=settings.cpu_threads,
        concurrent_requests=settings.model_workers,
    )
    intent_path = Path(settings.intent_path) if settings.intent_path else None
    pipeline = build_pipeline(settings.model, settings.intent, intent_path, options)
    pipeline.warm_up()
    return create_app(settings, pipeline)
