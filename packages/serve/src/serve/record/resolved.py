"""`ResolvedArgs`: the sealed record after resolution, what the launcher takes.

It projects into the `Bags` every process publishes, tells each leaf's provenance (including
overrides applied after publish), and dumps itself as JSON for --dump-config and /server_info
(whose hash and derived values are those of the published bags, so they follow an override).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from config_bags import (
    dumped_leaves,
    explained_lines,
    hash_of,
    is_published,
    leaf_specs,
    leaf_value_of,
    overrides_log,
    published_root_unchecked,
)
from config_bags.server import (
    Bags,
    attention_backends_of,
    chunk_size_of,
    cuda_graph_decode_bs_of,
    linear_attn_backends_of,
    mamba_cache_slots_of,
    max_prefill_buffer_tokens_of,
    max_speculative_num_draft_tokens_of,
)
from serve.record.provenance import overridden_by
from serve.record.server_args import ServerArgs
from serve.served_model import ServedModel
from serve.visible_device import visible_device_type

if TYPE_CHECKING:
    from serve.record.resolution import Declaration


@dataclass(frozen=True)
class ResolvedArgs:
    """A sealed `ServerArgs`, the declarations that resolved it, and the served model's shape
    (what `launch_rules` needs in every process)."""

    server_args: ServerArgs
    declarations: tuple[Declaration, ...]
    served_model: ServedModel

    def bags(self) -> Bags:
        """The bags this launch publishes."""
        return self.server_args.bags()

    def _overridden(self) -> dict[str, str]:
        """Leaf -> source of the latest post-publish override of it in this process."""
        if not is_published():
            return {}
        return {change.leaf: entry.source for entry in overrides_log() for change in entry.changes}

    def provenance(self) -> dict[str, str]:
        """Leaf -> default | file | env | cli | resolved:<handler> | override:<source>."""
        provenance = self.server_args.provenance()
        for name, source in self._overridden().items():
            provenance[name] = overridden_by(source)
        return provenance

    def value(self, name: str) -> Any:
        """One leaf's current value: the published one after an override, else the resolved one."""
        if name in self._overridden():  # shown whole (/server_info), whatever the role reads
            return leaf_value_of(published_root_unchecked(Bags), name)
        return self.server_args.value(name)

    def live_bags(self) -> Bags:
        """The bags in force: the published ones (overrides included) once this process published,
        else the resolved ones (--dump-config)."""
        return published_root_unchecked(Bags) if is_published() else self.bags()

    def dump(self) -> dict[str, Any]:
        """JSON-able: every leaf's bag, value, provenance and origin (config-bags' dump of a
        root); the derived values and the hash of the bags in force (`live_bags`); the handlers'
        declarations."""
        names = leaf_specs(Bags)
        values = {name: self.value(name) for name in names}
        origins = {name: self.server_args.origin_of(name) for name in names}
        bags = self.live_bags()
        return {
            "config_hash": hash_of(bags),
            "leaves": dumped_leaves(Bags, values, self.provenance(), origins),
            "derived": derived_values(bags),
            "resolution": msgspec.to_builtins(list(self.declarations)),
        }

    def explain(self, name: str) -> str:
        """A few lines on one leaf: config-bags' lines on its value and where it came from, then
        why the resolution handlers set it or not, and what it derives to."""
        lines = explained_lines(Bags, name, self.value(name), self.provenance()[name], self.server_args.origin_of(name))
        for d in self.declarations:
            if d.leaf == name:
                lines.append(f"  {d.handler}: {'set' if d.applied else 'did not set'} {d.value!r} ({d.note}): {d.why}")
        derived = DERIVED_FROM_LEAF.get(name)
        if derived is not None:
            lines.append(f"  derived: {derived} = {derived_values(self.bags())[derived]!r}")
        return "\n".join(lines)


# A leaf whose unset value stands for a derived one: --explain shows what it derives to.
DERIVED_FROM_LEAF = {"max_mamba_cache_size": "mamba_cache_slots"}


def derived_values(bags: Bags) -> dict[str, Any]:
    """Every derived value of `bags`, through the helpers the accessors and the record's derived
    members call."""
    return {
        "attention_backends": attention_backends_of(bags.exec.kernel)._asdict(),
        "linear_attn_backends": linear_attn_backends_on_host(bags),
        "max_prefill_buffer_tokens": max_prefill_buffer_tokens_of(bags.schedule, bags.parallel),
        "max_speculative_num_draft_tokens": max_speculative_num_draft_tokens_of(bags.spec),
        "mamba_cache_slots": mamba_cache_slots_of(bags.exec.mamba, bags.schedule),
        "cuda_graph_decode_bs": list(cuda_graph_decode_bs_of(bags.exec.graph)),
        "chunk_size": chunk_size_of(bags.schedule),
    }


def linear_attn_backends_on_host(bags: Bags) -> dict[str, Any]:
    """The linear-attention kernels as configured (None: the device's) beside those a runner on
    this host's device runs, so a reader does not take one for the other."""
    kernel = bags.exec.kernel
    device_type = visible_device_type(bags) or bags.device.device
    return {
        "configured": {
            "base": kernel.linear_attn_backend,
            "prefill": kernel.linear_attn_prefill_backend,
            "decode": kernel.linear_attn_decode_backend,
        },
        "device_type": device_type,
        "effective": linear_attn_backends_of(kernel, device_type)._asdict(),
    }


def project(resolved: ResolvedArgs) -> Bags:
    """The bags a resolved launch publishes (the same as `resolved.bags()`)."""
    return resolved.bags()
