"""User-perceived latency: the time from the last sample of speech to the result.

Two ways to replay an utterance through a session, in `chunk_s` pieces:

- `replay_realtime`: audio is fed at 1× speed (sleeping between pieces), pilots run on the live
  worker thread, and the wall clock measures latency. Slow: each utterance takes its duration.
- `replay_virtual`: as fast as the machine goes, while laying every step's measured compute on
  the timeline that 1× replay would have had: piece k arrives at (k+1)·chunk_s; ingestion works
  through pieces in order on one core; a pilot that falls due starts when its piece has been
  ingested, on the other core, unless the previous pilot is still running (then it is skipped,
  as live); the end-of-speech decode starts when the last piece has been ingested and follows
  the last pilot finished by then. Used for large evaluations.
"""

import time
from dataclasses import dataclass

import numpy as np

from pasu.core.audio import SAMPLE_RATE_HZ
from pasu.device.engine import Engine, PilotJob, PilotRecord, Session, Transcript, split_audio
from pasu.speech.decoding import PilotReference


@dataclass(frozen=True)
class Latency:
    """Where the time after the end of speech went (milliseconds)."""

    total_ms: float  # end of speech -> result
    waiting_for_ingestion_ms: float  # ingestion still catching up at the end of speech
    finish_compute_ms: float  # attention blocks + full decode
    pilots_run: int
    pilots_skipped: int
    ingestion_compute_ms: float = 0.0  # features + convolution blocks, while speaking
    pilot_compute_ms: float = 0.0  # all pilots that ran

    @property
    def device_compute_ms(self) -> float:
        return self.ingestion_compute_ms + self.pilot_compute_ms + self.finish_compute_ms


class SimulatedPilots:
    """Pilot scheduling on the virtual timeline: decisions follow simulated, not real, time."""

    def __init__(self):
        self.now_s = 0.0  # virtual time at which the current piece finished ingesting
        self.worker_free_at_s = 0.0
        self.finished: list[tuple[float, PilotRecord]] = []  # (virtual end, record)
        self.pending: PilotJob | None = None
        self.skipped = 0

    def due(self, job: PilotJob) -> None:
        self.pending = job  # run by `run_pending` once this piece's ingestion time is known

    def _last_finished_by(self, time_s: float) -> PilotRecord | None:
        done = [record for end, record in self.finished if end <= time_s]
        return done[-1] if done else None

    def run_pending(self) -> None:
        if self.pending is None:
            return
        job, self.pending = self.pending, None
        if self.now_s < self.worker_free_at_s:
            self.skipped += 1
            return
        last = self._last_finished_by(self.now_s)
        reference: PilotReference | None = last.result.reference if last else None
        record = job(reference)
        if record is None:
            return
        self.worker_free_at_s = self.now_s + record.compute_s
        self.finished.append((self.worker_free_at_s, record))

    def settle(self) -> tuple[PilotRecord | None, int, int]:
        # A pilot still running at the end of speech is cancelled live: neither run nor used.
        finished = sum(end <= self.now_s for end, _ in self.finished)
        return self._last_finished_by(self.now_s), finished, self.skipped


@dataclass(frozen=True)
class VirtualTimeline:
    """Where a virtual 1× replay stands at the end of speech (seconds)."""

    end_of_speech_s: float
    finish_start_s: float  # when ingestion has caught up: the end-of-speech work starts
    ingestion_s: float  # compute spent ingesting

    @property
    def waiting_s(self) -> float:
        return self.finish_start_s - self.end_of_speech_s


def feed_virtually(
    session: Session, pilots: SimulatedPilots, samples: np.ndarray, chunk_s: float = 0.1
) -> VirtualTimeline:
    """Feed 16 kHz samples as fast as possible, scheduling pilots on the 1× timeline; on return
    the session is at the end of speech, ready for `end_of_speech()`/`finish()`."""
    ingest_free_at_s = arrival_s = ingestion_s = 0.0
    for piece in split_audio(samples, chunk_s):
        arrival_s += len(piece) / SAMPLE_RATE_HZ
        started = time.perf_counter()
        session.feed(piece)
        compute_s = time.perf_counter() - started
        ingestion_s += compute_s
        ingest_free_at_s = max(arrival_s, ingest_free_at_s) + compute_s
        pilots.now_s = ingest_free_at_s
        pilots.run_pending()
    finish_start_s = max(arrival_s, ingest_free_at_s)
    pilots.now_s = finish_start_s
    return VirtualTimeline(arrival_s, finish_start_s, ingestion_s)


def replay_virtual(
    engine: Engine, samples: np.ndarray, chunk_s: float = 0.1
) -> tuple[Transcript, Latency]:
    """Replay as fast as possible; latency as a 1× replay on two cores would have seen it."""
    pilots = SimulatedPilots()
    session = engine.stream(pilots=pilots)
    timeline = feed_virtually(session, pilots, samples, chunk_s)
    finish_start_s, ingestion_s = timeline.finish_start_s, timeline.ingestion_s
    result = session.finish()
    waiting_s = timeline.waiting_s
    latency = Latency(
        1000 * (waiting_s + result.finish_compute_s),
        1000 * waiting_s,
        1000 * result.finish_compute_s,
        result.pilots_run,
        result.pilots_skipped,
        1000 * ingestion_s,
        1000 * sum(r.compute_s for end, r in pilots.finished if end <= finish_start_s),
    )
    return result, latency


def replay_realtime(
    engine: Engine, samples: np.ndarray, chunk_s: float = 0.1
) -> tuple[Transcript, Latency]:
    """Feed at 1× speed with live pilots; latency on the wall clock."""
    session = engine.stream()
    started = time.perf_counter()
    arrival_s = 0.0
    for piece in split_audio(samples, chunk_s):
        arrival_s += len(piece) / SAMPLE_RATE_HZ
        delay = started + arrival_s - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        session.feed(piece)
    end_of_speech = started + arrival_s
    behind_s = max(time.perf_counter() - end_of_speech, 0.0)
    result = session.finish()
    total_s = time.perf_counter() - end_of_speech
    return result, Latency(
        1000 * total_s,
        1000 * behind_s,
        1000 * result.finish_compute_s,
        result.pilots_run,
        result.pilots_skipped,
    )
