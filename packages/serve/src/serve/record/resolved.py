"""`ResolvedArgs`: the sealed record after resolution, what the launcher takes.

It projects into the `Bags` every process publishes, tells each leaf's provenance (including
overrides applied after publish), and dumps itself as JSON for --dump-config and /server_info.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec
from config_bags import Bags, hash_of, is_published, leaf_spec, leaf_specs, leaf_value, overrides_log

from serve.record.provenance import overridden_by
from serve.record.server_args import ServerArgs

if TYPE_CHECKING:
    from serve.record.resolution import Declaration


@dataclass(frozen=True)
class ResolvedArgs:
    """A sealed `ServerArgs` and the declarations that resolved it."""

    server_args: ServerArgs
    declarations: tuple[Declaration, ...]

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
        if name in self._overridden():
            return leaf_value(name)
        return self.server_args.value(name)

    def dump(self) -> dict[str, Any]:
        """JSON-able: every leaf's bag, value, provenance and origin; the derived values; the
        handlers' declarations; the hash of the resolved bags."""
        provenance = self.provenance()
        leaves = {
            name: {
                "bag": spec.namespace,
                "value": msgspec.to_builtins(self.value(name)),
                "provenance": provenance[name],
                "origin": self.server_args.origin_of(name),
            }
            for name, spec in leaf_specs().items()
        }
        args = self.server_args
        derived = {
            "attention_backends": args.attention_backends._asdict(),
            "linear_attn_backends": args.linear_attn_backends._asdict(),
            "max_prefill_buffer_tokens": args.max_prefill_buffer_tokens,
            "max_speculative_num_draft_tokens": args.max_speculative_num_draft_tokens,
            "cuda_graph_decode_bs": list(args.effective_cuda_graph_decode_bs),
            "chunk_size": args.chunk_size,
        }
        return {
            "config_hash": hash_of(self.bags()),
            "leaves": leaves,
            "derived": derived,
            "resolution": msgspec.to_builtins(list(self.declarations)),
        }

    def explain(self, name: str) -> str:
        """A few lines on one leaf: its value, where it came from and why."""
        spec = leaf_spec(name)
        provenance = self.provenance()[name]
        lines = [
            f"{name} = {self.value(name)!r}",
            f"  provenance: {provenance}",
            f"  origin: {self.server_args.origin_of(name) or '-'}",
            f"  bag: {spec.namespace} ({'hot' if spec.hot else 'cold'}); default {spec.default!r}; accepted: {spec.accepts()}",
            f"  help: {spec.help}",
        ]
        for d in self.declarations:
            if d.leaf == name:
                lines.append(f"  {d.handler}: {'set' if d.applied else 'did not set'} {d.value!r} ({d.note}): {d.why}")
        return "\n".join(lines)


def project(resolved: ResolvedArgs) -> Bags:
    """The bags a resolved launch publishes (the same as `resolved.bags()`)."""
    return resolved.bags()
