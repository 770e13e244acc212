"""Whether a Hugging Face checkpoint directory can be served, judged from its config.json and the
headers of its safetensors files before any tensor is read.

The loader checks the same things as it reads, but in a child process, after the launch has
started its processes: a checkpoint it refuses there is a traceback from the scheduler. Checked
here, at resolution (serve), the launch ends in one line naming the file and what is wrong: an
architecture with no model code, no weight files, a file truncated or corrupt, a tensor the model
reads that is absent or of another shape than the config implies, an encoder's pooling module or
mode that it does not compute.
"""

from __future__ import annotations

from pathlib import Path

from runtime_runner.errors import CheckpointError
from runtime_runner.loading.arch_config import ArchConfig
from runtime_runner.loading.bare_decoder_names import served_names_of
from runtime_runner.loading.checkpoint import safetensors_files, safetensors_shapes
from runtime_runner.loading.checkpoint_layout import TensorSpec
from runtime_runner.loading.encoder_config import (
    CROSS_ENCODER_ARCHITECTURES,
    ENCODER_ARCHITECTURES,
    read_encoder_config,
)
from runtime_runner.loading.encoder_layout import (
    WRAPPED_PREFIX,
    cross_encoder_head_tensors,
    encoder_prefix,
    encoder_tensors,
)
from runtime_runner.loading.loader_hooks import decisions_of
from runtime_runner.loading.sentence_pooling import pooling_spec_at
from runtime_runner.models.architectures import MODEL_CLASSES, model_class_for


def _read_tensors(model_dir: Path, cfg: ArchConfig, held: frozenset[str]) -> tuple[str, tuple[TensorSpec, ...]]:
    """The model that reads the checkpoint (its name, for messages) and every tensor it reads."""
    if cfg.architecture in ENCODER_ARCHITECTURES:
        encoder = read_encoder_config(model_dir)
        if cfg.architecture in CROSS_ENCODER_ARCHITECTURES:
            return "BertCrossEncoder", (*encoder_tensors(encoder, WRAPPED_PREFIX), *cross_encoder_head_tensors(encoder))
        pooling_spec_at(model_dir)  # for its raise: a pooling the encoder does not compute
        return "BertEncoder", encoder_tensors(encoder, encoder_prefix(held))
    entry = model_class_for(cfg.architecture)
    return entry.__name__, decisions_of(entry, cfg).expected_tensors


def refuse_unservable_safetensors(model_dir: Path, cfg: ArchConfig) -> None:
    """CheckpointError unless `model_dir`, whose config.json `cfg` was read from, names an
    architecture with model code and holds, in readable safetensors files, every tensor that
    model reads in the shape config.json implies; UnsupportedConfigError for an encoder's config
    or pooling that the encoder does not compute."""
    if cfg.architecture not in ENCODER_ARCHITECTURES and cfg.architecture not in MODEL_CLASSES:
        supported = ", ".join(sorted((*MODEL_CLASSES, *ENCODER_ARCHITECTURES)))
        raise CheckpointError(
            f"config.json: architecture {cfg.architecture!r} is not supported; supported: {supported}"
        )
    stored_locations = safetensors_files(model_dir)
    stored_shapes: dict[str, tuple[int, ...]] = {}
    for path in sorted(set(stored_locations.values())):
        stored_shapes.update(safetensors_shapes(path))
    # Under the names the loader asks for (a bare decoder's under model., as CheckpointReader reads them).
    served = served_names_of(stored_locations)
    locations = {name: stored_locations[stored] for name, stored in served.items()}
    shapes = {name: stored_shapes[stored] for name, stored in served.items() if stored in stored_shapes}
    reader, specs = _read_tensors(model_dir, cfg, frozenset(shapes))
    for spec in specs:
        file = locations.get(spec.name)
        held = shapes.get(spec.name)
        if file is None or held is None:
            where = "no safetensors file holds" if file is None else f"{file.name} lacks, though its index names it,"
            raise CheckpointError(
                f"{where} tensor {spec.name!r} (shape {list(spec.shape)}), which {reader} reads; accepted: "
                "a checkpoint holding every tensor of its architecture"
            )
        if held != spec.shape:
            raise CheckpointError(
                f"{file.name}: tensor {spec.name!r} has shape {list(held)}, but config.json implies "
                f"{list(spec.shape)} for {reader}; accepted: a config.json and weights of one model"
            )
