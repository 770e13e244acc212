"""Tokenizing off the event loop: the served tokenizer in a worker process.

A thread is not enough: Hugging Face tokenizers hold the GIL through `decode` and through building
the Python lists of a long encoding. Measured on a 4.5 MB prompt, a thread beside the event loop
stalled the loop for up to 185 ms while encoding and 785 ms while decoding; in a process, the
loop only unpickles the ids, packed as an `array` (a few ms for two million ids). The round trip
costs about half a millisecond when the loop is idle, a few milliseconds when it is busy.

The worker loads the tokenizer from the model bag when it starts and reads no configuration after
that; it publishes no bags, so it has no config hash to agree on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from array import array
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from typing import Any, TypeVar

from config_bags.server import get_model
from serve.child_process import die_with_parent
from serve.tokenizer.chat_template import chat_prompt_ids, chat_template_text
from serve.tokenizer.loading import tokenizer_dir

T = TypeVar("T")

# The worker process's tokenizer, loaded by `_load` (a pool's initializer can only leave state
# in its module).
_tokenizer: Any = None


class TokenizerWorkerDiedError(RuntimeError):
    """The worker process died under a call (a new one is starting); answered with a 503."""


def _load(path: str, trust_remote_code: bool) -> None:
    """In the worker: die with the server, leave Ctrl-C to the server, load the tokenizer."""
    global _tokenizer
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server shuts the pool down as it stops
    from transformers import AutoTokenizer

    _tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)


def _pid() -> int:
    return os.getpid()


def _encode(texts: Sequence[str], add_special_tokens: bool) -> list[array[int]]:
    return [array("q", _tokenizer.encode(text, add_special_tokens=add_special_tokens)) for text in texts]


def _encode_pairs(first: str, seconds: Sequence[str]) -> list[tuple[array[int], array[int]]]:
    pairs = []
    for second in seconds:
        encoded = _tokenizer(first, second)
        types = encoded.get("token_type_ids") or [0] * len(encoded["input_ids"])
        pairs.append((array("q", encoded["input_ids"]), array("q", types)))
    return pairs


def _chat(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> array[int]:
    return array("q", chat_prompt_ids(_tokenizer, messages, tools))


def _template_text() -> str | None:
    return chat_template_text(_tokenizer)


def _decode(ids: array[int]) -> str:
    return str(_tokenizer.decode(ids.tolist()))


class TokenizerWorker:
    """The served tokenizer in one worker process; calls queue in arrival order and are awaited
    without holding the event loop. A worker that dies is replaced at once; the calls it was
    serving raise `TokenizerWorkerDiedError`."""

    def __init__(self) -> None:
        self._pool, self._started = self._start()
        self._template: tuple[str | None] | None = None  # the checkpoint's, once asked

    @staticmethod
    def _start() -> tuple[ProcessPoolExecutor, Future[int]]:
        model = get_model()
        pool = ProcessPoolExecutor(
            1, mp_context=get_context("spawn"), initializer=_load, initargs=(tokenizer_dir(), model.trust_remote_code)
        )
        return pool, pool.submit(_pid)  # starts the worker now rather than on the first request

    def _restart(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool, self._started = self._start()

    def state(self) -> str | None:
        """None once the worker is up; else why not ("starting", or how it failed to start)."""
        if not self._started.done():
            return "starting: the tokenizer worker is loading"
        error = self._started.exception()
        return None if error is None else f"the tokenizer worker failed to start: {error!r}"

    async def started(self) -> None:
        """Wait until the worker has loaded its tokenizer (raising what its start raised)."""
        await asyncio.wrap_future(self._started)

    @property
    def pid(self) -> int | None:
        """The worker process's id, once it is up."""
        if not self._started.done() or self._started.exception() is not None:
            return None
        return self._started.result()

    def _submit(self, fn: Callable[..., T], *args: Any) -> tuple[ProcessPoolExecutor, Future[T]]:
        try:
            return self._pool, self._pool.submit(fn, *args)
        except BrokenProcessPool:  # the worker died between calls: this one never ran, so it waits for the next
            self._restart()
            return self._pool, self._pool.submit(fn, *args)

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        pool, future = self._submit(fn, *args)
        try:
            return await asyncio.wrap_future(future)
        except BrokenProcessPool:
            if self._pool is pool:
                self._restart()
            raise TokenizerWorkerDiedError(
                "the tokenizer worker process died while serving this request; a new one is starting"
            ) from None

    async def encode(self, texts: Sequence[str], *, add_special_tokens: bool = True) -> list[array[int]]:
        """The token ids of each text."""
        return await self._call(_encode, list(texts), add_special_tokens)

    async def encode_pairs(self, first: str, seconds: Sequence[str]) -> list[tuple[array[int], array[int]]]:
        """The token ids and token types (segment 0, then 1) of `first` paired with each of `seconds`,
        as the tokenizer joins a pair ([CLS] first [SEP] second [SEP] for BERT)."""
        return await self._call(_encode_pairs, first, list(seconds))

    async def chat_prompt(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] = ()
    ) -> array[int]:
        """The prompt ids of a conversation (plain data: dicts, lists, strings) rendered through
        the chat template with the tools offered (raises NoChatTemplateError when the tokenizer
        has none)."""
        return await self._call(_chat, list(messages), list(tools))

    async def chat_template(self) -> str | None:
        """The chat template's text (the one tools are rendered through), None when there is none.
        Asked of the worker once: it comes from the checkpoint, which does not change (two
        requests arriving first may both ask)."""
        if self._template is None:
            self._template = (await self._call(_template_text),)
        return self._template[0]

    async def decode(self, ids: Sequence[int]) -> str:
        """The text of token ids."""
        return await self._call(_decode, array("q", ids))

    def close(self) -> None:
        """Stop the worker now: calls still queued are cancelled and its process is terminated.

        It holds nothing to save, and waiting for it to tear down its interpreter (transformers
        and torch loaded) held a stopping server for 1.5 s on a busy 2-core machine."""
        pid = self.pid
        self._pool.shutdown(wait=False, cancel_futures=True)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
