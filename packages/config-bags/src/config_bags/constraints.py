"""Constrained value types for leaves. A constraint lives on the type, so it also holds
inside an optional leaf (`PositiveInt | None`), where msgspec checks it when a value is set."""

from __future__ import annotations

from typing import Annotated

import msgspec

PositiveInt = Annotated[int, msgspec.Meta(ge=1)]
NonNegativeInt = Annotated[int, msgspec.Meta(ge=0)]
PositiveOrDisabledInt = Annotated[int, msgspec.Meta(ge=-1)]
NonNegativeFloat = Annotated[float, msgspec.Meta(ge=0.0)]
AboveOneFloat = Annotated[float, msgspec.Meta(gt=1.0)]
Port = Annotated[int, msgspec.Meta(ge=1, le=65535)]
NonEmptyStr = Annotated[str, msgspec.Meta(min_length=1)]
BatchSizes = Annotated[tuple[PositiveInt, ...], msgspec.Meta(min_length=1)]
