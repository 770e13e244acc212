"""Tiny random hybrid (Gated-DeltaNet + gated full attention) checkpoints of the Qwen3-Next and
Qwen3.5 text families, built offline in a second or two, and transformers' own greedy continuation
of them as the reference a server's output must match token for token."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from serve_testing.tiny_checkpoint import SPECIAL_TOKENS, build_tokenizer

Family = Literal["qwen3_next", "qwen3_5"]
FAMILIES: tuple[Family, ...] = get_args(Family)
ARCHITECTURES: dict[Family, str] = {"qwen3_next": "Qwen3NextForCausalLM", "qwen3_5": "Qwen3_5ForCausalLM"}
_CONFIG_CLASSES: dict[Family, str] = {"qwen3_next": "Qwen3NextConfig", "qwen3_5": "Qwen3_5TextConfig"}
# Keyed by config.model_type, which is what a loaded model tells.
_MODELING_MODULES: dict[str, str] = {
    "qwen3_next": "transformers.models.qwen3_next.modeling_qwen3_next",
    "qwen3_5_text": "transformers.models.qwen3_5.modeling_qwen3_5",
}
LAYER_KINDS = ("linear_attention", "full_attention")
# The released models' pattern (three linear layers, then one full) truncated to six layers, so a
# linear layer also follows a full one.
DEFAULT_LAYER_TYPES = ("linear_attention",) * 3 + ("full_attention",) + ("linear_attention",) * 2
# The module-level functions each Gated-DeltaNet layer calls; transformers binds each one at import
# to a kernel package when one is installed, else to its own torch implementation.
_LINEAR_ATTENTION_FUNCTIONS = (
    "torch_chunk_gated_delta_rule",
    "torch_recurrent_gated_delta_rule",
    "causal_conv1d_fn",
    "causal_conv1d_update",
)
# Measured on these shapes against a float64 run: at 0.5 (the tiny Llama's range) the float32
# rounding error of the logits reaches 4e-3, the first layer decides almost every token and
# dropping the full-attention layer changes only 7-20 % of them; at 0.1 the error stays near 1e-4
# or below (median top-two gap 0.12-0.22) and dropping any one layer changes 26-100 % of them.
_INITIALIZER_RANGE = 0.1
# Every norm weight and dt_bias starts at a constant (0 for the (1 + w) norms, 1 for the gated
# norm and dt_bias); jittering them makes a forward that ignores one of them produce other tokens.
_CONSTANT_INIT_JITTER = 0.3
# transformers draws A (the per-head decay rate, g = -A * softplus(a + dt_bias)) from [0.01, 16]:
# most heads then forget everything within a token or two, and a server that loses the recurrent
# state between steps or chunks still emits the same tokens. Slow decays keep the state in play.
_DECAY_RATE_RANGE = (0.001, 0.3)
_PAD_TOKEN_ID = SPECIAL_TOKENS.index("<|endoftext|>")


def _transformers() -> Any:
    return importlib.import_module("transformers")  # its stubs do not type these classes


def _checked_layer_types(layer_types: Sequence[str] | None) -> list[str]:
    chosen = list(DEFAULT_LAYER_TYPES if layer_types is None else layer_types)
    unknown = sorted({kind for kind in chosen if kind not in LAYER_KINDS})
    if not chosen or unknown:
        raise ValueError(
            f"layer_types must be a non-empty sequence of {LAYER_KINDS}; got {chosen!r}"
            + (f" (unknown: {unknown})" if unknown else "")
        )
    return chosen


def _config(
    family: Family,
    *,
    vocab: int,
    moe: bool,
    layer_types: list[str],
    mlp_only_layers: list[int],
    max_position_embeddings: int,
) -> Any:
    common: dict[str, Any] = dict(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=len(layer_types),
        layer_types=layer_types,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=4,  # two value heads per key head: exercises the q/k head repeat
        linear_key_head_dim=16,
        linear_value_head_dim=32,  # unlike the key dim, so a swapped split fails loudly
        linear_conv_kernel_dim=4,
        max_position_embeddings=max_position_embeddings,
        initializer_range=_INITIALIZER_RANGE,
        tie_word_embeddings=False,
        eos_token_id=SPECIAL_TOKENS.index("<|im_end|>"),
        bos_token_id=None,
        dtype="float32",
    )
    config_class = getattr(_transformers(), _CONFIG_CLASSES[family])
    if family == "qwen3_5":
        return config_class(**common)  # a dense family: transformers' MoE sibling is qwen3_5_moe
    experts: dict[str, Any] = (
        dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=48)
        if moe
        else dict(num_experts=0)  # the decoder layer's own switch to the dense MLP
    )
    return config_class(
        **common, **experts, norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=mlp_only_layers
    )


def _reinit_for_testing(model: Any, seed: int) -> None:
    import torch

    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("norm.weight") or name.endswith("dt_bias"):
                parameter.add_(torch.randn(parameter.shape, generator=generator) * _CONSTANT_INIT_JITTER)
            elif name.endswith("A_log"):
                parameter.copy_(torch.empty(parameter.shape).uniform_(*_DECAY_RATE_RANGE, generator=generator).log())


def build_tiny_hybrid_checkpoint(
    folder: Path,
    *,
    family: Family,
    moe: bool = True,
    layer_types: Sequence[str] | None = None,
    seed: int = 0,
    max_position_embeddings: int = 4096,
    mlp_only_layers: Sequence[int] = (),
) -> Path:
    """A random hybrid checkpoint in float32 with the tiny tokenizer, saved in `folder`.

    Writes config.json (the family's own config class), model.safetensors under the family's Hugging
    Face weight names, generation_config.json and the tokenizer. `layer_types` lists each layer's
    token mixer ("linear_attention" or "full_attention"); the default mixes both. `moe` selects
    qwen3_next's sparse MoE (4 experts, top 2, shared expert) over a dense MLP; qwen3_5 is dense in
    transformers and ignores it. `mlp_only_layers` names qwen3_next MoE layers that keep a dense MLP
    instead (the config field of that name).
    """
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}; got {family!r}")
    import torch

    chosen_layers = _checked_layer_types(layer_types)
    dense_layers = sorted(set(mlp_only_layers))
    if dense_layers and not (family == "qwen3_next" and moe):
        raise ValueError(f"mlp_only_layers applies to family='qwen3_next' with moe=True; got {family=} {moe=}")
    if any(not 0 <= index < len(chosen_layers) for index in dense_layers):
        raise ValueError(f"mlp_only_layers must index the {len(chosen_layers)} layers; got {dense_layers}")
    folder.mkdir(parents=True, exist_ok=True)
    vocab = build_tokenizer(folder)
    config = _config(
        family,
        vocab=vocab,
        moe=moe,
        layer_types=chosen_layers,
        mlp_only_layers=dense_layers,
        max_position_embeddings=max_position_embeddings,
    )
    torch.manual_seed(seed)
    model = getattr(_transformers(), ARCHITECTURES[family])(config).to(torch.float32)
    _reinit_for_testing(model, seed)
    model.save_pretrained(folder)
    return folder


def _assert_torch_fallbacks(model: Any) -> None:
    """Raise unless every Gated-DeltaNet function the model's layers call is transformers' own torch
    implementation: a kernel package would make the reference compute something else."""
    model_type = model.config.model_type
    if model_type not in _MODELING_MODULES:
        raise ValueError(f"reference models are {sorted(_MODELING_MODULES)}; {model_type!r} is none of them")
    module = importlib.import_module(_MODELING_MODULES[model_type])
    for name in _LINEAR_ATTENTION_FUNCTIONS:
        bound = inspect.getclosurevars(getattr(module, name)).nonlocals
        if bound.get("implementation") is not bound.get("torch_function") or bound.get("torch_function") is None:
            raise RuntimeError(
                f"{module.__name__}.{name} is bound to {bound.get('implementation')!r}, not transformers' torch "
                "fallback; the reference must run without flash-linear-attention, causal-conv1d and hub kernels"
            )
    if getattr(model, "_use_kernels", False):
        raise RuntimeError("the reference model was kernelized; load it with use_kernels=False")


def load_reference_model(folder: Path) -> Any:
    """The checkpoint in `folder` as transformers' own causal LM: float32, CPU, eval mode, eager
    attention and experts, local files only, the torch Gated-DeltaNet paths checked."""
    import torch

    # Eager attention and the per-expert loop are the plainest computations transformers has (its
    # default for experts is a grouped matmul); local_files_only keeps loading off the network.
    model = _transformers().AutoModelForCausalLM.from_pretrained(
        folder,
        dtype=torch.float32,
        attn_implementation="eager",
        experts_implementation="eager",
        local_files_only=True,
        use_kernels=False,
    )
    _assert_torch_fallbacks(model)
    # The server's greedy comparisons ignore EOS; so does the reference, rather than stopping short.
    model.generation_config.eos_token_id = None
    return model.eval()


def reference_greedy(folder: Path, prompts: Sequence[Sequence[int]], max_new_tokens: int) -> list[list[int]]:
    """transformers' greedy continuation (exactly `max_new_tokens` tokens, EOS not honoured) of each
    prompt's token ids, one prompt at a time so that no padding enters the computation."""
    import torch

    if max_new_tokens < 1 or not prompts or any(len(prompt) == 0 for prompt in prompts):
        raise ValueError(
            f"reference_greedy needs max_new_tokens >= 1 and non-empty prompts; got {max_new_tokens} "
            f"new tokens for prompt lengths {[len(prompt) for prompt in prompts]}"
        )
    model = load_reference_model(folder)
    continuations: list[list[int]] = []
    with torch.no_grad():
        for prompt in prompts:
            ids = torch.tensor([list(prompt)], dtype=torch.long)
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                use_cache=True,
                pad_token_id=_PAD_TOKEN_ID,  # never used without padding; silences generate's warning
            )
            continuation = [int(token) for token in out[0, ids.shape[1] :]]
            if len(continuation) != max_new_tokens:
                raise RuntimeError(f"generate returned {len(continuation)} tokens, asked for {max_new_tokens}")
            continuations.append(continuation)
    return continuations
