"""Whether a Hugging Face checkpoint directory can be served, judged from its config.json and the
headers of its safetensors files before any tensor is read.

The loader checks the same things as it reads, but in a child process, after the launch has
started its processes: a checkpoint it refuses there is a traceback from the scheduler. Checked
here, at resolution (serve), the launch ends in one line naming the file and what is wrong: an
architecture with no model code, no weight files, a file truncated or corrupt, a tensor the entry
class reads that is absent or of another shape than the config implies.
"""

from __future__ import annotations

from pathlib import Path

from runtime_runner.errors import CheckpointError, UnsupportedArchitectureError
from runtime_runner.loading.arch_config import ArchConfig
from runtime_runner.loading.checkpoint import safetensors_files, safetensors_shapes
from runtime_runner.loading.loader_hooks import decisions_of
from runtime_runner.models.architectures import model_class_for


def refuse_unservable_safetensors(model_dir: Path, cfg: ArchConfig) -> None:
    """CheckpointError unless `model_dir`, whose config.json `cfg` was read from, names an
    architecture with an entry class and holds, in readable safetensors files, every tensor that
    class reads in the shape `cfg` implies."""
    try:
        entry = model_class_for(cfg.architecture)
    except UnsupportedArchitectureError as err:
        raise CheckpointError(f"config.json: {err}") from None
    locations = safetensors_files(model_dir)
    shapes: dict[str, tuple[int, ...]] = {}
    for path in sorted(set(locations.values())):
        shapes.update(safetensors_shapes(path))
    for spec in decisions_of(entry, cfg).expected_tensors:
        file = locations.get(spec.name)
        held = shapes.get(spec.name)
        if file is None or held is None:
            where = "no safetensors file holds" if file is None else f"{file.name} lacks, though its index names it,"
            raise CheckpointError(
                f"{where} tensor {spec.name!r} (shape {list(spec.shape)}), which {entry.__name__} reads; accepted: "
                "a checkpoint holding every tensor of its architecture"
            )
        if held != spec.shape:
            raise CheckpointError(
                f"{file.name}: tensor {spec.name!r} has shape {list(held)}, but config.json implies "
                f"{list(spec.shape)} for {entry.__name__}; accepted: a config.json and weights of one model"
            )
