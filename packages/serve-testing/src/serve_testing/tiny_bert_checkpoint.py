"""Tiny random BERT checkpoints, built in about a second: an embedding model (BertModel weights, a
WordPiece tokenizer trained offline, [CLS] text [SEP], and a sentence-transformers config: mean
pooling, normalized, as all-MiniLM-L6-v2 is laid out) and a cross-encoder reranker."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from serve_testing.sentence_transformers_files import write_sentence_transformers_config

BERT_SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
_CORPUS = (
    "the quick brown fox jumps over the lazy dog . a journey of a thousand miles begins with a single step . "
    "paris is the capital of france . embeddings map text to vectors , and similar texts to similar vectors . "
    "numbers : 0 1 2 3 4 5 6 7 8 9 10 100 1000 . "
)


def build_bert_tokenizer(folder: Path, vocab_size: int = 200) -> int:
    """Train a lowercasing WordPiece tokenizer that wraps each text in [CLS] ... [SEP] and save it
    in `folder`; the vocabulary size."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

    transformers: Any = importlib.import_module("transformers")  # its stubs do not type these calls
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=BERT_SPECIAL_TOKENS)
    tokenizer.train_from_iterator([_CORPUS] * 20, trainer=trainer)
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        mask_token="[MASK]",
    )
    fast.save_pretrained(folder)
    return int(tokenizer.get_vocab_size())


def _tiny_config(transformers: Any, vocab: int, max_position_embeddings: int, **more: Any) -> Any:
    """A 2-layer BERT of 64 features, drawn wide (initializer_range 0.2) so outputs differ visibly."""
    return transformers.BertConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=max_position_embeddings,
        initializer_range=0.2,
        **more,
    )


def build_tiny_bert_checkpoint(folder: Path, *, max_position_embeddings: int = 128, seed: int = 0) -> Path:
    """A 2-layer random BertModel in float32 with the tokenizer above and sentence-transformers'
    modules.json (Transformer, Pooling, Normalize) and 1_Pooling/config.json (mean), saved in `folder`."""
    import torch

    transformers: Any = importlib.import_module("transformers")
    folder.mkdir(parents=True, exist_ok=True)
    vocab = build_bert_tokenizer(folder)
    torch.manual_seed(seed)
    config = _tiny_config(transformers, vocab, max_position_embeddings)
    transformers.BertModel(config).to(torch.float32).save_pretrained(folder)
    write_sentence_transformers_config(folder, 64, {"pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True})
    return folder


def build_tiny_cross_encoder_checkpoint(folder: Path, *, max_position_embeddings: int = 128, seed: int = 0) -> Path:
    """A 2-layer random BertForSequenceClassification with one label (a relevance score), as
    sentence-transformers' CrossEncoder rerankers are laid out, with the tokenizer above, saved in `folder`."""
    import torch

    transformers: Any = importlib.import_module("transformers")
    folder.mkdir(parents=True, exist_ok=True)
    vocab = build_bert_tokenizer(folder)
    torch.manual_seed(seed)
    config = _tiny_config(
        transformers, vocab, max_position_embeddings, num_labels=1, architectures=["BertForSequenceClassification"]
    )
    transformers.BertForSequenceClassification(config).to(torch.float32).save_pretrained(folder)
    return folder
