"""The service's endpoints: `POST /v1/understand`, the OpenAI-compatible
`POST /v1/audio/transcriptions`, `GET /healthz` and `GET /metrics`. They find the model pool,
settings and metrics of their app in `request.app.state` (set by `pasu.cloud.app`)."""

import time

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from pasu.cloud.pipeline import CloudResult
from pasu.cloud.requests import ApiError, audio_from, authorise
from pasu.core.audio import SAMPLE_RATE_HZ

RESPONSE_FORMATS = ("json", "text", "verbose_json")
KNOWN_PATHS = {"/v1/understand", "/v1/audio/transcriptions", "/healthz", "/metrics"}

router = APIRouter()


async def answer_request(request: Request) -> tuple[CloudResult, dict, dict]:
    """Authorise, read and decode the audio, and run it through the model pool."""
    state = request.app.state
    started = time.perf_counter()
    authorise(request, state.settings)
    audio, fields = await audio_from(request, state.settings)
    decoded = time.perf_counter()
    result, waited_ms = await state.pool.run(audio)
    state.metrics.audio_seconds.inc(audio.size / SAMPLE_RATE_HZ)
    timings = {
        "read_decode": round((decoded - started) * 1000, 1),
        "queue": round(waited_ms, 1),
        **result.timings_ms,
        "total": round((time.perf_counter() - started) * 1000, 1),
    }
    return result, fields, timings


@router.post("/v1/understand")
async def post_understand(request: Request):
    result, _, timings = await answer_request(request)
    return {**result.to_json(), "timings": timings}


@router.post("/v1/audio/transcriptions")
async def post_transcriptions(request: Request):
    result, fields, timings = await answer_request(request)
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


@router.get("/healthz")
async def healthz(request: Request):
    state = request.app.state
    return {
        "status": "ok",
        "model": state.pool.pipeline.recognizer.name,
        "workers": state.settings.model_workers,
        "queue_limit": state.settings.max_queue,
    }


@router.get("/metrics")
async def prometheus(request: Request):
    return Response(
        generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST
    )
