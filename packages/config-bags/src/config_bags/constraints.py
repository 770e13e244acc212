"""Constrained value types for leaves. A constraint lives on the type, so it also holds
inside an optional leaf (`PositiveInt | None`), where msgspec checks it when a value is set.

Every integer is bounded by 64 bits: the bags cross processes as msgpack, whose integers are
64-bit, so a larger value could be accepted here and then fail to travel."""

from __future__ import annotations

from typing import Annotated

import msgspec

INT64_MAX = 2**63 - 1

PositiveInt = Annotated[int, msgspec.Meta(ge=1, le=INT64_MAX)]
NonNegativeInt = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]
NonNegativeFloat = Annotated[float, msgspec.Meta(ge=0.0, le=1e15)]  # finite: an amount, not a switch
PositiveOrDisabledInt = Annotated[int, msgspec.Meta(ge=-1, le=INT64_MAX)]
AboveOneFloat = Annotated[float, msgspec.Meta(gt=1.0)]
UnitFloat = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
Port = Annotated[int, msgspec.Meta(ge=1, le=65535)]
NonEmptyStr = Annotated[str, msgspec.Meta(min_length=1)]
BatchSizes = Annotated[tuple[PositiveInt, ...], msgspec.Meta(min_length=1)]
