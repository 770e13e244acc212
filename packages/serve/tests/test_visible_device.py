"""visible_device_type answers the device type the runner would use, and None for a device torch
cannot see, which the rules and handlers that ask it pass over (max_total_tokens refuses it)."""

from __future__ import annotations

import pytest
import torch

from config_bags.server import Bags, DeviceBag
from serve.visible_device import visible_device_type


def test_a_device_torch_cannot_see_is_none_and_auto_resolves(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert visible_device_type(Bags(device=DeviceBag(device="cuda"))) is None
    assert visible_device_type(Bags(device=DeviceBag(device="auto"))) == "cpu"
    assert visible_device_type(Bags(device=DeviceBag(device="cpu"))) == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert visible_device_type(Bags(device=DeviceBag(device="auto"))) == "cuda"
