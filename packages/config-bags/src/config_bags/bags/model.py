"""model: which checkpoint is served and how it is loaded."""

from __future__ import annotations

from typing import Annotated, Literal

from config_bags.bags.base import Bag
from config_bags.constraints import NonEmptyStr, PositiveInt
from config_bags.leaf import leaf

ModelDtype = Literal["auto", "float32", "bfloat16", "float16"]


class ModelBag(Bag, frozen=True, kw_only=True):
    """The served checkpoint."""

    model_path: Annotated[NonEmptyStr | None, leaf("Local checkpoint directory (unset: the bundled default model).", hot=False)
    ] = None
    tokenizer_path: Annotated[NonEmptyStr | None, leaf("Tokenizer directory (unset: the model directory).", hot=False)
    ] = None
    served_model_name: Annotated[NonEmptyStr | None, leaf("Model name the API reports and accepts (unset: the model directory's name).", hot=False)
    ] = None
    dtype: Annotated[ModelDtype, leaf("Weight and activation dtype (auto: the checkpoint's, bfloat16 for float32 on CPU).", hot=False)] = "auto"
    context_length: Annotated[PositiveInt | None, leaf("Longest prompt plus completion in tokens (unset: the model's maximum).", hot=False)
    ] = None
    trust_remote_code: Annotated[bool, leaf("Allow checkpoint-provided tokenizer code.", hot=False)] = False
