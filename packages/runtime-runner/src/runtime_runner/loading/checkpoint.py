"""Reading a Hugging Face safetensors checkpoint (one file or sharded) with shape checks."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path

import torch
from safetensors import safe_open

from runtime_runner.errors import CheckpointError


def safetensors_files(model_dir: Path) -> dict[str, Path]:
    """Tensor name -> file holding it, from the shard index when there is one, else every *.safetensors."""
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        weight_map: Mapping[str, str] = json.loads(index.read_text())["weight_map"]
        return {name: model_dir / file for name, file in weight_map.items()}
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise CheckpointError(
            f"no *.safetensors in {model_dir}; accepted: model.safetensors or shards with model.safetensors.index.json"
        )
    located: dict[str, Path] = {}
    for file in files:
        with safe_open(str(file), framework="pt") as handle:
            for name in handle.keys():
                located[name] = file
    return located


class CheckpointReader:
    """Reads named tensors, each checked against the shape the model expects."""

    def __init__(self, model_dir: Path) -> None:
        self.model_dir = model_dir
        self.locations = safetensors_files(model_dir)

    def has(self, name: str) -> bool:
        """Whether the checkpoint holds tensor `name`."""
        return name in self.locations

    def names(self) -> Iterator[str]:
        """Every tensor name in the checkpoint."""
        return iter(self.locations)

    def read(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """Tensor `name` as `dtype` on `device`; raises naming the tensor when it is absent or mis-shaped."""
        file = self.locations.get(name)
        if file is None:
            raise CheckpointError(f"checkpoint {self.model_dir} lacks tensor {name!r} (expected shape {list(shape)})")
        with safe_open(str(file), framework="pt") as handle:
            if name not in handle.keys():
                raise CheckpointError(
                    f"checkpoint file {file.name} lacks tensor {name!r} that its index names (expected shape "
                    f"{list(shape)})"
                )
            tensor: torch.Tensor = handle.get_tensor(name)
        if tuple(tensor.shape) != shape:
            raise CheckpointError(f"tensor {name!r} has shape {list(tensor.shape)}; the config implies {list(shape)}")
        return tensor.to(device=device, dtype=dtype)

    def read_matrix(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """Weight matrix `name`: a safetensors checkpoint holds every matrix dense, so as `read`."""
        return self.read(name, shape, dtype, device)
