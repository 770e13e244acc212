"""The tokenizer worker, a real process over a real (tiny, trained) tokenizer: it answers what the
tokenizer answers in this process, leaves the event loop free where a thread would not, turns a
chat template's refusal into the client's 400, and is replaced when it dies."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from config_bags import publish, unpublish
from config_bags.server import Bags, ModelBag
from serve.http.chat_run import rendered_prompt
from serve.http.errors import APIError
from serve.http.protocol import ChatMessage
from serve.tokenizer.chat_template import chat_prompt_ids
from serve.tokenizer.worker import TokenizerWorker, TokenizerWorkerDiedError
from serve_testing.tiny_checkpoint import CHAT_TEMPLATE, build_tokenizer

pytestmark = pytest.mark.timeout(300)

# Refuses a conversation that opens with an assistant turn, as many real templates refuse roles
# out of order.
REFUSING_TEMPLATE = (
    "{% if messages[0]['role'] == 'assistant' %}"
    "{{ raise_exception('a conversation must not open with an assistant turn') }}{% endif %}" + CHAT_TEMPLATE
)
TEXT = "The quick brown fox jumps over the lazy dog. Héllo wörld, 東京 😀 "


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tokenizer")
    build_tokenizer(folder)
    (folder / "chat_template.jinja").write_text(REFUSING_TEMPLATE)
    return folder


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_dir)


def wait_up(worker: TokenizerWorker, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while worker.state() is not None:
        assert time.monotonic() < deadline, worker.state()
        time.sleep(0.05)


@pytest.fixture(scope="module")
def worker(tokenizer_dir: Path) -> Iterator[TokenizerWorker]:
    # The worker reads the model bag each time it starts (a restart too), so it stays published.
    publish(Bags(model=ModelBag(model_path=str(tokenizer_dir))), role="launcher")
    running = TokenizerWorker()
    try:
        wait_up(running)
        yield running
    finally:
        running.close()
        unpublish()


def test_worker_answers_what_the_tokenizer_answers(worker: TokenizerWorker, tokenizer: Any) -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": TEXT}]

    async def asked() -> tuple[Any, ...]:
        return (
            await worker.encode([TEXT, "a"]),
            await worker.encode([TEXT], add_special_tokens=False),
            await worker.chat_prompt(messages),
            await worker.decode(tokenizer.encode(TEXT)),
        )

    encoded, plain, chat, decoded = asyncio.run(asked())
    assert [list(ids) for ids in encoded] == [tokenizer.encode(TEXT), tokenizer.encode("a")]
    assert list(plain[0]) == tokenizer.encode(TEXT, add_special_tokens=False)
    assert list(chat) == chat_prompt_ids(tokenizer, messages)
    assert decoded == tokenizer.decode(tokenizer.encode(TEXT)) == TEXT


def longest_stall(work: Callable[[], Awaitable[Any]]) -> tuple[float, int]:
    """The longest gap (seconds) between ticks of a 5 ms ticker on the event loop while `work`
    runs, and how many ticks it made."""

    async def measured() -> tuple[float, int]:
        task = asyncio.ensure_future(work())
        worst, ticks, last = 0.0, 0, time.monotonic()
        while not task.done():
            await asyncio.sleep(0.005)
            now = time.monotonic()
            worst, ticks, last = max(worst, now - last), ticks + 1, now
        await task
        return worst, ticks

    return asyncio.run(measured())


def test_the_event_loop_runs_while_the_worker_decodes(worker: TokenizerWorker, tokenizer: Any) -> None:
    """Decoding 1.28 million ids takes longer than a stall may last; while the worker decodes them
    the loop keeps ticking (no stall reaches 100 ms, or a third of the decode's own time when a
    loaded machine slows both: a CI run once measured a 0.19 s stall): the reason the worker is a
    process.

    Reverse-verified by hand: the same decode run in a thread (`asyncio.to_thread`) held the GIL
    and stalled the loop for 0.2-0.45 s of a 0.46 s decode, so a worker that ran its calls in a
    thread fails here (each of those stalls exceeds a third of the decode). That comparison is not
    asserted: how long a thread holds the GIL varies with the machine's load, and a test must not
    depend on it.

    The text doubles until decoding it alone takes over 0.3 s: a fast CPU decoded the first 1.28
    million ids in 0.198 s, too short to tell a stall from none."""
    repeats = 40_000
    while True:
        ids = tokenizer.encode(TEXT * repeats)
        started = time.monotonic()
        tokenizer.decode(ids)
        alone = time.monotonic() - started
        if alone > 0.3 or repeats >= 640_000:
            break
        repeats *= 2
    assert alone > 0.2, f"the decode of {len(ids)} ids took {alone:.2f} s, too short to tell a stall from none"

    in_worker, ticks = longest_stall(lambda: worker.decode(ids))
    assert in_worker < max(0.1, alone / 3) and ticks >= 10, (in_worker, alone, ticks)


def test_a_template_that_refuses_the_messages_is_the_clients_400(worker: TokenizerWorker) -> None:
    """Reverse-verified: without the TemplateError clause in `rendered_prompt`, the template's
    refusal escaped as a TemplateError (a 500 from the server)."""
    with pytest.raises(APIError) as refused:
        asyncio.run(rendered_prompt(worker, [ChatMessage(role="assistant", content="hi")]))
    assert refused.value.status == 400 and refused.value.param == "messages"
    assert "must not open with an assistant turn" in refused.value.message


def test_a_dead_worker_is_replaced(worker: TokenizerWorker, tokenizer: Any) -> None:
    """A worker killed under a call fails that call (TokenizerWorkerDiedError, the client's 503)
    and a new one starts at once (/health says so); one killed between calls costs no call.

    Reverse-verified: without the restart in `_call`, the state stayed None (a healthy /health
    over a dead worker); without the one in `_submit`, the call after an idle death raised
    BrokenProcessPool."""
    first = worker.pid
    assert first is not None

    async def killed_under_a_call() -> None:
        call = asyncio.ensure_future(worker.encode([TEXT * 20_000]))
        await asyncio.sleep(0.2)
        os.kill(first, signal.SIGKILL)
        await call

    with pytest.raises(TokenizerWorkerDiedError, match="died while serving this request"):
        asyncio.run(killed_under_a_call())
    assert worker.state() == "starting: the tokenizer worker is loading"
    assert asyncio.run(worker.encode(["a"]))[0].tolist() == tokenizer.encode("a")
    second = worker.pid
    assert second is not None and second != first

    os.kill(second, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{second}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert asyncio.run(worker.encode(["a"]))[0].tolist() == tokenizer.encode("a")
    assert worker.pid not in (None, first, second)
