"""model: which checkpoint is served and how it is loaded."""

from __future__ import annotations

from typing import Annotated, Literal

from config_bags.bag import Bag
from config_bags.constraints import NonEmptyStr, PositiveInt
from config_bags.leaf import leaf

ModelDtype = Literal["auto", "float32", "bfloat16", "float16"]
Quantization = Literal["int8"]


class ModelBag(Bag, frozen=True, kw_only=True):
    """The served checkpoint."""

    model_path: Annotated[
        NonEmptyStr | None,
        leaf(
            "Local checkpoint: a Hugging Face directory, or a GGUF file (or a directory holding one) (unset: the "
            "bundled default model).",
            hot=False,
        ),
    ] = None
    tokenizer_path: Annotated[
        NonEmptyStr | None,
        leaf(
            "Tokenizer directory (unset: the model directory, or a GGUF file's tokenizer written into the model "
            "cache).",
            hot=False,
        ),
    ] = None
    served_model_name: Annotated[
        NonEmptyStr | None,
        leaf(
            "Model name the API reports and accepts (unset: the model directory's name, or the GGUF file's without "
            ".gguf).",
            hot=False,
        ),
    ] = None
    dtype: Annotated[
        ModelDtype,
        leaf(
            "Weight and activation dtype (auto: the checkpoint's; on CPU bfloat16 for float32, float32 for quantized "
            "weights).",
            hot=False,
        ),
    ] = "auto"
    context_length: Annotated[
        PositiveInt | None, leaf("Longest prompt plus completion in tokens (unset: the model's maximum).", hot=False)
    ] = None
    trust_remote_code: Annotated[bool, leaf("Allow checkpoint-provided tokenizer code.", hot=False)] = False
    quantization: Annotated[
        Quantization | None,
        leaf(
            "Quantize a bf16/fp32 checkpoint's weight matrices at load (int8: per output channel; CPU only; unset: as "
            "stored).",
            hot=False,
        ),
    ] = None
