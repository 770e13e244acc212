"""Benchmark of the config read path, overrides and the wire, side by side in one run.

    uv run python tools/bench_config.py

Prints ns per `get_schedule().page_size` read next to ns per plain `self.page_size` read (and
their ratio), µs per override, and µs per encode+decode of all bags. Each figure is the best of
several repeats, which is the least noisy estimate on a shared machine.
"""

from __future__ import annotations

import argparse
import timeit
from collections.abc import Callable

import config_bags
import config_bags.server
from config_bags.server import Bags, get_schedule


class Consumer:
    """A consumer as code is written today: one keeps a copy, the other asks at use."""

    def __init__(self) -> None:
        self.page_size = 1

    def read_copy(self, n: int) -> None:
        for _ in range(n):
            _ = self.page_size  # the timed read

    def read_accessor(self, n: int) -> None:
        for _ in range(n):
            _ = get_schedule().page_size  # the timed read

    def loop_only(self, n: int) -> None:
        for _ in range(n):
            pass


def best_seconds(fn: Callable[[], object], number: int, repeat: int) -> float:
    """The fastest of `repeat` timings of `number` calls, per call."""
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7, help="repeats per figure (best is reported)")
    args = parser.parse_args()

    config_bags.publish(Bags(), role="standalone")
    consumer = Consumer()
    reads = 100_000
    loop = best_seconds(lambda: consumer.loop_only(reads), 5, args.repeat) / reads
    plain = best_seconds(lambda: consumer.read_copy(reads), 5, args.repeat) / reads
    accessor = best_seconds(lambda: consumer.read_accessor(reads), 5, args.repeat) / reads

    flip = [4, 256]
    state = {"i": 0}

    def one_override() -> None:
        state["i"] ^= 1
        config_bags.override("bench", max_running_requests=flip[state["i"]])

    override_s = best_seconds(one_override, 2_000, args.repeat)
    bags = config_bags.server.published_bags()
    wire_s = best_seconds(
        lambda: config_bags.decode(config_bags.encode(bags), config_bags.server.Bags), 10_000, args.repeat
    )
    size = len(config_bags.encode(bags))

    print(f"{'figure':46s} {'value':>10s}")
    print(f"{'plain self.page_size read (ns)':46s} {plain * 1e9:10.1f}")
    print(f"{'get_schedule().page_size read (ns)':46s} {accessor * 1e9:10.1f}")
    print(f"{'ratio accessor / plain':46s} {accessor / plain:10.2f}")
    print(f"{'empty loop iteration, in both figures (ns)':46s} {loop * 1e9:10.1f}")
    print(f"{'accessor cost above the plain read (ns)':46s} {(accessor - plain) * 1e9:10.1f}")
    print(f"{'override of one leaf (us)':46s} {override_s * 1e6:10.2f}")
    print(f"{f'encode+decode of all bags, {size} bytes (us)':46s} {wire_s * 1e6:10.2f}")
    print(f"{'leaves':46s} {len(config_bags.leaf_specs(config_bags.server.Bags)):10d}")


if __name__ == "__main__":
    main()
