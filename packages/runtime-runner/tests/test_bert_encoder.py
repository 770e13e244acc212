"""The BERT encoder against transformers' BertModel on a tiny random checkpoint: its last hidden
rows, pooled and normalized as the checkpoint's sentence-transformers config says, to fp32
tolerance; each embedding bitwise the same alone and inside a batch of 64 inputs of mixed lengths;
and the pooling config read, or refused naming the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from runtime_runner.errors import BatchError, UnsupportedConfigError
from runtime_runner.loading.sentence_pooling import UNCONFIGURED, PoolingSpec, pooling_spec_at
from runtime_runner.models.encoder import BertEncoder

VOCAB, POSITIONS = 120, 128


def _write_pooling(folder: Path, flag: str, normalize: bool) -> None:
    modules: list[dict[str, Any]] = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    flags = ("pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens", "pooling_mode_lasttoken")
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 64, **{f: f == flag for f in flags}})
    )


def _config(**more: Any) -> Any:
    """A 2-layer BERT of 64 features over VOCAB tokens and POSITIONS positions, drawn wide."""
    import transformers

    return transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=POSITIONS,
        initializer_range=0.2,
        **more,
    )


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """A 2-layer random BertModel in fp32 with a mean-pooling, normalizing sentence-transformers config."""
    import transformers

    torch.manual_seed(0)
    model = transformers.BertModel(_config()).eval()
    folder = tmp_path_factory.mktemp("bert") / "tiny-bert"
    model.save_pretrained(folder)
    _write_pooling(folder, "pooling_mode_mean_tokens", normalize=True)
    return folder, model


def _inputs(count: int, seed: int) -> list[list[int]]:
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 100, (count,), generator=generator).tolist()
    return [torch.randint(0, VOCAB, (n,), generator=generator).tolist() for n in lengths]


def test_embeddings_equal_transformers_pooled_as_configured(bert: tuple[Path, Any]) -> None:
    folder, model = bert
    encoder = BertEncoder.load(folder)
    assert encoder.pooling == PoolingSpec(mode="mean", normalize=True)
    inputs = _inputs(8, seed=1)
    for ids, ours in zip(inputs, encoder.embed(inputs), strict=True):
        with torch.no_grad():
            rows = model(torch.tensor([ids])).last_hidden_state[0]
        torch.testing.assert_close(ours, F.normalize(rows.mean(dim=0), dim=0), rtol=1e-5, atol=1e-5)
    for ids, rows in zip(inputs, encoder.hidden_rows(inputs), strict=True):
        with torch.no_grad():
            expected = model(torch.tensor([ids])).last_hidden_state[0]
        torch.testing.assert_close(rows, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_an_embedding_is_the_same_bytes_alone_and_in_a_batch_of_64(bert: tuple[Path, Any], dtype: torch.dtype) -> None:
    """Reverse-verified by hand: with oneDNN's packed linear in place of the batch-invariant one,
    the float32 case failed (the bfloat16 one held at these shapes)."""
    encoder = BertEncoder.load(bert[0], dtype)
    batch = _inputs(64, seed=2)
    together = encoder.embed(batch)
    for at in (0, 17, 63):
        alone = encoder.embed([batch[at]])[0]
        assert alone.numpy().tobytes() == together[at].numpy().tobytes(), at


@pytest.mark.parametrize(
    ("flag", "normalize", "expected"),
    [
        ("pooling_mode_cls_token", False, PoolingSpec(mode="cls", normalize=False)),
        ("pooling_mode_lasttoken", True, PoolingSpec(mode="last", normalize=True)),
    ],
)
def test_the_pooling_config_is_read(flag: str, normalize: bool, expected: PoolingSpec, tmp_path: Path) -> None:
    _write_pooling(tmp_path, flag, normalize)
    assert pooling_spec_at(tmp_path) == expected


def test_a_checkpoint_without_a_sentence_transformers_config_pools_its_first_token(tmp_path: Path) -> None:
    assert pooling_spec_at(tmp_path) == UNCONFIGURED == PoolingSpec(mode="cls", normalize=True)


def test_a_pooling_mode_not_computed_is_refused_naming_the_file(tmp_path: Path) -> None:
    _write_pooling(tmp_path, "pooling_mode_max_tokens", normalize=False)
    with pytest.raises(UnsupportedConfigError, match=r"1_Pooling/config.json turns on \['pooling_mode_max_tokens'\]"):
        pooling_spec_at(tmp_path)


def test_a_module_not_computed_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "modules.json").write_text(
        json.dumps([{"path": "2_Dense", "type": "sentence_transformers.models.Dense"}])
    )
    with pytest.raises(UnsupportedConfigError, match="lists module 'sentence_transformers.models.Dense'"):
        pooling_spec_at(tmp_path)


@pytest.mark.parametrize(
    ("inputs", "needle"),
    [
        ([[]], "input 0 holds 0 tokens; accepted: 1 to 128"),
        ([[1], [0] * (POSITIONS + 1)], "input 1 holds 129 tokens"),
        ([[1, VOCAB]], f"input 0 holds token id {VOCAB}; accepted: 0 to {VOCAB - 1}"),
    ],
    ids=["empty", "too long", "id out of range"],
)
def test_an_input_the_encoder_cannot_take_is_refused_naming_it(
    bert: tuple[Path, Any], inputs: list[list[int]], needle: str
) -> None:
    with pytest.raises(BatchError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        BertEncoder.load(bert[0]).embed(inputs)


def test_a_cross_encoder_scores_as_transformers_classifier_through_a_sigmoid(tmp_path: Path) -> None:
    """BertForSequenceClassification with one label: the encoder over two segments, the pooler, the
    classifier, and the sigmoid sentence-transformers' CrossEncoder applies by default."""
    import transformers

    from runtime_runner.models.cross_encoder import BertCrossEncoder

    torch.manual_seed(3)
    model = transformers.BertForSequenceClassification(_config(num_labels=1)).eval()
    model.save_pretrained(tmp_path)
    pairs = _inputs(6, seed=4)
    types = [[0] * (len(ids) // 2) + [1] * (len(ids) - len(ids) // 2) for ids in pairs]
    ours = BertCrossEncoder.load(tmp_path).score(pairs, types)
    for ids, kinds, score in zip(pairs, types, ours, strict=True):
        with torch.no_grad():
            logit = model(torch.tensor([ids]), token_type_ids=torch.tensor([kinds])).logits[0, 0]
        assert score == pytest.approx(float(torch.sigmoid(logit)), rel=1e-5, abs=1e-6)


def test_every_cross_encoder_score_is_the_same_bytes_alone_and_among_300(tmp_path: Path) -> None:
    """Reverse-verified by hand: with torch's own tanh and sigmoid in place of the whole-vector
    ones, 17 of these 300 short pairs score differently in their last bits alone (scalar tail)
    and among the 300 (vector body), as CI once caught end to end."""
    import transformers

    from runtime_runner.models.cross_encoder import BertCrossEncoder

    torch.manual_seed(5)
    transformers.BertForSequenceClassification(_config(num_labels=1)).eval().save_pretrained(tmp_path)
    generator = torch.Generator().manual_seed(6)
    lengths = torch.randint(2, 12, (300,), generator=generator).tolist()
    pairs = [torch.randint(0, VOCAB, (n,), generator=generator).tolist() for n in lengths]
    types = [[0] * (n // 2) + [1] * (n - n // 2) for n in lengths]
    cross = BertCrossEncoder.load(tmp_path)
    together = cross.score(pairs, types)
    differing = [at for at in range(300) if cross.score([pairs[at]], [types[at]]) != [together[at]]]
    assert differing == []
