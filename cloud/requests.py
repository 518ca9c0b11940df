"""What the service does with a request before any model sees it: errors answered as JSON,
the API key check, the body read under a size limit, and the audio decoded and validated."""

import hmac
import io
import uuid
from pathlib import Path

import numpy as np
import soundfile as sf
from fastapi import Request
from fastapi.responses import JSONResponse

from pasu.cloud.settings import ServiceSettings
from pasu.core.audio import SAMPLE_RATE_HZ, to_mono

ACCEPTED_FORMATS = {"WAV", "WAVEX", "FLAC", "OGG", "MP3"}
MIN_RATE_HZ, MAX_RATE_HZ = 8_000, 192_000


class ApiError(Exception):
    """An error answered to the client as JSON: {"error": {"code", "message"}}."""

    def __init__(self, status: int, code: str, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers


def error_response(status: int, code: str, message: str, headers: dict | None = None):
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


def authorise(request: Request, settings: ServiceSettings) -> None:
    """Refuse a request without one of the configured API keys (when keys are required)."""
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
    if not any(hmac.compare_digest(supplied, key.encode()) for key in settings.api_keys):
        raise ApiError(
            401, "invalid_api_key", "the API key is not valid", {"WWW-Authenticate": "Bearer"}
        )


async def audio_from(request: Request, settings: ServiceSettings) -> tuple[np.ndarray, dict]:
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


def _keep_for_debugging(directory: Path, audio: np.ndarray) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    sf.write(directory / f"{uuid.uuid4().hex}.flac", audio, SAMPLE_RATE_HZ)
