"""How a leaf is declared: type (with its constraints), default, one line of help, hot or cold.

A leaf is a field of a bag struct annotated with `leaf(...)`:

    page_size: Annotated[PositiveInt, leaf("Tokens per KV-cache page.", hot=False)] = 1

Constraints live on the value type (`config_bags.constraints`), choices are `Literal`s, and
msgspec itself checks both on construction, decoding and conversion. The help line and the
hot flag ride in a `msgspec.Meta`.
"""

from __future__ import annotations

import msgspec

from config_bags.errors import DefinitionError

HOT_KEY = "hot"


def leaf(help: str, *, hot: bool) -> msgspec.Meta:
    """Declare a leaf: `help` is one line; `hot` says whether it may change while serving."""
    if not help or "\n" in help:
        raise DefinitionError(f"leaf help must be one non-empty line, got {help!r}")
    return msgspec.Meta(description=help, extra={HOT_KEY: hot})
