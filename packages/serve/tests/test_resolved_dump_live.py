"""`ResolvedArgs.dump()` (what /server_info serves as `config`) tells the configuration in force:
once the bags are published, its hash and derived values are the published ones, so they follow
an override; unpublished (--dump-config) they are the resolved record's."""

from __future__ import annotations

from pathlib import Path

import pytest

from config_bags import config_hash, hash_of, override, publish
from config_bags.server import chunk_size, max_prefill_buffer_tokens
from serve.record import ServerArgs, resolve

pytestmark = pytest.mark.usefixtures("unpublished")


def test_unpublished_dump_is_the_resolved_records(tiny_model: Path) -> None:
    result = resolve(ServerArgs(model_path=str(tiny_model)))
    dump = result.dump()
    args = result.server_args
    assert dump["config_hash"] == hash_of(result.bags())
    assert dump["derived"]["chunk_size"] == args.chunk_size
    assert dump["derived"]["max_prefill_buffer_tokens"] == args.max_prefill_buffer_tokens
    assert dump["derived"]["attention_backends"] == args.attention_backends._asdict()
    assert dump["derived"]["cuda_graph_decode_bs"] == list(args.effective_cuda_graph_decode_bs)


def test_dump_follows_an_override_after_publish(tiny_model: Path) -> None:
    """Reverse-verified: with `dump()` hashing and deriving from the resolved record (as before),
    the hash stayed at launch and chunk_size stayed 512 after the override to 64."""
    result = resolve(ServerArgs(model_path=str(tiny_model)))
    launched = result.dump()
    publish(result.bags(), role="launcher")
    assert result.dump()["config_hash"] == config_hash() == launched["config_hash"]
    assert launched["derived"]["chunk_size"] == 512

    override("admin", chunked_prefill_size=64, max_prefill_tokens=96)
    dump = result.dump()
    assert dump["config_hash"] == config_hash() != launched["config_hash"]
    assert dump["derived"]["chunk_size"] == chunk_size() == 64
    assert dump["derived"]["max_prefill_buffer_tokens"] == max_prefill_buffer_tokens() == 96
    assert dump["leaves"]["chunked_prefill_size"]["value"] == 64
