"""Output constraints compiled by xgrammar: the scheduler's `GrammarEngine`.

The tokenizer's vocabulary is read once (`TokenizerInfo`, at the model's logit width, with the
model's end tokens as the grammar's stop tokens), on the engine's thread as it starts: a server
starts as fast without it, and a checkpoint without a tokenizer fails only its constrained
requests. Grammars compile on that one worker thread, so
neither the event loop nor the scheduler's step waits for them; a compiled grammar is kept by its
constraint (kind and text: the canonical form the API writes), least recently used first out, and
each request gets a matcher of its own from it. JSON schemas compile with the whitespace a model
writes (pretty JSON: a newline and an indent before each member) but at most
`JSON_WHITESPACE_RUN` characters of it in a row: forced onto one-line JSON a model leaves its own
path (the default model, kept from the `{\n    "name"` it writes, filled its budget inside one
key), and with no bound a small model can fill its budget with newlines. A structural tag (tool
calls under tool_choice "auto") holds its JSON parts to the same bound.

With `synchronous`, a grammar compiles in the caller's thread before `matcher_for` returns: the
ranks of a tensor-parallel replica each run a twin scheduler, and their admissions agree only if
no rank sees a grammar ready before another does.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import xgrammar as xgr

from runtime_scheduler import GrammarCounts, OutputConstraint, TokenGrammar

CACHED_GRAMMARS = 256  # compiled grammars kept; a typical JSON schema's is well under a megabyte
# Whitespace characters allowed in a row between JSON tokens: a newline and an indent four levels
# deep at four spaces (docs/benchmarks.md has what this kept of the default model's answers).
JSON_WHITESPACE_RUN = 20
_SOURCE_PREFIX = re.compile(r"^\s*\[[\d:.]+\]\s+\S+:\d+:\s*")


def grammar_of(constraint: OutputConstraint) -> xgr.Grammar:
    """The constraint as an xgrammar `Grammar` (no tokenizer needed: what the API checks before it
    queues a request). Raises ValueError with the compiler's own message."""
    try:
        if constraint.kind == "json_schema":
            return xgr.Grammar.from_json_schema(
                constraint.text, any_whitespace=True, max_whitespace_cnt=JSON_WHITESPACE_RUN
            )
        if constraint.kind == "structural_tag":
            return xgr.Grammar.from_structural_tag(constraint.text)
        if constraint.kind == "regex":
            return xgr.Grammar.from_regex(constraint.text)
        return xgr.Grammar.from_ebnf(constraint.text)
    except RuntimeError as err:  # xgrammar's own errors (an invalid structural tag's too) are RuntimeErrors
        raise ValueError(compiler_message(err)) from None


def compiler_message(err: BaseException) -> str:
    """xgrammar's message without the time stamp and C++ source location it starts with."""
    return _SOURCE_PREFIX.sub("", str(err)).strip()


class XGrammarEngine:
    """Compiles constraints for one model's vocabulary and hands out a matcher per request."""

    def __init__(self, tokenizer_info: Callable[[], xgr.TokenizerInfo], *, synchronous: bool) -> None:
        self._synchronous = synchronous
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="grammar")
        self._compiler = self._pool.submit(
            lambda: xgr.GrammarCompiler(tokenizer_info(), max_threads=1, cache_enabled=False)
        )
        self._compiled: OrderedDict[OutputConstraint, Future[xgr.CompiledGrammar]] = OrderedDict()
        self._lock = threading.Lock()  # the counts are written on the compile thread and read on the scheduler's
        self._compiles = 0
        self._hits = 0
        self._seconds = 0.0

    def matcher_for(self, constraint: OutputConstraint) -> Future[TokenGrammar]:
        """A new matcher for `constraint` once its grammar compiled (at once when cached)."""
        compiled = self._compiled.get(constraint)
        if compiled is None:
            compiled = self._pool.submit(self._compile, constraint)
            self._compiled[constraint] = compiled
            while len(self._compiled) > CACHED_GRAMMARS:
                self._compiled.popitem(last=False)
        else:
            self._compiled.move_to_end(constraint)
            with self._lock:
                self._hits += 1
        if self._synchronous:
            compiled.exception()  # waits
        matcher: Future[TokenGrammar] = Future()
        compiled.add_done_callback(lambda done: _resolve(matcher, done))
        return matcher

    def _compile(self, constraint: OutputConstraint) -> xgr.CompiledGrammar:
        start = time.perf_counter()
        try:
            grammar = grammar_of(constraint)
            try:
                return self._compiler.result().compile_grammar(grammar)
            except RuntimeError as err:
                raise ValueError(compiler_message(err)) from None
        finally:
            with self._lock:
                self._compiles += 1
                self._seconds += time.perf_counter() - start

    def counts(self) -> GrammarCounts:
        """Compiles, cache hits and compile time so far."""
        with self._lock:
            return GrammarCounts(compiles=self._compiles, cache_hits=self._hits, compile_seconds=self._seconds)


def tokenizer_info_of(tokenizer: Any, vocab_size: int, stop_token_ids: Sequence[int]) -> xgr.TokenizerInfo:
    """xgrammar's view of a Hugging Face tokenizer for logits `vocab_size` wide, ending at `stop_token_ids`."""
    return xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=list(stop_token_ids))


def _resolve(matcher: Future[TokenGrammar], compiled: Future[xgr.CompiledGrammar]) -> None:
    error = compiled.exception()
    if error is not None:
        matcher.set_exception(error)
    else:
        matcher.set_result(xgr.GrammarMatcher(compiled.result()))
