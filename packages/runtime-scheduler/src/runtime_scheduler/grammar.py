"""Output constraints in the scheduler: what it needs from a grammar engine, and no engine itself.

A request whose sampling carries a `constraint` gets a matcher of its own from the `GrammarEngine`
when it is queued. The engine compiles off the scheduler's thread; until the matcher is ready the
request waits in the queue while others are admitted past it (a grammar that failed to compile
fails its request alone). Once admitted, its matcher goes to the executor with every batch (the
runner masks the request's logits with the tokens the matcher allows next) and is told every
token the request keeps. A matcher that has terminated (its grammar is complete and the stop
token was taken) finishes the request with reason "stop". A constrained request is offered no
drafts: it decodes plainly while the others speculate.

The protocols are the shape of xgrammar's `GrammarMatcher`, which fits them structurally; this
package imports no engine.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Protocol

import msgspec

from runtime_scheduler.request import OutputConstraint


class TokenGrammar(Protocol):
    """One request's matcher: which tokens may come next, and the tokens the request took."""

    # The scheduler never calls this: it carries the matcher to the runner, whose TokenGrammar reads it.
    def fill_next_token_bitmask(self, bitmask: Any, index: int) -> bool:
        """Write the allowed next tokens into row `index` of `bitmask` (int32 [rows, ceil(vocab / 32)],
        bit t % 32 of word t // 32 set when token t is allowed)."""
        ...

    def accept_token(self, token_id: int) -> bool:
        """Advance past `token_id`; False (and no change) when the grammar does not allow it."""
        ...

    def is_terminated(self) -> bool:
        """Whether the grammar is complete and its stop token was taken."""
        ...


class GrammarCounts(msgspec.Struct, frozen=True, kw_only=True):
    """A grammar engine's totals since it was built."""

    compiles: int = 0  # grammars compiled (cache misses)
    cache_hits: int = 0  # matchers built from an already compiled grammar
    compile_seconds: float = 0.0  # time spent compiling, in total


class GrammarEngine(Protocol):
    """Compiles output constraints (cached) and hands each request a matcher of its own."""

    def matcher_for(self, constraint: OutputConstraint) -> Future[TokenGrammar]:
        """A new matcher for `constraint`, once its grammar has compiled; the future raises
        ValueError with the engine's message when the constraint does not compile."""
        ...

    def counts(self) -> GrammarCounts:
        """Compiles, cache hits and compile time so far."""
        ...
