"""Far-field acoustics: a seeded bank of simulated room impulse responses per split.

Full-order image-source simulation gives the right RT60 but costs up to ~1.5 s per response at
RT60 0.8 s, too slow per clip. So each split gets its own bank of rooms (disjoint between
splits, like the voices), computed once, cached, and drawn from per clip.
"""

import os
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from pasu.core.paths import cache_dir

RT60_RANGE_S = (0.3, 0.8)
DISTANCE_RANGE_M = (1.0, 4.0)
BANK_SIZES = {"train": 240, "devel": 60, "test": 60}
_SPLIT_CODES = {"train": 0, "devel": 1, "test": 2}


def bank_size(split: str) -> int:
    """Rooms per split; PASU_ROOM_BANK_SIZE overrides it (tests and quick trials use a few)."""
    override = os.environ.get("PASU_ROOM_BANK_SIZE")
    return int(override) if override else BANK_SIZES[split]


@dataclass(frozen=True)
class Room:
    """One simulated room: its impulse response at 16 kHz and how it was made."""

    rir: np.ndarray
    rt60_s: float
    distance_m: float


def _place(rng: np.random.Generator, dims: np.ndarray, distance_m: float):
    """A microphone and a source `distance_m` apart, both at least 0.4 m from every wall."""
    margin = 0.4
    for _ in range(1000):
        mic = rng.uniform([margin] * 3, dims - margin)
        mic[2] = rng.uniform(0.7, min(1.6, dims[2] - margin))
        azimuth = rng.uniform(0, 2 * np.pi)
        source = mic + distance_m * np.array([np.cos(azimuth), np.sin(azimuth), 0.0])
        source[2] = rng.uniform(1.1, min(1.9, dims[2] - margin))
        if np.all(source > margin) and np.all(source < dims - margin):
            return mic, source
    return None


def simulate_room(rng: np.random.Generator, rate_hz: int = 16_000) -> Room:
    """Simulate a random shoebox room with RT60 and distance drawn from the ranges above."""
    import pyroomacoustics as pra

    while True:
        rt60 = rng.uniform(*RT60_RANGE_S)
        distance = rng.uniform(*DISTANCE_RANGE_M)
        dims = np.array([rng.uniform(4, 9), rng.uniform(3.5, 7), rng.uniform(2.5, 3.5)])
        placement = _place(rng, dims, distance)
        if placement is None:
            continue
        try:
            absorption, max_order = pra.inverse_sabine(rt60, dims)
        except ValueError:  # this room cannot reach this RT60
            continue
        mic, source = placement
        room = pra.ShoeBox(
            dims, fs=rate_hz, materials=pra.Material(absorption), max_order=max_order
        )
        room.add_source(source)
        room.add_microphone(mic)
        room.compute_rir()
        rir = np.asarray(room.rir[0][0], dtype=np.float32)
        return Room(rir / np.abs(rir).max(), float(rt60), float(distance))


def room_bank(split: str, seed: int, size: int | None = None, progress: bool = True) -> list[Room]:
    """The split's rooms, computed once per (split, seed, size) and cached under ~/.cache/pasu."""
    size = size or bank_size(split)
    path = cache_dir() / "rooms" / f"{split}-seed{seed}-n{size}.npz"
    if path.is_file():
        with np.load(path) as stored:
            return [
                Room(stored[f"rir{i}"], float(stored["rt60"][i]), float(stored["distance"][i]))
                for i in range(size)
            ]
    rng = np.random.default_rng([seed, _SPLIT_CODES[split], 7919])
    rooms = [
        simulate_room(rng)
        for _ in tqdm(range(size), desc=f"rooms ({split})", disable=not progress, unit="room")
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial.npz")
    np.savez(
        partial,
        rt60=[r.rt60_s for r in rooms],
        distance=[r.distance_m for r in rooms],
        **{f"rir{i}": r.rir for i, r in enumerate(rooms)},
    )
    partial.replace(path)
    return rooms
