"""Roots of bags across processes: typed msgpack that validates on the way in.

A decoder is built once per root type; the receiving process names the root type it expects, so
any stack's root, or one extended with bags of its own, travels the same way.
"""

from __future__ import annotations

from functools import cache
from typing import Any, TypeVar

import msgspec

from config_bags.bag import checked_by_msgspec
from config_bags.errors import WireError
from config_bags.root import Root
from config_bags.schema import root_fields

R = TypeVar("R", bound=Root)

_encoder = msgspec.msgpack.Encoder()


@cache
def _decoder(root_type: type[Root]) -> msgspec.msgpack.Decoder[Any]:
    root_fields(root_type)  # a type that is no root is refused here, saying what a root is
    return msgspec.msgpack.Decoder(root_type)


def encode(root: Root) -> bytes:
    """The msgpack bytes of `root`."""
    return _encoder.encode(root)


def decode(data: bytes, root_type: type[R]) -> R:
    """The root of type `root_type` in `data`; types, constraints and cross-leaf checks are
    applied, else WireError."""
    decoder = _decoder(root_type)
    try:
        with checked_by_msgspec():
            decoded: R = decoder.decode(data)
    except (msgspec.DecodeError, ValueError) as err:
        raise WireError(f"bytes do not decode into valid {root_type.__name__}: {err}") from None
    return decoded
