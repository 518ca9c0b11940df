import numpy as np
import pytest
import soundfile as sf

from pasu.core.errors import AudioError, PasuError
from pasu.device.encoder import StreamingEncoder
from pasu.device.engine import PLAIN, Engine, EngineConfig
from pasu.speech.decoding import BeamSearch
from pasu.speech.frontend import compute_fbank


def _audio(seconds: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(16000 * seconds)) / 16000
    return (
        0.2 * np.sin(2 * np.pi * 300 * t * (1 + 0.3 * np.sin(t)))
        + 0.02 * rng.standard_normal(t.size)
    ).astype(np.float32)


@pytest.fixture(scope="module")
def engine(tiny_model):
    engine = Engine(tiny_model[1], PLAIN)
    yield engine
    engine.close()


def test_streamed_session_equals_plain_beam_search_on_the_whole_utterance(engine):
    audio = _audio(2.5)
    session = engine.stream()
    for piece in np.array_split(audio, 17):
        session.feed(piece)
    result = session.finish()
    encoder = StreamingEncoder(engine.model)
    encoder.accept(compute_fbank(audio, engine.model.cmvn))
    encoded, ctc_log_probs = encoder.contextualize()
    expected = BeamSearch(engine.model.decoder_step, engine.model.sos_eos_id).decode(
        engine.model.decoder_memory(encoded), ctc_log_probs
    )
    assert result.token_ids == expected.token_ids
    assert result.audio_s == pytest.approx(2.5)
    assert result.text == engine.model.tokenizer.decode(expected.token_ids)


def test_finish_twice_returns_the_same_result_and_feed_after_finish_is_refused(engine):
    session = engine.stream()
    session.feed(_audio(1.0))
    first = session.finish()
    assert session.finish() is first
    with pytest.raises(PasuError, match="after finish"):
        session.feed(_audio(0.1))


def test_pilots_run_during_ingestion_and_feed_the_full_decode(tiny_model):
    engine = Engine(tiny_model[1], EngineConfig(first_pilot_s=1.0, pilot_interval_s=0.5))
    session = engine.stream()
    audio = _audio(3.0)
    for start in range(0, len(audio), 1600):  # 0.1 s pieces, letting each pilot finish
        session.feed(audio[start : start + 1600])
        if session._pilots.in_flight is not None:
            session._pilots.in_flight.result()
    result = session.finish()
    engine.close()
    assert result.pilots_run == 5 and result.pilots_skipped == 0  # at 1.0, 1.5, ..., 3.0 s
    assert result.last_pilot.audio_s == pytest.approx(3.0)
    assert len(result.last_pilot.result.token_ids) <= 15
    assert result.decode.num_decoder_calls >= 1


def test_a_busy_pilot_is_skipped_rather_than_queued(tiny_model):
    engine = Engine(tiny_model[1], EngineConfig(first_pilot_s=0.5, pilot_interval_s=0.1))
    session = engine.stream()
    audio = _audio(3.0)
    for start in range(0, len(audio), 1600):
        session.feed(audio[start : start + 1600])  # as fast as possible: pilots cannot keep up
    result = session.finish()
    engine.close()
    assert result.pilots_skipped > 0
    assert result.pilots_run + result.pilots_skipped <= 26


@pytest.mark.parametrize(
    ("pcm", "message"),
    [
        (np.array([0.1, np.nan, 0.2], np.float32), "NaN or infinite"),
        (np.zeros((1600, 2), np.float32), "mono"),
        (np.zeros(1600, np.int32), "int16 or float"),
    ],
)
def test_bad_samples_are_clear_errors(engine, pcm, message):
    with pytest.raises(AudioError, match=message):
        engine.stream().feed(pcm)


def test_empty_and_very_short_audio_give_an_empty_result_with_a_reason(engine):
    assert engine.stream().finish().note.startswith("shorter than")
    session = engine.stream()
    session.feed(_audio(0.2))
    result = session.finish()
    assert result.text == "" and "shorter than 0.3 s" in result.note


def test_other_rates_and_int16_are_accepted(engine):
    session = engine.stream()
    audio = _audio(1.5)
    eight_khz = (audio[::2] * 32767).astype(np.int16)
    for piece in np.array_split(eight_khz, 5):
        session.feed(piece, sample_rate_hz=8000)
    assert session.finish().audio_s == pytest.approx(1.5, abs=0.01)


def test_long_audio_is_truncated_to_the_configured_maximum(tiny_model):
    engine = Engine(tiny_model[1], EngineConfig(pilots=False, max_utterance_s=2.0))
    session = engine.stream()
    for _ in range(5):
        session.feed(_audio(1.0))
    result = session.finish()
    assert result.truncated and result.audio_s == pytest.approx(2.0)


def test_understand_audio_replays_a_file(engine, tmp_path):
    path = tmp_path / "clip.flac"
    sf.write(path, _audio(1.2), 16000)
    result = engine.transcribe(path)
    assert result.audio_s == pytest.approx(1.2, abs=0.01) and isinstance(result.text, str)


def test_virtual_clock_replay_schedules_pilots_like_real_time(tiny_model):
    from pasu.device.latency import replay_virtual

    engine = Engine(tiny_model[1], EngineConfig(first_pilot_s=1.5, pilot_interval_s=0.5))
    result, latency = replay_virtual(engine, _audio(3.2))
    engine.close()
    # a tiny model keeps up: pilots at 1.5, 2.0, 2.5, 3.0 s, none skipped
    assert (latency.pilots_run, latency.pilots_skipped) == (4, 0)
    assert result.last_pilot.audio_s == pytest.approx(3.0)
    assert latency.total_ms == pytest.approx(
        latency.waiting_for_ingestion_ms + latency.finish_compute_ms
    )
    assert latency.finish_compute_ms > 0


@pytest.mark.slow
def test_virtual_and_real_time_latency_agree_within_15_percent(tiny_model):
    from pasu.device.latency import replay_realtime, replay_virtual

    engine = Engine(tiny_model[1], EngineConfig(first_pilot_s=1.5, pilot_interval_s=0.5))
    audio = [_audio(2.0 + 0.5 * i, seed=i) for i in range(4)]
    virtual = sum(replay_virtual(engine, a)[1].total_ms for a in audio)
    real = sum(replay_realtime(engine, a)[1].total_ms for a in audio)
    engine.close()
    assert abs(virtual - real) <= 0.15 * real, (virtual, real)


def test_invalid_engine_settings_are_a_config_error():
    from pasu.core.errors import ConfigError

    with pytest.raises(ConfigError, match="pilot_interval_s must be positive"):
        EngineConfig(pilot_interval_s=0)
    with pytest.raises(ConfigError, match="ctc_weight"):
        EngineConfig().with_decoding(ctc_weight=1.5)


def test_changing_the_sample_rate_within_a_session_is_refused(engine):
    session = engine.stream()
    session.feed(_audio(0.5)[::2], sample_rate_hz=8000)
    with pytest.raises(AudioError, match="sample rate changed"):
        session.feed(_audio(0.5), sample_rate_hz=16000)
