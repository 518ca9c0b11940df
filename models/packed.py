"""Training data packed small enough to carry to a lent GPU machine.

A GPU machine here reaches no registry and takes at most 64 MB of files per call, while the
cached train features are ~3 GB. A pack holds CMVN-normalised features quantised to int8 steps
of `QUANTISATION_STEP` standard deviations (noise of ~0.07σ, far below SpecAugment's) with the
token ids, LZMA-compressed: about 24 bytes per 10 ms frame, so ~6,000 utterances per 42 MB.
Packs are written from a run's feature cache, tokenizer and CMVN, so what the GPU trains on is
what the CPU run would see.
"""

import io
import lzma
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from pasu.core.errors import DataError
from pasu.core.modeldir import CMVN_FILE, TOKENIZER_FILE
from pasu.models.features import CachedUtterance
from pasu.speech.frontend import GlobalCmvn
from pasu.speech.tokenizer import Tokenizer

QUANTISATION_STEP = 0.25
# Measured on SLURP-TTS train features: compressed bytes per frame at the step above.
EXPECTED_BYTES_PER_FRAME = 24.0


@dataclass
class PackedUtterance:
    """One utterance as the GPU trainer reads it: normalised features and token ids."""

    id: str
    features: np.ndarray  # (frames, 80) float32, CMVN applied
    tokens: np.ndarray  # int64
    close_talk: bool


def quantise(normalised: np.ndarray) -> np.ndarray:
    return np.clip(np.round(normalised / QUANTISATION_STEP), -127, 127).astype(np.int8)


def _pack_bytes(utterances: Sequence[tuple[CachedUtterance, np.ndarray]], cmvn: GlobalCmvn):
    codes = [quantise(cmvn(u.features.astype(np.float32))) for u, _ in utterances]
    buffer = io.BytesIO()
    np.savez(
        buffer,
        ids=np.array([u.id for u, _ in utterances]),
        codes=np.concatenate(codes),
        frame_counts=np.array([len(c) for c in codes], np.int32),
        tokens=np.concatenate([t for _, t in utterances]).astype(np.int32),
        token_counts=np.array([len(t) for _, t in utterances], np.int32),
        close_talk=np.array([u.close_talk for u, _ in utterances]),
        step=np.float32(QUANTISATION_STEP),
    )
    return lzma.compress(buffer.getvalue(), preset=6)


def write_packs(
    utterances: Iterable[CachedUtterance],
    tokenizer: Tokenizer,
    cmvn: GlobalCmvn,
    out_dir: Path,
    prefix: str,
    max_bytes: int,
    max_packs: int,
    progress: bool = True,
) -> list[Path]:
    """Pack utterances (in the order given) into at most `max_packs` files of ≤ `max_bytes`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    frame_budget = int(max_bytes / EXPECTED_BYTES_PER_FRAME * 0.97)
    written: list[Path] = []
    pending: list[tuple[CachedUtterance, np.ndarray]] = []
    frames = 0
    bar = tqdm(total=max_packs, desc=f"packing {prefix}", unit="pack", disable=not progress)

    def flush() -> None:
        data = _pack_bytes(pending, cmvn)
        while len(data) > max_bytes and len(pending) > 1:
            del pending[-max(1, len(pending) // 50) :]
            data = _pack_bytes(pending, cmvn)
        path = out_dir / f"{prefix}-{len(written):02d}.npz.xz"
        partial = path.with_name(path.name + ".partial")
        partial.write_bytes(data)
        partial.replace(path)  # a pack is whole or absent, also when packing is interrupted
        written.append(path)
        bar.update()

    for utterance in utterances:
        tokens = np.array(tokenizer.encode(utterance.text), np.int64)
        if not len(tokens):
            continue
        pending.append((utterance, tokens))
        frames += len(utterance.features)
        if frames >= frame_budget:
            flush()
            pending, frames = [], 0
            if len(written) == max_packs:
                break
    if pending and len(written) < max_packs:
        flush()
    bar.close()
    if not written:
        raise DataError("nothing to pack")
    return written


def read_pack(path: Path) -> Iterator[PackedUtterance]:
    with np.load(io.BytesIO(lzma.decompress(Path(path).read_bytes()))) as pack:
        step = float(pack["step"])
        frame_ends = np.cumsum(pack["frame_counts"])
        token_ends = np.cumsum(pack["token_counts"])
        codes, tokens = pack["codes"], pack["tokens"]
        for i, uid in enumerate(pack["ids"]):
            f0 = frame_ends[i - 1] if i else 0
            t0 = token_ends[i - 1] if i else 0
            yield PackedUtterance(
                str(uid),
                codes[f0 : frame_ends[i]].astype(np.float32) * step,
                tokens[t0 : token_ends[i]].astype(np.int64),
                bool(pack["close_talk"][i]),
            )


def shuffled(utterances: Iterable[CachedUtterance], keep: np.ndarray) -> Iterator[CachedUtterance]:
    """The utterances whose corpus positions are in `keep`, in `keep`'s order."""
    chosen = {int(position): rank for rank, position in enumerate(keep)}
    picked: list[CachedUtterance | None] = [None] * len(keep)
    for position, utterance in enumerate(utterances):
        if position in chosen:
            picked[chosen[position]] = utterance
    yield from (u for u in picked if u is not None)


def pack_run(
    run_dir: Path,
    train_cache: Path,
    devel_cache: Path,
    out_dir: Path,
    packs: int = 3,
    max_bytes: int = 42_000_000,
    seed: int = 0,
    skip: int = 0,
    progress: bool = True,
) -> list[Path]:
    """Pack a random sample of a run's train features (as many as `packs` files hold) and its
    validation sample, with the run's tokenizer and CMVN (also saved beside the packs). `skip`
    leaves out the first utterances of the (seeded) order, so that later packs hold other
    utterances than earlier ones."""
    from pasu.models.features import iter_cached

    tokenizer = Tokenizer(run_dir / TOKENIZER_FILE)
    cmvn = GlobalCmvn.load(run_dir / CMVN_FILE)
    total = sum(1 for _ in _ids(train_cache))
    order = np.random.default_rng(seed).permutation(total)
    # Enough candidates for the packs (~6,000 utterances each), not the whole corpus in memory.
    keep = order[skip : min(total, skip + packs * 8000)]
    out_dir.mkdir(parents=True, exist_ok=True)
    cmvn.save(out_dir / CMVN_FILE)  # the GPU trainer's voice perturbation needs it
    written = write_packs(
        shuffled(iter_cached(train_cache), keep),
        tokenizer,
        cmvn,
        out_dir,
        f"train-s{skip}" if skip else "train",
        max_bytes,
        packs,
        progress,
    )
    return written + write_packs(
        iter_cached(devel_cache), tokenizer, cmvn, out_dir, "devel", max_bytes, 1, progress
    )


def _ids(cache: Path) -> Iterator[str]:
    count = int((cache / "num_shards.txt").read_text())
    for index in range(count):
        with np.load(cache / f"shard-{index:05d}.npz") as shard:
            yield from shard["ids"]
