"""Reading a Hugging Face safetensors checkpoint (one file or sharded) with shape checks."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from runtime_runner.errors import CheckpointError
from runtime_runner.loading.bare_decoder_names import served_names_of


def safetensors_files(model_dir: Path) -> dict[str, Path]:
    """Tensor name -> file holding it, from the shard index when there is one, else every *.safetensors."""
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map: Mapping[str, str] = json.loads(index.read_text())["weight_map"]
        except (ValueError, KeyError, TypeError) as err:
            raise CheckpointError(
                f"{index.name} is not a shard index ({type(err).__name__}: {err}); accepted: JSON whose "
                "'weight_map' maps each tensor name to its file"
            ) from None
        return {name: model_dir / file for name, file in weight_map.items()}
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise CheckpointError(
            f"no *.safetensors in {model_dir}; accepted: model.safetensors or shards with model.safetensors.index.json"
        )
    located: dict[str, Path] = {}
    for file in files:
        for name in safetensors_shapes(file):
            located[name] = file
    return located


def safetensors_shapes(file: Path) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape, from the header of one safetensors file (the data is not read, but
    the library checks that the file holds every byte its header places); CheckpointError naming
    the file where it is absent, truncated or corrupt."""
    if not file.is_file():
        raise CheckpointError(f"{file.name} is absent from {file.parent}; accepted: every file the checkpoint names")
    try:
        with safe_open(str(file), framework="pt") as handle:
            return {name: tuple(handle.get_slice(name).get_shape()) for name in handle.keys()}
    except SafetensorError as err:
        raise CheckpointError(
            f"{file.name} is not a readable safetensors file ({err}): truncated or corrupt; accepted: the file as "
            "its writer left it"
        ) from None


class CheckpointReader:
    """Reads named tensors, each checked against the shape the model expects."""

    def __init__(self, model_dir: Path) -> None:
        self.model_dir = model_dir
        stored = safetensors_files(model_dir)
        # Served name -> stored name: a bare decoder's tensors under the names the loader asks for.
        self._stored = served_names_of(stored)
        self.locations = {served: stored[name] for served, name in self._stored.items()}

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
        stored = self._stored[name]
        with safe_open(str(file), framework="pt") as handle:
            if stored not in handle.keys():
                raise CheckpointError(
                    f"checkpoint file {file.name} lacks tensor {stored!r} that its index names (expected shape "
                    f"{list(shape)})"
                )
            tensor: torch.Tensor = handle.get_tensor(stored)
        if tuple(tensor.shape) != shape:
            raise CheckpointError(f"tensor {name!r} has shape {list(tensor.shape)}; the config implies {list(shape)}")
        return tensor.to(device=device, dtype=dtype)

    def read_matrix(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """Weight matrix `name`: a safetensors checkpoint holds every matrix dense, so as `read`."""
        return self.read(name, shape, dtype, device)
