"""model: which checkpoint is served and how it is loaded."""

from __future__ import annotations

from typing import Annotated, Literal

from config_bags.bag import Bag
from config_bags.constraints import NonEmptyStr, PositiveInt
from config_bags.leaf import leaf

ModelDtype = Literal["auto", "float32", "bfloat16", "float16"]
Quantization = Literal["int8"]
Task = Literal["generate", "embed", "rerank"]
Pooling = Literal["mean", "cls", "last"]


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
    task: Annotated[
        Task | None,
        leaf(
            "What the server does with the model: generate text, embed inputs (/v1/embeddings) or rerank documents "
            "(unset: the checkpoint's: embed for an encoder such as BertModel, generate for a decoder).",
            hot=False,
        ),
    ] = None
    pooling: Annotated[
        Pooling | None,
        leaf(
            "How an embedding pools its input's last hidden rows: mean, cls (the first row) or last (unset: as the "
            "checkpoint's sentence-transformers config says).",
            hot=False,
        ),
    ] = None
    quantization: Annotated[
        Quantization | None,
        leaf(
            "Quantize a bf16/fp32 checkpoint's weight matrices at load (int8: per output channel; CPU only; unset: as "
            "stored).",
            hot=False,
        ),
    ] = None
