"""The names the server's child processes go by: in /server_info, in readiness and override
acknowledgements, and in the line that says which one died."""

from __future__ import annotations

from config_bags.server import get_parallel

DETOKENIZER = "detokenizer"


def scheduler_name(replica: int, rank: int) -> str:
    """ "scheduler" when the server runs one scheduler process, else "scheduler.dp{replica}.tp{rank}"
    (data-parallel replica, tensor-parallel rank)."""
    parallel = get_parallel()
    if parallel.dp_size == parallel.tp_size == 1:
        return "scheduler"
    return f"scheduler.dp{replica}.tp{rank}"


def child_process_names() -> tuple[str, ...]:
    """Every child process of the server on every node, each of which reports ready and
    acknowledges every override: each replica's scheduler ranks, then the detokenizer."""
    parallel = get_parallel()
    ranks = (scheduler_name(replica, rank) for replica in range(parallel.dp_size) for rank in range(parallel.tp_size))
    return (*ranks, DETOKENIZER)
