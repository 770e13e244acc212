"""How fast the census runs, next to plain `ast.parse` of the same files in the same run.

    uv run python tools/census/bench_census.py

Pinned to one core. Measures this repository (packages/, tools/, tests/) and a synthetic tree of
2,000 generated modules written like a serving engine (classes, methods, comprehensions,
f-strings; a quarter of them read the record through every shape the census follows).
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import textwrap
from pathlib import Path

from census import RecordNames, config_bags_schema
from census.stats import speed_of

ROOT = Path(__file__).resolve().parents[2]
MODULES = 2000
RECORD_SHARE = 0.25
LEAVES = ("page_size", "tp_size", "chunked_prefill_size", "max_running_requests", "attention_backend", "context_length")

PLAIN_METHOD = '''
    def step_{i}(self, batch, *, limit: int = {n}) -> list[int]:
        """Advance batch {i} and report the sizes."""
        sizes = [len(r.tokens) for r in batch.requests if r.active and len(r.tokens) < limit]
        total = sum(sizes) if sizes else 0
        for j, request in enumerate(batch.requests):
            if request.finished:
                self.done.append((j, request.rid, f"{{request.rid}}:{{total}}"))
            elif total > limit // 2:
                request.budget = max(1, request.budget - {n} % 7)
        return sizes
'''

RECORD_METHOD = """
    def configure_{i}(self, server_args) -> int:
        self.args = server_args
        sa = self.model_runner.server_args
        size = server_args.{a} + sa.{b}
        if getattr(server_args, "{c}", None):
            size += self.args.{d}
        return size
"""


def module_source(index: int, rng: random.Random) -> str:
    """One generated module: imports, a dataclass, a class of 8-12 methods, helpers."""
    reads = rng.random() < RECORD_SHARE
    methods = []
    for i in range(rng.randint(8, 12)):
        if reads and i % 4 == 0:
            a, b, c, d = (rng.choice(LEAVES) for _ in range(4))
            methods.append(RECORD_METHOD.format(i=i, a=a, b=b, c=c, d=d))
        else:
            methods.append(PLAIN_METHOD.format(i=i, n=rng.randint(2, 500)))
    head = textwrap.dedent(
        f'''\
        """Generated module {index}."""

        from __future__ import annotations

        import dataclasses
        from collections import deque


        @dataclasses.dataclass
        class Request{index}:
            rid: str
            tokens: list[int] = dataclasses.field(default_factory=list)
            budget: int = {rng.randint(1, 64)}
            active: bool = True
            finished: bool = False


        class Worker{index}:
            def __init__(self, model_runner) -> None:
                self.model_runner = model_runner
                self.done: deque[tuple[int, str, str]] = deque(maxlen=128)
        '''
    )
    tail = textwrap.dedent(
        f"""

        def summarize_{index}(workers: list[Worker{index}]) -> dict[str, int]:
            return {{w.__class__.__name__: len(w.done) for w in workers if w.done}}
        """
    )
    return head + "".join(methods) + tail


def synthetic_tree(folder: Path) -> Path:
    """Write MODULES generated modules (deterministic) under `folder`."""
    rng = random.Random(20261130)
    for index in range(MODULES):
        package = folder / f"pkg{index // 100:02d}"
        package.mkdir(exist_ok=True)
        (package / f"module_{index:04d}.py").write_text(module_source(index, rng))
    return folder


def main() -> None:
    """Print the figures for this repository and the synthetic tree."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    names, schema = RecordNames(), config_bags_schema()
    repo = [ROOT / "packages", ROOT / "tools", ROOT / "tests"]
    print(f"this repository: {speed_of(repo, names, schema, repeats=5).summary()}")
    with tempfile.TemporaryDirectory() as tmp:
        tree = synthetic_tree(Path(tmp))
        print(f"synthetic tree:  {speed_of([tree], names, schema, repeats=3).summary()}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
