"""A decoder embedding (runtime_runner.models.decoder_embedder) against transformers' AutoModel on
tiny random Llama and Qwen3 checkpoints: the last hidden state pooled the same way (last token by
default, mean when asked) and normalized, to fp32 tolerance; each embedding bitwise the same alone
and among 64 inputs of mixed lengths, in float32 and bfloat16; a Qwen3-Embedding-style
sentence-transformers config read; its bare checkpoint (no `model.` prefix) read; a token outside
the vocabulary refused."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import config_bags
from config_bags.server import Bags
from runtime_runner.errors import BatchError
from runtime_runner.loading.sentence_pooling import PoolingMode, PoolingSpec
from runtime_runner.models.decoder_embedder import DecoderEmbedder

VOCAB = 96  # conftest's TINY
INPUTS = [[5, 17, 33, 2], [40], [7, 7, 7, 7, 7, 7, 7, 9, 11, 90, 3], [1, 2]]


def _loaded(folder: Path, dtype: torch.dtype = torch.float32, pooling: PoolingMode | None = None) -> DecoderEmbedder:
    config_bags.publish(Bags(), role="standalone")
    return DecoderEmbedder.load(folder, dtype, pooling)


def _reference(folder: Path, inputs: list[list[int]], mode: str) -> torch.Tensor:
    """transformers' AutoModel (the decoder without its LM head) over each input alone, its last
    hidden state pooled as `mode` and normalized."""
    import transformers

    model: Any = transformers.AutoModel.from_pretrained(str(folder), dtype=torch.float32).eval()
    vectors = []
    with torch.no_grad():
        for ids in inputs:
            rows = model(torch.tensor([ids])).last_hidden_state[0]
            vectors.append(F.normalize(rows[-1] if mode == "last" else rows.mean(dim=0), dim=0))
    return torch.stack(vectors)


@pytest.mark.parametrize("architecture", ["LlamaForCausalLM", "Qwen3ForCausalLM"])
@pytest.mark.parametrize("mode", ["last", "mean"])
def test_an_embedding_is_transformers_last_hidden_state_pooled(
    make_checkpoint: Callable[..., Path], architecture: str, mode: PoolingMode
) -> None:
    folder = make_checkpoint(architecture)
    embedder = _loaded(folder, pooling=None if mode == "last" else mode)
    assert embedder.pooling == PoolingSpec(mode=mode, normalize=True)
    ours = torch.stack(embedder.embed(INPUTS))
    torch.testing.assert_close(ours, _reference(folder, INPUTS, mode), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_an_embedding_is_the_same_bytes_alone_and_among_64_of_mixed_lengths(
    make_checkpoint: Callable[..., Path], dtype: torch.dtype
) -> None:
    """Checked by hand: with causal_attention's per-input split replaced by one padded batch of
    every input, the float32 case failed (an input's bits depended on its batch)."""
    embedder = _loaded(make_checkpoint("Qwen3ForCausalLM"), dtype)
    batch = [[(i * 7 + j * 13) % VOCAB for j in range(1 + (i * 5) % 40)] for i in range(64)]
    together = embedder.embed(batch)
    for at in (0, 17, 63):
        assert embedder.embed([batch[at]])[0].numpy().tobytes() == together[at].numpy().tobytes(), at


def test_a_qwen3_embedding_config_is_read(make_checkpoint: Callable[..., Path]) -> None:
    """Qwen3-Embedding ships modules.json (Transformer, Pooling with pooling_mode_lasttoken, Normalize)."""
    folder = make_checkpoint("Qwen3ForCausalLM")
    (folder / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            ]
        )
    )
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_lasttoken": True}))
    embedder = _loaded(folder)
    assert embedder.pooling == PoolingSpec(mode="last", normalize=False)
    vector = embedder.embed(INPUTS[:1])[0]
    model_rows = _reference(folder, INPUTS[:1], "last")[0]
    torch.testing.assert_close(F.normalize(vector, dim=0), model_rows, rtol=1e-5, atol=1e-5)


def test_a_token_outside_the_vocabulary_is_refused(make_checkpoint: Callable[..., Path]) -> None:
    embedder = _loaded(make_checkpoint("LlamaForCausalLM"))
    with pytest.raises(BatchError, match=f"token id {VOCAB}; accepted: 0 to {VOCAB - 1}"):
        embedder.embed([[1, VOCAB]])


def test_a_bare_decoder_checkpoint_is_read_under_the_model_prefix(
    make_checkpoint: Callable[..., Path], tmp_path: Path
) -> None:
    """Qwen3-Embedding's safetensors hold its inner model's names (embed_tokens.weight, layers.0...)
    with no LM head: read as the causal LM's, the same vectors bit for bit. Reverse-verified by
    hand: without bare_decoder_names the load raised lacking every 'model.' tensor."""
    from safetensors.torch import load_file, save_file

    folder = make_checkpoint("Qwen3ForCausalLM", tie_word_embeddings=True)
    bare = shutil.copytree(folder, tmp_path / "bare")
    weights = load_file(bare / "model.safetensors")
    save_file(
        {name.removeprefix("model."): t for name, t in weights.items() if name != "lm_head.weight"},
        bare / "model.safetensors",
        metadata={"format": "pt"},
    )
    expected = [v.numpy().tobytes() for v in _loaded(folder).embed(INPUTS)]
    config_bags.unpublish()
    assert [v.numpy().tobytes() for v in _loaded(bare).embed(INPUTS)] == expected
