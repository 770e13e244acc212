"""The device type a launch runs on, where torch can see its device.

Many rules and handlers ask the device type; a device torch cannot see (device = cuda on a host
without CUDA) is refused once, by the handler that sizes the KV pool (max_total_tokens), with the
device's provenance. The others ask here and pass over such a device rather than refuse it again.
"""

from __future__ import annotations

from config_bags.server import Bags
from runtime_runner import device_of


def visible_device_type(bags: Bags) -> str | None:
    """The type of the device `bags` names (auto resolved as the runner resolves it), or None for a
    device torch cannot see."""
    try:
        return device_of(bags.device).type
    except RuntimeError:
        return None
