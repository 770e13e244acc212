"""A runner reads every setting from the published bags and publishes none itself: built before its
process published them, it is refused with a message that says how to publish.

Reverse-verified: with ModelRunner's guard (`_refuse_unpublished`) removed, the runner goes on to
read get_device() unpublished, and config_bags' own NotPublishedError says nothing of how a test or
a tool publishes, so the message check fails; restored, it passes.
"""

from __future__ import annotations

import re

import pytest

from config_bags import NotPublishedError, is_published
from runtime_runner.attention_seam import AttentionBackend, AttentionStamp
from runtime_runner.runner import ModelRunner


def _no_attention(
    prefill: str, decode: str, /, *, device_type: str, is_draft_override: bool = False, batch_invariant: bool = False
) -> tuple[AttentionStamp, AttentionBackend]:
    raise AssertionError("the runner asked for its attention pair before it was refused")


def test_a_runner_built_with_nothing_published_is_refused_saying_how_to_publish() -> None:
    how = 'config_bags.publish(Bags(...), role="standalone")'
    with pytest.raises(NotPublishedError, match=re.escape(how)):
        ModelRunner(_no_attention)
    assert not is_published()
