"""Which exceptions leave the device unusable, and how the runner tells the scheduler so.

Out of memory (torch.OutOfMemoryError, MemoryError) and CUDA errors (torch.AcceleratorError, or a
RuntimeError torch raises with "CUDA error" in it: a device-side assert, a lost device) end the
serving process; anything else a forward raises fails its step's requests, or one request alone
when its sampling raised, and the server goes on. A CPU allocation torch refuses (a RuntimeError
from the allocator) changed nothing and is not a device fault.

The scheduler imports no torch: `marked_device_faults` turns a device fault raised inside the
forward into a `DeviceFaultError`, whose `unrecoverable` attribute is what the scheduler's
`is_unrecoverable` reads (runtime_scheduler/executor.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


class DeviceFaultError(RuntimeError):
    """The device cannot go on (out of memory, a CUDA error): the serving process must end."""

    unrecoverable = True


def is_device_fault(error: BaseException) -> bool:
    """Whether `error` leaves the device (or the process) unable to serve another batch."""
    if isinstance(error, (MemoryError, torch.OutOfMemoryError, torch.AcceleratorError)):
        return True
    return isinstance(error, RuntimeError) and "CUDA error" in str(error)


@contextmanager
def marked_device_faults() -> Iterator[None]:
    """Re-raise a device fault raised inside the block as a DeviceFaultError (from the original)."""
    try:
        yield
    except Exception as err:
        if not is_device_fault(err):
            raise
        raise DeviceFaultError(f"the device cannot go on: {type(err).__name__}: {err}") from err
