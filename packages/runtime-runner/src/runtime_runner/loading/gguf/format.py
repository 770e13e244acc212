"""The GGUF container (versions 2 and 3, little-endian), read from its header: its metadata and
where each tensor's bytes lie.

gguf-py's reader builds a numpy view per metadata element, which takes seconds for a tokenizer's
hundred thousand strings; here the header is one pass of `struct`, and a string array is decoded
only when asked for (the loader needs none; the tokenizer writer needs the vocabulary).

Nothing the header states is trusted before it is checked against the file: every count, length
and offset is held to the bytes that are really there (a truncated, corrupted or lying file is
refused with a CheckpointError naming the file, what it claims and what it holds), every tensor's
dims to its type's block size, and its bytes to lie inside the file, aligned, overlapping no other.
"""

from __future__ import annotations

import itertools
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
MAX_DIMS = 4  # ggml's GGML_MAX_DIMS: a tensor of more dims is no ggml tensor
# Metadata value type -> the struct code of one scalar of it (8: string, 9: array are read apart).
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY, _UINT32 = 8, 9, 4
# The fewest bytes one metadata entry (key length, value type, a one-byte value) and one tensor
# entry (name length, dim count, one dim, type, offset) take: what bounds a plausible count.
_MIN_KV_BYTES, _MIN_TENSOR_BYTES = 8 + 4 + 1, 8 + 4 + 8 + 4 + 8
_COMPLETE = "accepted: a complete, uncorrupted GGUF v2/v3 file"
_MAX_NAME = 256  # characters of a key or tensor name (llama.cpp's tensor names are 63 at most)


def _shown(text: str) -> str:
    """`text` as a message may quote it: escaped, and cut after 40 characters."""
    return repr(text[:40]) + ("..." if len(text) > 40 else "")


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
    """Little-endian reads from the file's bytes, advancing; a read past the end is refused."""

    def __init__(self, data: mmap.mmap, path: Path, strings: bool) -> None:
        self.data, self.at, self.path, self.strings = data, 0, path, strings

    def left(self) -> int:
        """Bytes from the cursor to the end of the file."""
        return len(self.data) - self.at

    def need(self, size: int, what: str) -> None:
        """Refuse `what` (its `size` bytes from here) where the file ends before it does."""
        if size > self.left():
            raise CheckpointError(
                f"{self.path.name}: {what} at byte {self.at} needs {size} bytes, but the file ends {self.left()} bytes "
                f"later (truncated or corrupt); {_COMPLETE}"
            )

    def scalar(self, code: str, what: str) -> Any:
        size = struct.calcsize("<" + code)
        self.need(size, what)
        value = struct.unpack_from("<" + code, self.data, self.at)[0]
        self.at += size
        return value

    def string(self, what: str) -> str:
        length = self.scalar("Q", f"the length of {what}")
        self.need(length, f"{what} ({length} bytes long)")
        raw = self.data[self.at : self.at + length]
        self.at += length
        return bytes(raw).decode("utf-8", errors="replace")

    def name(self, what: str) -> str:
        """A key or tensor name: the messages that name it are one line, so it must be printable."""
        text = self.string(what)
        if not text or not text.isprintable() or "\ufffd" in text or len(text) > _MAX_NAME:
            raise CheckpointError(
                f"{self.path.name}: {what} is {_shown(text)}, no name (a count or length before it is corrupt); "
                f"{_COMPLETE}"
            )
        return text

    def value(self, kind: int, key: str) -> Any:
        what = f"metadata {key}"
        if kind == _STRING:
            return self.string(what)
        if kind == _ARRAY:
            element, count = self.scalar("I", what), self.scalar("Q", f"the length of {what}")
            if element == _STRING:
                self.need(count * 8, f"{what}: an array of {count} strings (8 bytes of length each at least)")
                if self.strings:
                    return tuple(self.string(f"{what}[{i}]") for i in range(count))
                for i in range(count):
                    length = self.scalar("Q", f"the length of {what}[{i}]")
                    self.need(length, f"{what}[{i}] ({length} bytes long)")
                    self.at += length
                return StringArray(count)
            if element not in _SCALARS:
                raise CheckpointError(
                    f"{self.path.name}: {what} is an array of type {element}, which is no GGUF scalar or string type; "
                    f"{_COMPLETE}"
                )
            code = _SCALARS[element]
            size = count * struct.calcsize("<" + code)
            self.need(size, f"{what}: an array of {count} values")
            values = struct.unpack_from(f"<{count}{code}", self.data, self.at)
            self.at += size
            return tuple(values)
        if kind not in _SCALARS:
            raise CheckpointError(f"{self.path.name}: {what} has type {kind}, which is no GGUF type; {_COMPLETE}")
        return self.scalar(_SCALARS[kind], what)


def read_gguf_layout(path: Path, *, strings: bool = False) -> GgufLayout:
    """The metadata and tensor table of the GGUF file at `path`, each string array decoded when
    `strings` (else a StringArray); CheckpointError for a file that is not GGUF v2/v3, or whose
    header states a count, length, dim or offset the file's bytes do not bear out."""
    try:
        with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _parsed(_Cursor(data, path, strings))
    except (OSError, ValueError) as err:
        if isinstance(err, CheckpointError):
            raise
        raise CheckpointError(f"{path.name} is not a readable GGUF file ({err}); accepted: a GGUF v2/v3 file") from None


def _parsed(cursor: _Cursor) -> GgufLayout:
    path = cursor.path
    if bytes(cursor.data[:4]) != MAGIC:
        raise CheckpointError(f"{path.name} does not start with the GGUF magic; accepted: a GGUF v2/v3 file")
    cursor.at = 4
    version = cursor.scalar("I", "the version")
    if version not in VERSIONS:
        swapped = struct.unpack("<I", struct.pack(">I", version))[0]
        order = " (a big-endian file)" if swapped in VERSIONS else ""
        raise CheckpointError(
            f"{path.name} is GGUF version {version}{order}; accepted: versions "
            f"{' and '.join(map(str, VERSIONS))}, little-endian"
        )
    tensor_count, kv_count = cursor.scalar("Q", "the tensor count"), cursor.scalar("Q", "the metadata count")
    if kv_count * _MIN_KV_BYTES + tensor_count * _MIN_TENSOR_BYTES > cursor.left():
        raise CheckpointError(
            f"{path.name}: its header claims {tensor_count} tensors and {kv_count} metadata entries, more than the "
            f"{cursor.left()} bytes after it can hold (truncated or corrupt); {_COMPLETE}"
        )
    metadata = _metadata(cursor, kv_count)
    entries = [_tensor_info(cursor, i) for i in range(tensor_count)]
    alignment = _alignment(metadata, path)
    start = -(-cursor.at // alignment) * alignment
    tensors = tuple(_placed(path, entry, start, alignment, len(cursor.data)) for entry in entries)
    _refuse_shared_bytes(path, tensors)
    return GgufLayout(MappingProxyType(metadata), tensors)


def _metadata(cursor: _Cursor, count: int) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    for i in range(count):
        key = cursor.name(f"metadata key {i}")
        if key in metadata:
            raise CheckpointError(f"{cursor.path.name}: metadata {key} appears twice; {_COMPLETE}")
        metadata[key] = cursor.value(cursor.scalar("I", f"the type of metadata {key}"), key)
    return metadata


def _alignment(metadata: Mapping[str, Any], path: Path) -> int:
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise CheckpointError(
            f"{path.name}: general.alignment = {alignment!r}; accepted: a power of two (llama.cpp writes 32)"
        )
    return alignment


@dataclass(frozen=True)
class _TensorInfo:
    name: str
    dims: tuple[int, ...]
    tensor_type: GGMLQuantizationType
    offset: int  # from the start of the data section


def _tensor_info(cursor: _Cursor, index: int) -> _TensorInfo:
    path = cursor.path
    name = cursor.name(f"the name of tensor {index}")
    n_dims = cursor.scalar("I", f"the dim count of tensor {name}")
    if not 1 <= n_dims <= MAX_DIMS:
        raise CheckpointError(f"{path.name}: tensor {name} has {n_dims} dims; accepted: 1 to {MAX_DIMS}; {_COMPLETE}")
    dims = tuple(cursor.scalar("Q", f"the dims of tensor {name}") for _ in range(n_dims))
    raw_type, offset = cursor.scalar("I", f"the type of tensor {name}"), cursor.scalar("Q", f"the offset of {name}")
    try:
        tensor_type = GGMLQuantizationType(raw_type)
    except ValueError:
        raise CheckpointError(f"{path.name}: tensor {name} has type {raw_type}, which is no GGML type") from None
    block = GGML_QUANT_SIZES[tensor_type][0]
    if 0 in dims or dims[0] % block:
        raise CheckpointError(
            f"{path.name}: tensor {name} has dims {list(dims)} of type {tensor_type.name}; accepted: dims of at "
            f"least 1, the first (the row length) a multiple of {tensor_type.name}'s block of {block}"
        )
    return _TensorInfo(name, dims, tensor_type, offset)


def _placed(path: Path, info: _TensorInfo, start: int, alignment: int, file_size: int) -> TensorEntry:
    """`info` at its place in the file, which must be aligned and hold all of its bytes."""
    block, block_bytes = GGML_QUANT_SIZES[info.tensor_type]
    count = 1
    for dim in info.dims:
        count *= dim
    nbytes = count // block * block_bytes
    if info.offset % alignment:
        raise CheckpointError(
            f"{path.name}: tensor {info.name} starts at data offset {info.offset}, off the file's {alignment}-byte "
            f"alignment; {_COMPLETE}"
        )
    if start + info.offset + nbytes > file_size:
        raise CheckpointError(
            f"{path.name}: tensor {info.name} ({info.tensor_type.name} {list(reversed(info.dims))}, {nbytes} bytes at "
            f"byte {start + info.offset}) lies past the end of the {file_size}-byte file (truncated or corrupt); "
            f"{_COMPLETE}"
        )
    return TensorEntry(info.name, info.tensor_type, info.dims, start + info.offset, nbytes)


def _refuse_shared_bytes(path: Path, tensors: tuple[TensorEntry, ...]) -> None:
    """Refuse two tensors of one name, or two whose bytes overlap."""
    names: set[str] = set()
    for tensor in tensors:
        if tensor.name in names:
            raise CheckpointError(f"{path.name}: tensor {tensor.name} appears twice; {_COMPLETE}")
        names.add(tensor.name)
    ordered = sorted(tensors, key=lambda t: t.offset)
    for before, after in itertools.pairwise(ordered):
        if before.offset + before.nbytes > after.offset:
            raise CheckpointError(
                f"{path.name}: tensors {before.name} and {after.name} share bytes {after.offset} to "
                f"{min(before.offset + before.nbytes, after.offset + after.nbytes)}; {_COMPLETE}"
            )
