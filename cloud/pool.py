"""The service's model workers: a fixed number of threads with a bounded waiting line, and
the Prometheus metrics of one replica."""

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

from pasu.cloud.pipeline import CloudPipeline, CloudResult
from pasu.cloud.requests import ApiError
from pasu.cloud.settings import ServiceSettings


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

    def __init__(self, pipeline: CloudPipeline, settings: ServiceSettings, metrics: ServiceMetrics):
        self.pipeline = pipeline
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
            return self.pipeline.run(audio), waited_ms
        finally:
            with self._lock:
                self._running -= 1
                self._admitted -= 1
                self._update_gauges()

    async def run(self, audio: np.ndarray) -> tuple[CloudResult, float]:
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
