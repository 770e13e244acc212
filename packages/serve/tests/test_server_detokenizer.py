"""The detokenizer's pieces with a real (tiny, offline-trained byte-level) tokenizer: incremental
text, stop strings held back and matched across tokens, and the stream interval."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import config_bags
from config_bags.server import Bags, ServingBag
from runtime_scheduler import Request
from serve.detokenizer.incremental import INCOMPLETE, IncrementalText
from serve.detokenizer.request_text import RequestText
from serve.detokenizer.stop_strings import StopMatch
from serve.ipc.messages import GenerateRequest, TokenDelta
from serve_testing.tiny_checkpoint import build_tokenizer

TEXT = "Héllo wörld, 東京 😀 naïve café. The quick brown fox."


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from transformers import AutoTokenizer

    folder: Path = tmp_path_factory.mktemp("tok")
    build_tokenizer(folder)
    return AutoTokenizer.from_pretrained(folder)


@pytest.fixture
def published() -> Iterator[None]:
    config_bags.publish(Bags(serving=ServingBag(stream_interval=1)), role="detokenizer")
    yield
    config_bags.unpublish()


def test_incremental_text_never_releases_half_a_character(tokenizer: Any) -> None:
    """Reverse-verified: without the hold on a trailing U+FFFD, pieces of 東京 and 😀 came out as
    replacement characters and the joined text differed from the whole decode."""
    ids = tokenizer.encode(TEXT)
    assert len(ids) > len(TEXT.split())  # multi-byte characters span several tokens
    text = IncrementalText(tokenizer, skip_special_tokens=True)
    pieces = [text.push([token]) for token in ids]
    pieces.append(text.flush())
    assert "".join(pieces) == tokenizer.decode(ids) == TEXT
    assert not any(INCOMPLETE in piece for piece in pieces)


def test_flush_releases_an_unfinished_character(tokenizer: Any) -> None:
    ids = tokenizer.encode("😀")
    text = IncrementalText(tokenizer, skip_special_tokens=True)
    held = "".join(text.push([token]) for token in ids[:-1])
    assert held == "" and text.flush() != ""


def test_stop_match_finds_earliest_and_holds_prefixes() -> None:
    stops = StopMatch(["world", "lo w", ""])
    assert stops.first_match("hello world", 0) == (3, "lo w")
    assert stops.first_match("hello world", 4) == (6, "world")
    assert stops.first_match("hello", 0) is None
    assert stops.safe_end("hello wor") == len("hello ")  # "wor" may begin "world"
    assert stops.safe_end("hello") == len("hel")  # "lo" may begin "lo w"
    assert StopMatch([]).safe_end("anything") == len("anything")


def _request(tokenizer: Any, stops: tuple[str, ...]) -> GenerateRequest:
    return GenerateRequest(request=Request(rid="r", prompt_ids=(1,)), stop_strings=stops)


def test_stop_string_across_tokens_is_never_streamed(tokenizer: Any, published: None) -> None:
    """Text that might begin a stop string is held until it cannot; a match ends the request
    with the text before it. Reverse-verified: with safe_end returning the whole text, "The qu"
    reached the client before the stop matched."""
    ids = tokenizer.encode(TEXT)
    state = RequestText(tokenizer, _request(tokenizer, ("quick",)))
    streamed, stopped = "", False
    for token in ids:
        out, stopped = state.advance(TokenDelta(rid="r", new_ids=(token,)))
        if out is not None:
            streamed += out.text
            assert "qu" not in streamed
        if stopped:
            assert out is not None and out.finish == "stop" and out.matched_stop == "quick"
            break
    assert stopped and streamed == TEXT[: TEXT.index("quick")]


def test_finish_flushes_and_counts_tokens(tokenizer: Any, published: None) -> None:
    ids = tokenizer.encode("naïve café")
    state = RequestText(tokenizer, _request(tokenizer, ()))
    outputs = [state.advance(TokenDelta(rid="r", new_ids=(t,), prompt_tokens=1)) for t in ids[:-1]]
    last, stopped = state.advance(TokenDelta(rid="r", new_ids=(ids[-1],), finish="length", prompt_tokens=1))
    assert not stopped and last is not None and last.finish == "length" and last.completion_tokens == len(ids)
    assert "".join(o.text for o, _ in outputs if o is not None) + last.text == "naïve café"


def test_stream_interval_batches_tokens(tokenizer: Any) -> None:
    """serving.stream_interval is read at each step, so an override changes the chunking at once."""
    config_bags.publish(Bags(serving=ServingBag(stream_interval=3)), role="detokenizer")
    try:
        ids = tokenizer.encode("The quick brown fox jumps over the lazy dog.")[:9]
        state = RequestText(tokenizer, _request(tokenizer, ()))
        sizes = [
            len(out.new_ids) for out, _ in (state.advance(TokenDelta(rid="r", new_ids=(t,))) for t in ids[:6]) if out
        ]
        assert sizes == [3, 3]
        config_bags.override("test", stream_interval=1)
        sizes = [
            len(out.new_ids) for out, _ in (state.advance(TokenDelta(rid="r", new_ids=(t,))) for t in ids[6:]) if out
        ]
        assert sizes == [1, 1, 1]
    finally:
        config_bags.unpublish()
