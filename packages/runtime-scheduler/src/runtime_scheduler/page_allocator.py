"""Free-page bookkeeping over the KV pool's slots. Only indices live here; the runner owns the
tensors. Page `p` holds slots `[p * page_size, (p + 1) * page_size)`. The same bookkeeping counts
a hybrid model's recurrent-state slots (one per running request)."""

from __future__ import annotations

from collections.abc import Iterable


class PageAllocator:
    """A pool of `num_pages` indices (KV pages, or `what` the pool holds); `alloc` hands out free
    ones, `free` takes them back."""

    def __init__(self, num_pages: int, what: str = "KV pages") -> None:
        if num_pages < 1:
            raise ValueError(f"a pool of {what} needs at least one, got {num_pages}; accepted: an int >= 1")
        self.num_pages = num_pages
        self.what = what
        # Reversed so that pages are handed out in ascending order from a fresh pool (readable traces).
        self._free: list[int] = list(range(num_pages - 1, -1, -1))

    @property
    def free_count(self) -> int:
        """How many pages are free."""
        return len(self._free)

    def alloc(self, count: int) -> list[int]:
        """`count` free pages, now owned by the caller. Raises MemoryError when fewer are free."""
        free = self._free
        if count > len(free):
            raise MemoryError(f"asked for {count} {self.what} but only {len(free)} are free")
        if count == 0:
            return []
        taken = free[-count:]
        del free[-count:]
        taken.reverse()
        return taken

    def free(self, pages: Iterable[int]) -> None:
        """Give `pages` back to the pool."""
        self._free.extend(pages)

    def free_pages(self) -> list[int]:
        """A copy of the free pages (for audits)."""
        return list(self._free)
