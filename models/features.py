"""Feature cache for training: log-mel features of a corpus split, computed once, kept on disk.

Features are computed with the device frontend (`device.frontend.compute_fbank`, no CMVN) so
training sees exactly what the device computes, stored as float16 in shards of
`SHARD_SIZE` recordings under `~/.cache/pasu/features/<corpus>/<split>/`. A shard is written
atomically, so an interrupted run resumes at the first missing shard. CMVN statistics are
accumulated from the cached features.
"""

import hashlib
import multiprocessing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from pasu.core.audio import load_audio
from pasu.core.errors import AudioError, DataError
from pasu.core.paths import cache_dir
from pasu.core.slurp import Recording
from pasu.speech.frontend import NUM_MEL_BINS, GlobalCmvn, compute_fbank

SHARD_SIZE = 500


@dataclass(frozen=True)
class CachedUtterance:
    """One recording's features and transcript, as training reads them."""

    id: str
    features: np.ndarray  # (frames, 80) float16, before CMVN
    text: str
    close_talk: bool


def corpus_key(data_dir: Path) -> str:
    """Names a corpus's cache folder after its path, so two corpora never share features."""
    resolved = str(Path(data_dir).resolve())
    return f"{Path(resolved).name}-{hashlib.sha1(resolved.encode()).hexdigest()[:8]}"


def split_cache_dir(data_dir: Path, split: str) -> Path:
    return cache_dir() / "features" / corpus_key(data_dir) / split


def _shard_path(directory: Path, index: int) -> Path:
    return directory / f"shard-{index:05d}.npz"


def _compute_shard(args: tuple[Sequence[Recording], Path]) -> list[str]:
    """Features of one shard's recordings; returns the ids that could not be decoded."""
    recordings, path = args
    arrays: dict[str, np.ndarray] = {}
    texts, conditions, failed = [], [], []
    for recording in recordings:
        try:
            features = compute_fbank(load_audio(recording.audio_path))
        except AudioError:
            failed.append(recording.id)
            continue
        arrays[f"f{len(texts)}"] = features.astype(np.float16)
        texts.append(recording.text)
        conditions.append(recording.close_talk)
    ids = [r.id for r in recordings if r.id not in failed]
    partial = path.with_name(path.name + ".partial.npz")
    np.savez(
        partial, ids=np.array(ids), texts=np.array(texts), close_talk=np.array(conditions), **arrays
    )
    partial.replace(path)
    return failed


def build_feature_cache(
    recordings: Sequence[Recording], directory: Path, workers: int = 2, progress: bool = True
) -> list[str]:
    """Compute every missing shard; returns ids of recordings whose audio failed to decode."""
    if not recordings:
        raise DataError("no recordings to compute features for")
    directory.mkdir(parents=True, exist_ok=True)
    shards = [
        (recordings[i : i + SHARD_SIZE], _shard_path(directory, i // SHARD_SIZE))
        for i in range(0, len(recordings), SHARD_SIZE)
    ]
    _discard_if_stale(directory, recordings, len(shards))
    (directory / "num_shards.txt").write_text(f"{len(shards)}\n")
    pending = [shard for shard in shards if not shard[1].is_file()]
    failed: list[str] = []
    with tqdm(
        total=len(pending), desc=f"features {directory.name}", unit="shard", disable=not progress
    ) as bar:
        if workers <= 1 or len(pending) <= 1:
            results: Iterator[list[str]] = map(_compute_shard, pending)
            for result in results:
                failed += result
                bar.update()
        else:
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                for result in pool.imap_unordered(_compute_shard, pending):
                    failed += result
                    bar.update()
    return failed


def fingerprint(recordings: Sequence[Recording]) -> str:
    return hashlib.sha1("\n".join(f"{r.id}\t{r.text}" for r in recordings).encode()).hexdigest()


def _discard_if_stale(directory: Path, recordings: Sequence[Recording], num_shards: int) -> None:
    """Shards are reused only for the same recordings: a changed corpus (a resumed synthesis,
    a different limit) starts the cache afresh. A cache from before fingerprints is adopted
    when its shard count matches."""
    stamp = directory / "recordings.sha1"
    expected = fingerprint(recordings)
    count_file = directory / "num_shards.txt"
    if stamp.is_file():
        stale = stamp.read_text().strip() != expected
    else:
        stale = count_file.is_file() and int(count_file.read_text()) != num_shards
    if stale:
        for shard in directory.glob("shard-*.npz"):
            shard.unlink()
    stamp.write_text(expected + "\n")


def iter_cached(directory: Path) -> Iterator[CachedUtterance]:
    """Every cached utterance of a split, in corpus order."""
    count_file = directory / "num_shards.txt"
    if not count_file.is_file():
        raise DataError(f"no feature cache in {directory}; build it first")
    for index in range(int(count_file.read_text())):
        path = _shard_path(directory, index)
        if not path.is_file():
            raise DataError(f"feature cache {directory} is incomplete: {path.name} is missing")
        with np.load(path) as shard:
            for i, (uid, text, close) in enumerate(
                zip(shard["ids"], shard["texts"], shard["close_talk"], strict=True)
            ):
                yield CachedUtterance(str(uid), shard[f"f{i}"], str(text), bool(close))


def compute_cmvn(utterances: Iterator[CachedUtterance]) -> GlobalCmvn:
    """Global mean and standard deviation per feature dimension."""
    total = np.zeros(NUM_MEL_BINS, np.float64)
    squares = np.zeros(NUM_MEL_BINS, np.float64)
    frames = 0
    for utterance in utterances:
        features = utterance.features.astype(np.float64)
        total += features.sum(axis=0)
        squares += (features**2).sum(axis=0)
        frames += len(features)
    if frames == 0:
        raise DataError("no feature frames to compute CMVN from")
    mean = total / frames
    return GlobalCmvn(mean, np.sqrt(np.maximum(squares / frames - mean**2, 1e-10)))
