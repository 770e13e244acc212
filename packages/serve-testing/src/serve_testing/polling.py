"""Reading a server's reported state until it says what a test waits for.

The scheduler sends its stats to the HTTP process a few times a second (later on a loaded
machine), so /metrics and /server_info may lag the last answer a client got by that much.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def first_satisfying(
    read: Callable[[], T], satisfied: Callable[[T], bool], *, timeout_s: float = 15.0, interval_s: float = 0.2
) -> T:
    """`read()` every `interval_s` until what it answers is `satisfied`, or until `timeout_s` has
    passed; its last answer either way (the caller asserts on it, so a failure shows the value)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = read()
        if satisfied(value) or time.monotonic() > deadline:
            return value
        time.sleep(interval_s)
