"""A configured attention backend resolved for one half on a host: the kernel it builds, and why that
kernel cannot serve there.

The factory refuses a choice before building it, and serve's launch rules refuse it before launch;
both ask here, so the effective name and the two refusals are worked out in one place. Both refusals
are answered, neither hiding the other: a rule that states one (runs on this host, batch-invariant)
reads only its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from attn_backends.choice.batch_invariance import batch_invariance_refusal
from attn_backends.choice.effective_names import effective_backend_name
from attn_backends.choice.host_support import refusal_on
from config_bags.server import AttentionHalf, AttentionKernelName


@dataclass(frozen=True)
class AttentionChoice:
    """`name` as configured for `half`, the kernel it builds, and that kernel's refusals (None: no refusal)."""

    name: str
    half: AttentionHalf
    kernel: AttentionKernelName
    host_refusal: str | None  # why the kernel cannot run on this host's device type (refusal_on)
    invariance_refusal: str | None  # for a batch-invariant runner, why the kernel is not batch-invariant

    @property
    def builds(self) -> str:
        """' (builds <kernel> for the <half> half)' where the name builds another kernel, else '': how a
        message about the configured name says what it became."""
        return "" if self.kernel == self.name else f" (builds {self.kernel} for the {self.half} half)"


def attention_choice(name: str, *, half: AttentionHalf, device_type: str, batch_invariant: bool) -> AttentionChoice:
    """What `name` builds for `half` on a `device_type` host, for a batch-invariant runner or not
    (`effective_backend_name`), with the kernel's refusal on that host (`refusal_on`) and, for a
    batch-invariant runner, its batch-invariance refusal (`batch_invariance_refusal`)."""
    kernel = effective_backend_name(name, half=half, device_type=device_type, batch_invariant=batch_invariant)
    invariance = batch_invariance_refusal(kernel) if batch_invariant else None
    return AttentionChoice(name, half, kernel, refusal_on(kernel, device_type), invariance)
