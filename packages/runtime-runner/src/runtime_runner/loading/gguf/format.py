"""The GGUF container (versions 2 and 3, little-endian), read from its header: its metadata and
where each tensor's bytes lie.

gguf-py's reader builds a numpy view per metadata element, which takes seconds for a tokenizer's
hundred thousand strings; here the header is one pass of `struct`, and a string array is decoded
only when asked for (the loader needs none; the tokenizer writer needs the vocabulary).
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from runtime_runner.errors import CheckpointError

MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
# Metadata value type -> the struct code of one scalar of it (8: string, 9: array are read apart).
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class StringArray:
    """A metadata array of strings read without its strings: its length."""

    length: int

    def __len__(self) -> int:
        return self.length


@dataclass(frozen=True)
class TensorEntry:
    """One tensor of the file: its name, type, dims (GGML order: the row length first) and bytes."""

    name: str
    tensor_type: GGMLQuantizationType
    dims: tuple[int, ...]
    offset: int  # from the start of the file
    nbytes: int

    @property
    def shape(self) -> tuple[int, ...]:
        """The dims in numpy (row-major) order: [rows, row length] for a matrix."""
        return tuple(reversed(self.dims))


@dataclass(frozen=True)
class GgufLayout:
    """A GGUF file's metadata and tensor table."""

    metadata: Mapping[str, Any]
    tensors: tuple[TensorEntry, ...]


class _Cursor:
    """Little-endian reads from the file's bytes, advancing."""

    def __init__(self, data: mmap.mmap, path: Path, strings: bool) -> None:
        self.data, self.at, self.path, self.strings = data, 0, path, strings

    def scalar(self, code: str) -> Any:
        size = struct.calcsize("<" + code)
        if self.at + size > len(self.data):
            raise CheckpointError(f"{self.path} ends inside its GGUF header; accepted: a complete GGUF file")
        value = struct.unpack_from("<" + code, self.data, self.at)[0]
        self.at += size
        return value

    def string(self) -> str:
        length = self.scalar("Q")
        raw = self.data[self.at : self.at + length]
        self.at += length
        return bytes(raw).decode("utf-8", errors="replace")

    def value(self, kind: int) -> Any:
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            element, count = self.scalar("I"), self.scalar("Q")
            if element == _STRING:
                if self.strings:
                    return tuple(self.string() for _ in range(count))
                for _ in range(count):
                    self.at += 8 + struct.unpack_from("<Q", self.data, self.at)[0]
                return StringArray(count)
            if element not in _SCALARS:
                raise CheckpointError(f"{self.path}: a metadata array of type {element} is not a GGUF type")
            code = _SCALARS[element]
            values = struct.unpack_from(f"<{count}{code}", self.data, self.at)
            self.at += struct.calcsize(f"<{count}{code}")
            return tuple(values)
        if kind not in _SCALARS:
            raise CheckpointError(f"{self.path}: a metadata value of type {kind} is not a GGUF type")
        return self.scalar(_SCALARS[kind])


def read_gguf_layout(path: Path, *, strings: bool = False) -> GgufLayout:
    """The metadata and tensor table of the GGUF file at `path`, each string array decoded when
    `strings` (else a StringArray); CheckpointError for a file that is not GGUF v2/v3, or whose
    tensors lie past its end."""
    try:
        with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _parsed(_Cursor(data, path, strings))
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{path} is not a readable GGUF file ({err}); accepted: a GGUF v2/v3 file") from None


def _parsed(cursor: _Cursor) -> GgufLayout:
    data, path = cursor.data, cursor.path
    if bytes(data[:4]) != MAGIC:
        raise CheckpointError(f"{path} does not start with the GGUF magic; accepted: a GGUF v2/v3 file")
    cursor.at = 4
    version = cursor.scalar("I")
    if version not in VERSIONS:
        raise CheckpointError(
            f"{path} is GGUF version {version}; accepted: versions {' and '.join(map(str, VERSIONS))} (little-endian)"
        )
    tensor_count, kv_count = cursor.scalar("Q"), cursor.scalar("Q")
    metadata: dict[str, Any] = {}
    for _ in range(kv_count):
        key = cursor.string()
        metadata[key] = cursor.value(cursor.scalar("I"))
    entries = []
    for _ in range(tensor_count):
        name = cursor.string()
        dims = tuple(cursor.scalar("Q") for _ in range(cursor.scalar("I")))
        raw_type, offset = cursor.scalar("I"), cursor.scalar("Q")
        entries.append((name, dims, raw_type, offset))
    alignment = int(metadata.get("general.alignment", DEFAULT_ALIGNMENT))
    start = -(-cursor.at // alignment) * alignment
    tensors = []
    for name, dims, raw_type, offset in entries:
        try:
            tensor_type = GGMLQuantizationType(raw_type)
        except ValueError:
            raise CheckpointError(f"{path}: tensor {name} has type {raw_type}, which is no GGML type") from None
        block, block_bytes = GGML_QUANT_SIZES[tensor_type]
        count = 1
        for dim in dims:
            count *= dim
        nbytes = count // block * block_bytes
        if start + offset + nbytes > len(data):
            raise CheckpointError(
                f"{path}: tensor {name} lies past the end of the file; accepted: a complete GGUF file"
            )
        tensors.append(TensorEntry(name, tensor_type, dims, start + offset, nbytes))
    return GgufLayout(MappingProxyType(metadata), tuple(tensors))
