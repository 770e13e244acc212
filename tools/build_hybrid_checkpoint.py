"""Write a random Gated-DeltaNet hybrid checkpoint of a chosen size, for benchmarks.

    uv run python tools/build_hybrid_checkpoint.py --out /tmp/hybrid-220m            # Qwen3.5 text, ~220M parameters
    uv run python tools/build_hybrid_checkpoint.py --out /tmp/next --family qwen3_next --experts 8

transformers' own config and model classes build it (so the weight names and layout are the hub's),
with the tiny test tokenizer; every third layer of four is linear attention, as in the released
models. The weights are random: a benchmark of this measures speed, not answers.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import Any

import torch

from serve_testing.tiny_checkpoint import SPECIAL_TOKENS, build_tokenizer


def build(args: argparse.Namespace) -> int:
    """Save the checkpoint in args.out; answers its parameter count."""
    transformers: Any = importlib.import_module("transformers")  # its stubs do not type these classes
    args.out.mkdir(parents=True, exist_ok=True)
    vocab = build_tokenizer(args.out)
    layer_types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(args.layers)]
    common: dict[str, Any] = dict(
        vocab_size=vocab,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        layer_types=layer_types,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        head_dim=args.head_dim,
        linear_num_key_heads=args.linear_key_heads,
        linear_num_value_heads=2 * args.linear_key_heads,
        linear_key_head_dim=args.linear_head_dim,
        linear_value_head_dim=args.linear_head_dim,
        linear_conv_kernel_dim=4,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        eos_token_id=SPECIAL_TOKENS.index("<|im_end|>"),
        bos_token_id=None,
    )
    if args.family == "qwen3_5":
        config = transformers.Qwen3_5TextConfig(**common)
        model = transformers.Qwen3_5ForCausalLM(config)
    else:
        experts = (
            dict(
                num_experts=args.experts,
                num_experts_per_tok=2,
                moe_intermediate_size=args.intermediate // 4,
                shared_expert_intermediate_size=args.intermediate // 4,
            )
            if args.experts
            else dict(num_experts=0)
        )
        config = transformers.Qwen3NextConfig(**common, **experts, norm_topk_prob=True, decoder_sparse_step=1)
        model = transformers.Qwen3NextForCausalLM(config)
    model.to(torch.float32).save_pretrained(args.out)
    return int(sum(p.numel() for p in model.parameters()))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--family", choices=["qwen3_5", "qwen3_next"], default="qwen3_5")
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--intermediate", type=int, default=3072)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--linear-key-heads", type=int, default=8, help="value heads are twice as many")
    p.add_argument("--linear-head-dim", type=int, default=64)
    p.add_argument("--experts", type=int, default=0, help="qwen3_next: routed experts per layer (0: dense MLPs)")
    args = p.parse_args()
    print(f"{build(args) / 1e6:.0f}M parameters in {args.out}")


if __name__ == "__main__":
    main()
