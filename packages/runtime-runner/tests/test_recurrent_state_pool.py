"""The recurrent-state pool is sized from the bags and refuses slots it does not hold."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

import config_bags
from config_bags.server import Bags, ExecBag, MambaBag, ScheduleBag
from runtime_runner.errors import BatchError
from runtime_runner.linear_attention.recurrent_state_pool import (
    LinearLayerState,
    RecurrentStatePool,
    state_bytes_per_slot,
)

LAYERS = (LinearLayerState(conv_channels=96, conv_width=4, heads=4, k_dim=16, v_dim=8),) * 3


@pytest.fixture(autouse=True)
def _published() -> Iterator[None]:
    config_bags.unpublish()
    config_bags.publish(
        Bags(schedule=ScheduleBag(max_running_requests=6), exec=ExecBag(mamba=MambaBag(mamba_ssm_dtype="bfloat16"))),
        role="standalone",
    )
    yield
    config_bags.unpublish()


def test_the_pool_has_a_slot_per_running_request_in_the_state_dtype() -> None:
    pool = RecurrentStatePool(LAYERS, conv_dtype=torch.float32, device=torch.device("cpu"))
    assert pool.num_slots == 6 and pool.ssm_dtype == torch.bfloat16
    assert pool.conv[0].shape == (6, 96, 3) and pool.ssm[2].shape == (6, 4, 16, 8)
    assert state_bytes_per_slot(LAYERS, torch.float32, torch.bfloat16) == 3 * (96 * 3 * 4 + 4 * 16 * 8 * 2)
    config_bags.override("startup", max_mamba_cache_size=2)
    assert RecurrentStatePool(LAYERS, conv_dtype=torch.float32, device=torch.device("cpu")).num_slots == 2


def test_slots_outside_the_pool_or_shared_are_refused() -> None:
    pool = RecurrentStatePool(LAYERS, conv_dtype=torch.float32, device=torch.device("cpu"), num_slots=4)
    pool.check_slots([0, 3])
    with pytest.raises(BatchError, match=r"slots \[4\]; accepted: 0..3"):
        pool.check_slots([0, 4])
    with pytest.raises(BatchError, match="share a recurrent-state slot"):
        pool.check_slots([1, 1])
