"""The bundled default model (SmolLM2-135M-Instruct, converted once) embedding as --task embed serves
it: its last token's final-normed row, normalized, against transformers' AutoModel on the same
converted weights in float32, to fp32 tolerance; and bitwise the same alone and in a batch."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

import config_bags
from config_bags.server import Bags
from runtime_runner import ensure_default_model
from runtime_runner.models.decoder_embedder import DecoderEmbedder

pytestmark = pytest.mark.timeout(600)

TEXTS = ["What is the capital of France?", "Paris", "A journey of a thousand miles begins with a single step."]


def test_the_default_model_embeds_as_transformers_last_hidden_state() -> None:
    import transformers

    path = ensure_default_model()
    config_bags.publish(Bags(), role="standalone")
    try:
        embedder = DecoderEmbedder.load(path, torch.float32)
    finally:
        config_bags.unpublish()
    tokenizer: Any = transformers.AutoTokenizer.from_pretrained(str(path))
    inputs = [list(tokenizer(text)["input_ids"]) for text in TEXTS]
    model: Any = transformers.AutoModel.from_pretrained(str(path), dtype=torch.float32).eval()
    with torch.no_grad():
        rows = [model(torch.tensor([ids])).last_hidden_state[0, -1] for ids in inputs]
    together = embedder.embed(inputs)
    torch.testing.assert_close(torch.stack(together), F.normalize(torch.stack(rows), dim=-1), rtol=1e-4, atol=1e-5)
    assert embedder.embed(inputs[1:2])[0].numpy().tobytes() == together[1].numpy().tobytes()
