"""Offload clients: how the device asks the cloud to understand an utterance.

Every client answers within a deadline or raises `OffloadFailed` with a reason; the caller
then falls back to the device's own result, so no utterance is lost. Clients:
- `HttpCloudClient`: our cloud service (`pasu serve`), over HTTP with connection reuse.
- `AzureSpeechClient`: Azure Speech-to-text, with the device's text intent classifier.
(`pasu.embedded_cloud.EmbeddedCloud`, the cloud pipeline in this process, is wired in by the
public API above the device and cloud layers.)
"""

import contextlib
import io
import os
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Protocol

import httpx
import numpy as np
import soundfile as sf

from pasu.core.audio import SAMPLE_RATE_HZ
from pasu.core.errors import ConfigError


@dataclass(frozen=True)
class CloudAnswer:
    text: str
    intent: str
    confidence: float
    source: str  # which cloud answered


class OffloadFailed(Exception):
    """The cloud gave no usable answer in time; the message says why."""


class CloudClient(Protocol):
    name: str

    def offload(self, audio: np.ndarray, deadline_s: float) -> CloudAnswer: ...


def encode_flac(audio: np.ndarray) -> bytes:
    """16-bit FLAC: about half the bytes of WAV on the uplink."""
    buffer = io.BytesIO()
    sf.write(buffer, np.clip(audio, -1.0, 1.0), SAMPLE_RATE_HZ, format="FLAC", subtype="PCM_16")
    return buffer.getvalue()


def _parse_answer(response: httpx.Response, source: str) -> CloudAnswer:
    if response.status_code != 200:
        detail = ""
        with contextlib.suppress(ValueError, KeyError, TypeError):
            detail = f": {response.json()['error']['message']}"
        raise OffloadFailed(f"cloud answered HTTP {response.status_code}{detail}")
    try:
        body = response.json()
        text, intent = body["text"], body["intent"]
        confidence = float(body.get("confidence", 0.0))
    except (ValueError, KeyError, TypeError):
        raise OffloadFailed("cloud answer is not the expected JSON") from None
    if not isinstance(text, str) or not isinstance(intent, str):
        raise OffloadFailed("cloud answer is not the expected JSON")
    return CloudAnswer(text, intent, confidence, source)


class HttpCloudClient:
    """Our cloud service over HTTP. One retry with backoff on connection failures (never on an
    answer, so a request is not decoded twice); every attempt fits inside the deadline."""

    name = "http"

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        connect_timeout_s: float = 0.5,
        retries: int = 1,
        backoff_s: float = 0.05,
        transport: httpx.BaseTransport | None = None,
    ):
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"cloud URL must start with http:// or https://, got {url!r}")
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self.url = url.rstrip("/")
        self.connect_timeout_s = connect_timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self._http = httpx.Client(
            headers=headers,
            transport=transport,
            limits=httpx.Limits(max_keepalive_connections=4, keepalive_expiry=60),
        )

    def offload(self, audio: np.ndarray, deadline_s: float) -> CloudAnswer:
        body = encode_flac(audio)
        give_up = time.monotonic() + deadline_s
        attempt = 0
        while True:
            remaining = give_up - time.monotonic()
            if remaining <= 0:
                raise OffloadFailed(f"no answer within the {deadline_s:g} s deadline")
            timeout = httpx.Timeout(remaining, connect=min(self.connect_timeout_s, remaining))
            try:
                response = self._http.post(
                    f"{self.url}/v1/understand",
                    content=body,
                    headers={"content-type": "audio/flac"},
                    timeout=timeout,
                )
                return _parse_answer(response, self.name)
            except (httpx.ConnectError, httpx.ConnectTimeout) as error:
                attempt += 1
                if attempt > self.retries:
                    raise OffloadFailed(f"cloud unreachable: {type(error).__name__}") from None
                time.sleep(min(self.backoff_s * 2 ** (attempt - 1), max(0.0, remaining / 2)))
            except httpx.TimeoutException:
                raise OffloadFailed(f"no answer within the {deadline_s:g} s deadline") from None
            except httpx.HTTPError as error:  # reset connection, broken response
                raise OffloadFailed(f"cloud connection failed: {type(error).__name__}") from None

    def close(self) -> None:
        self._http.close()


class AzureSpeechClient:
    """Azure Speech-to-text (key and region from AZURE_SPEECH_KEY / AZURE_SPEECH_REGION); the
    intent comes from the device's text classifier. Without network the SDK does not raise: it
    returns a Canceled result after about 1.6 s, which becomes an `OffloadFailed`."""

    name = "azure"

    def __init__(self, intent_model, key: str | None = None, region: str | None = None):
        key = key or os.environ.get("AZURE_SPEECH_KEY")
        region = region or os.environ.get("AZURE_SPEECH_REGION")
        if not key or not region:
            raise ConfigError("Azure Speech needs AZURE_SPEECH_KEY and AZURE_SPEECH_REGION")
        try:
            import azure.cognitiveservices.speech as speechsdk
        except ImportError:
            raise ConfigError(
                "Azure Speech needs the azure-cognitiveservices-speech package "
                "(pip install -e '.[azure]')"
            ) from None
        self._sdk = speechsdk
        self._config = speechsdk.SpeechConfig(subscription=key, region=region)
        self._config.speech_recognition_language = "en-US"
        self._intent_model = intent_model
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="azure")

    def _recognise(self, audio: np.ndarray):
        sdk = self._sdk
        stream = sdk.audio.PushAudioInputStream(
            sdk.audio.AudioStreamFormat(samples_per_second=SAMPLE_RATE_HZ)
        )
        stream.write((np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes())
        stream.close()
        recognizer = sdk.SpeechRecognizer(
            speech_config=self._config, audio_config=sdk.audio.AudioConfig(stream=stream)
        )
        return recognizer.recognize_once_async().get()

    def offload(self, audio: np.ndarray, deadline_s: float) -> CloudAnswer:
        future = self._pool.submit(self._recognise, audio)
        try:
            result = future.result(timeout=deadline_s)
        except FutureTimeout:
            raise OffloadFailed(f"Azure gave no answer within {deadline_s:g} s") from None
        reason = self._sdk.ResultReason
        if result.reason == reason.RecognizedSpeech:
            text = result.text
        elif result.reason == reason.NoMatch:
            text = ""
        else:
            details = result.cancellation_details
            code = getattr(details, "code", None) or getattr(details, "error_code", None)
            raise OffloadFailed(
                f"Azure canceled: {details.reason} ({code}) {details.error_details}"
            )
        prediction = self._intent_model.predict([text])[0] if text else None
        return CloudAnswer(
            text,
            prediction.intent if prediction else "",
            prediction.confidence if prediction else 0.0,
            self.name,
        )
