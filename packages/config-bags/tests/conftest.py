"""Every test starts unpublished and leaves the process unpublished."""

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import config_bags
import config_bags.server

# The shared hypothesis strategies (bag_strategies.py) live beside the tests.
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def _unpublished() -> Iterator[None]:
    config_bags.unpublish()
    config_bags.clear_role_violations()
    yield
    config_bags.unpublish()


@pytest.fixture
def published() -> config_bags.server.Bags:
    """Default bags published for the standalone role."""
    bags = config_bags.server.Bags()
    config_bags.publish(bags, role="standalone")
    return bags
