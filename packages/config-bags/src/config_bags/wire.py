"""Bags across processes: typed msgpack that validates on the way in."""

from __future__ import annotations

import msgspec

from config_bags.bags import Bags
from config_bags.bags.base import checked_by_msgspec
from config_bags.errors import WireError

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Bags)


def encode(bags: Bags) -> bytes:
    """The msgpack bytes of `bags`."""
    return _encoder.encode(bags)


def decode(data: bytes) -> Bags:
    """The `Bags` in `data`; types, constraints and cross-leaf checks are applied, else WireError."""
    try:
        with checked_by_msgspec():
            return _decoder.decode(data)
    except (msgspec.DecodeError, ValueError) as err:
        raise WireError(f"bytes do not decode into valid Bags: {err}") from None
