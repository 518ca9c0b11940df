"""`understand(utterance)`: the firmware API. Audio in; transcript, intent, the route it took
and a latency breakdown out.

At the end of speech the offramp judges the last pilot output (before any full decode): a
confident utterance is decoded on the device; a doubtful one is shipped to the cloud. If the
cloud gives no usable answer before the deadline, the device's own full decode answers
(route `fallback`), so every call returns a result. With `hedge` the device decodes while it
waits for the cloud.
"""

import functools
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from pasu.core.audio import SAMPLE_RATE_HZ, AudioSource, load_audio, to_mono
from pasu.core.errors import AudioError, ConfigError
from pasu.core.modeldir import CONFIG_FILE, DEFAULT_MODEL_DIR, intent_candidates
from pasu.device.engine import Engine, EngineConfig, Session, Transcript
from pasu.device.latency import SimulatedPilots, feed_virtually
from pasu.device.offload import (
    CloudAnswer,
    CloudClient,
    HttpCloudClient,
    OffloadFailed,
)
from pasu.embedded_cloud import EmbeddedCloud
from pasu.offramp.features import OfframpFeatures
from pasu.offramp.policy import Decision, Policy, load_policy
from pasu.speech.intent import IntentParts, load_intent_model


def device_intent_model(model_dir: Path, intent_path: Path | str | None = None):
    """The device's intent classifier: `intent_path`, else the model's own, else the shared one
    (`pasu.core.modeldir.intent_candidates`)."""
    candidates = [Path(intent_path)] if intent_path else intent_candidates(model_dir)
    for path in candidates:
        if path.is_file():
            return load_intent_model(path)
    raise ConfigError(f"no intent classifier at {', '.join(map(str, candidates))}")


@dataclass(frozen=True)
class LatencyBreakdown:
    """Milliseconds from the end of speech; None for a stage that did not run. With hedging
    the device decode overlaps the cloud wait, so stages can add up to more than the total."""

    catch_up_ms: float  # ingestion still working through the last audio
    settle_ms: float  # waiting for a running pilot, flushing the resampler
    offramp_ms: float  # scoring the last pilot output
    device_decode_ms: float | None  # the device's full decode
    cloud_ms: float | None  # the offload round trip
    intent_ms: float | None  # the device's intent classifier
    total_ms: float  # end of speech → result


@dataclass(frozen=True)
class Understanding(IntentParts):
    """The answer for one utterance."""

    text: str
    intent: str
    confidence: float
    route: str  # device, cloud or fallback
    reason: str
    audio_s: float
    offramp_score: float | None
    latency: LatencyBreakdown
    note: str = ""

    @property
    def latency_ms(self) -> float:
        return self.latency.total_ms

    def to_json(self) -> dict:
        body = asdict(self)
        body.update(scenario=self.scenario, action=self.action, latency_ms=self.latency_ms)
        return body


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


class _Clock:
    """Attributes the time since the end of speech to stages, for `LatencyBreakdown`."""

    def __init__(self, catch_up_s: float = 0.0):
        self.catch_up_s = catch_up_s
        self.started = self.last = time.perf_counter()
        self.stages: dict[str, float] = {}

    def mark(self, stage: str, count: bool = True) -> None:
        now = time.perf_counter()
        if count:
            self.add(stage, now - self.last)
        self.last = now

    def add(self, stage: str, seconds: float) -> None:
        self.stages[stage] = self.stages.get(stage, 0.0) + seconds

    def breakdown(self) -> "LatencyBreakdown":
        return LatencyBreakdown(
            catch_up_ms=_ms(self.catch_up_s),
            settle_ms=_ms(self.stages.get("settle", 0.0)),
            offramp_ms=_ms(self.stages.get("offramp", 0.0)),
            device_decode_ms=_ms(self.stages.get("device_decode")),
            cloud_ms=_ms(self.stages.get("cloud")),
            intent_ms=_ms(self.stages.get("intent")),
            total_ms=_ms(self.catch_up_s + time.perf_counter() - self.started),
        )


class UnderstandingSession:
    """One utterance being spoken: `feed` audio as it arrives, `finish` at the end of speech."""

    def __init__(self, understander: "Understander", session: Session):
        self._understander = understander
        self._session = session
        self._result: Understanding | None = None

    def feed(self, pcm: np.ndarray, sample_rate_hz: int = SAMPLE_RATE_HZ) -> None:
        self._session.feed(pcm, sample_rate_hz)

    def finish(self) -> Understanding:
        if self._result is None:
            self._result = self._understander.conclude(self._session)
        return self._result


class Understander:
    """The device's speech understanding: engine, offramp policy, cloud client, intent."""

    def __init__(
        self,
        model_dir: Path | str | None = None,
        *,
        policy: str | Policy | None = None,
        cloud: CloudClient | str | None = None,
        api_key: str | None = None,
        deadline_s: float = 3.0,
        hedge: bool | None = None,
        engine_config: EngineConfig | None = None,
        intent_path: Path | str | None = None,
    ):
        model_dir = Path(model_dir) if model_dir else DEFAULT_MODEL_DIR
        if not (model_dir / CONFIG_FILE).is_file():
            raise ConfigError(
                f"no device model in {model_dir}; export one with `pasu export` "
                "or check out the repository with its models/pretrained/"
            )
        if deadline_s <= 0:
            raise ConfigError(f"deadline_s must be positive, got {deadline_s}")
        self.engine = Engine(model_dir, engine_config or EngineConfig())
        self.policy = (
            policy if not isinstance(policy, str | None) else load_policy(model_dir, policy)
        )
        self.cloud = self._cloud_client(cloud, api_key)
        if isinstance(self.cloud, EmbeddedCloud) and getattr(self.policy, "name", "") != "never":
            self.cloud.preload()
        self.deadline_s = deadline_s
        self.hedge = hedge if hedge is not None else not isinstance(self.cloud, EmbeddedCloud)
        self.intent_model = device_intent_model(model_dir, intent_path)
        self._hedges = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pasu-hedge")

    @staticmethod
    def _cloud_client(cloud: CloudClient | str | None, api_key: str | None) -> CloudClient:
        if cloud is None or cloud == "embedded":
            return EmbeddedCloud()
        if isinstance(cloud, str):
            return HttpCloudClient(cloud, api_key)
        return cloud

    def stream(self) -> UnderstandingSession:
        return UnderstandingSession(self, self.engine.stream())

    def understand(
        self, utterance: AudioSource, sample_rate_hz: int | None = None, chunk_s: float = 0.1
    ) -> Understanding:
        """Understand a whole recording (path, encoded bytes, or samples) as if it were spoken
        now: it is fed in `chunk_s` pieces as fast as the machine goes, while pilots are
        scheduled on the timeline a live 1× stream would have had (`device.latency`), so the
        route and the latency are those of live use."""
        if isinstance(utterance, np.ndarray):
            if sample_rate_hz is None:
                raise AudioError("give sample_rate_hz with raw samples")
            samples = np.asarray(utterance)
            if samples.dtype == np.int16:
                samples = samples.astype(np.float32) / 32768.0
            samples = to_mono(samples.astype(np.float32), sample_rate_hz)
        else:
            samples = load_audio(utterance)
        if not np.all(np.isfinite(samples)):
            raise AudioError("audio contains NaN or infinite samples")
        pilots = SimulatedPilots()
        session = self.engine.stream(pilots=pilots)
        timeline = feed_virtually(session, pilots, np.clip(samples, -1.0, 1.0), chunk_s)
        return self.conclude(session, catch_up_s=timeline.waiting_s)

    def conclude(self, session: Session, catch_up_s: float = 0.0) -> Understanding:
        """End of speech → offramp decision → full decode or offload → result. `catch_up_s`:
        time ingestion still needed after the end of speech (virtual replay)."""
        clock = _Clock(catch_up_s)
        end = session.end_of_speech()
        clock.mark("settle")
        transcript = None
        if end.last_pilot is None:  # no pilot finished in time: judge the full decode instead
            transcript = session.finish()
            clock.mark("device_decode")
            decided_on = transcript.decode
            prefix = "no pilot output in time, judged the full decode: "
        else:
            decided_on, prefix = end.last_pilot.result, ""
        features = (
            OfframpFeatures.from_decoding(decided_on, session.audio_s) if decided_on else None
        )
        decision = self.policy.decide(features)
        decision = Decision(decision.offload, decision.score, prefix + decision.reason)
        clock.mark("offramp")
        if not decision.offload:
            return self._on_device(session, transcript, decision, clock)
        return self._offload(session, transcript, decision, clock)

    def _answer(self, session, text, intent, confidence, route, reason, decision, clock, note=""):
        return Understanding(
            text=text,
            intent=intent,
            confidence=round(confidence, 4),
            route=route,
            reason=reason,
            audio_s=round(session.audio_s, 3),
            offramp_score=decision.score,
            latency=clock.breakdown(),
            note=note,
        )

    def _device_intent(self, transcript: Transcript, clock: "_Clock") -> tuple[str, float]:
        if not transcript.text:
            return "", 0.0
        prediction = self.intent_model.predict([transcript.text])[0]
        clock.mark("intent")
        return prediction.intent, prediction.confidence

    def _on_device(self, session, transcript, decision, clock):
        if transcript is None:
            transcript = session.finish()
            clock.mark("device_decode")
        intent, confidence = self._device_intent(transcript, clock)
        return self._answer(
            session,
            transcript.text,
            intent,
            confidence,
            "device",
            decision.reason,
            decision,
            clock,
            transcript.note,
        )

    def _offload(self, session, transcript, decision, clock):
        local = None
        if transcript is None and self.hedge:
            local = self._hedges.submit(self._timed_finish, session)
        try:
            answer: CloudAnswer = self.cloud.offload(session.audio(), self.deadline_s)
        except OffloadFailed as failure:
            clock.mark("cloud")
            if transcript is None and local is not None:
                transcript, decode_s = local.result()
                clock.add("device_decode", decode_s)  # overlapped the cloud wait
                clock.mark("hedge_wait", count=False)
            elif transcript is None:
                transcript = session.finish()
                clock.mark("device_decode")
            intent, confidence = self._device_intent(transcript, clock)
            reason = f"{decision.reason}; offload failed: {failure}"
            return self._answer(
                session,
                transcript.text,
                intent,
                confidence,
                "fallback",
                reason,
                decision,
                clock,
                transcript.note,
            )
        clock.mark("cloud")
        reason = f"{decision.reason}; answered by the {answer.source} cloud"
        return self._answer(
            session,
            answer.text,
            answer.intent,
            answer.confidence,
            "cloud",
            reason,
            decision,
            clock,
        )

    @staticmethod
    def _timed_finish(session: Session) -> tuple[Transcript, float]:
        started = time.perf_counter()
        transcript = session.finish()
        return transcript, time.perf_counter() - started

    def close(self) -> None:
        self._hedges.shutdown(wait=False)
        self.engine.close()

    def __enter__(self) -> "Understander":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


_default_lock = threading.Lock()


@functools.cache
def _default_understander() -> Understander:
    return Understander()


def understand(utterance: AudioSource, sample_rate_hz: int | None = None) -> Understanding:
    """Understand one utterance with the shipped model and default settings (loaded once)."""
    with _default_lock:
        understander = _default_understander()
    return understander.understand(utterance, sample_rate_hz)
