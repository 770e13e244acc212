"""Whether a GGUF file holds exactly the tensors its entry class reads.

gguf.agreement holds the file to the decoder its own metadata states, with the optional tensors
(biases, q/k norms) as layer 0 has them. The entry class has its own say: Qwen2 always reads q/k/v
biases and never an o bias, Qwen3 always reads q/k norms, Llama reads an o bias wherever it reads
q/k/v biases. A tensor it reads and the file lacks would fail the load in a child process; one the
file holds and it never reads would be dropped, serving another model than the file's. Both are
refused here, at resolution (serve) and at load (a runner built without serve), in one line.
"""

from __future__ import annotations

from pathlib import Path

from runtime_runner.errors import CheckpointError
from runtime_runner.loading.arch_config import ArchConfig
from runtime_runner.loading.gguf.file import GgufFile
from runtime_runner.loading.gguf.names import gguf_name_of
from runtime_runner.loading.loader_hooks import decisions_of
from runtime_runner.models.architectures import model_class_for


def _listed(names: list[str]) -> str:
    """The first name and how many more."""
    return gguf_name_of(names[0]) + (f" (and {len(names) - 1} more)" if len(names) > 1 else "")


def refuse_misfit_gguf(gguf: Path, cfg: ArchConfig) -> None:
    """CheckpointError unless the GGUF file at `gguf`, whose metadata `cfg` was read from, holds
    every tensor the entry class of `cfg.architecture` reads and no other."""
    file = GgufFile(gguf)
    entry = model_class_for(cfg.architecture)
    read = [spec.name for spec in decisions_of(entry, cfg).expected_tensors]
    missing = [name for name in read if name not in file.tensors]
    if missing:
        raise CheckpointError(
            f"{gguf.name} lacks tensor {_listed(missing)}, which {entry.__name__} reads; accepted: a file holding "
            f"every tensor of its architecture's decoder"
        )
    unread = [name for name in file.tensors if name not in frozenset(read)]
    if unread:
        raise CheckpointError(
            f"{gguf.name}: tensor {_listed(unread)} has no place in {entry.__name__}, which reads no such tensor "
            "(served without it, the file's model would not be); accepted: a file holding only the tensors of its "
            "architecture's decoder"
        )
