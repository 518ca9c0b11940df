"""The cloud pipeline in this process: the default offload target when no cloud URL is
configured, so a fresh machine works without a server. It lives above the device and cloud
layers: this is where the public API wires one to the other."""

import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import numpy as np

from pasu.device.offload import CloudAnswer, OffloadFailed


class EmbeddedCloud:
    """The cloud pipeline in this process: Whisper base and the text intent classifier (not the
    MiniLM one, which would bring torch into the device process). Loaded on first use."""

    name = "embedded"

    def __init__(self, model: str = "whisper-base", cpu_threads: int = 2):
        self.model = model
        self.cpu_threads = cpu_threads
        self._pipeline = None
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedded-cloud")
        self._loading = None

    def preload(self) -> None:
        """Start loading the models in the background (a second or two), so that the first
        offload does not spend its deadline on it."""
        with self._lock:
            if self._loading is None:
                self._loading = self._pool.submit(self._load)

    def _load(self):
        # imported here: the device path loads no cloud code until an utterance is offloaded
        from pasu.cloud.asr import WhisperOptions
        from pasu.cloud.pipeline import build_pipeline

        if self._pipeline is None:
            self._pipeline = build_pipeline(
                self.model, "text", options=WhisperOptions(cpu_threads=self.cpu_threads)
            )
        return self._pipeline

    def offload(self, audio: np.ndarray, deadline_s: float) -> CloudAnswer:
        self.preload()
        self._loading.result()  # loading is set-up, not offload time: outside the deadline
        future = self._pool.submit(lambda: self._pipeline.run(audio))
        try:
            result = future.result(timeout=deadline_s)
        except FutureTimeout:
            raise OffloadFailed(f"embedded cloud gave no answer within {deadline_s:g} s") from None
        return CloudAnswer(result.text, result.intent, result.confidence, self.name)
