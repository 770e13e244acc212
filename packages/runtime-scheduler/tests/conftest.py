"""Every test starts unpublished and leaves the process unpublished."""

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import config_bags

# The deterministic executor (scheduler_fakes.py) lives beside the tests.
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def _unpublished() -> Iterator[None]:
    config_bags.unpublish()
    yield
    config_bags.unpublish()
