"""Handlers that fill the model leaves from the checkpoint the launch serves."""

from __future__ import annotations

import json
from pathlib import Path

from attn_backends import AttentionBackendUnavailableError, linear_attn_kernels_for
from config_bags import leaf_spec, leaf_value_of
from config_bags.server import Bags, context_length_of, context_length_within_model
from runtime_runner import device_of, ensure_default_model
from runtime_runner.errors import CheckpointError, UnsupportedConfigError
from runtime_runner.loading.checkpoint_source import draft_arch_config, gguf_file_of
from runtime_runner.loading.gguf.tokenizer_cache import ensure_gguf_tokenizer
from runtime_runner.loading.matryoshka import matryoshka_dimensions_at
from runtime_runner.loading.quantization_support import activations_of, cpu_tier_of
from runtime_runner.models.gguf_fit import refuse_misfit_gguf
from runtime_runner.models.safetensors_fit import refuse_unservable_safetensors
from serve.launch_rules import QUANTIZED_WEIGHTS_RUN_HERE
from serve.parallel_rules import tensor_parallel_fits_model
from serve.record.errors import ResolutionError
from serve.record.resolution import Resolution
from serve.served_model import ServedModel
from serve.task_rules import task_of_architecture, task_served
from serve.tokenizer.tokenizer_files import tokenizer_refusal_of


def bundled_default_model() -> Path:
    """The bundled default checkpoint, converted once into a cache dir by the runner."""
    return ensure_default_model()


def default_model(res: Resolution) -> None:
    """Serve the bundled default model when no model_path is given."""
    if res.server_args.model_path is None:
        res.declare("default_model", model_path=str(res.default_model()))


def _gguf_file(res: Resolution) -> Path | None:
    """The GGUF file model_path names, None for a Hugging Face directory."""
    model_path = res.bags().model.model_path
    try:
        return None if model_path is None else gguf_file_of(Path(model_path))
    except CheckpointError as err:
        raise ResolutionError(f"model_path {model_path}: {err}") from None


def quantized_kernels(res: Resolution) -> None:
    """A GGUF file's matrices read their rows as int8 on a CPU with the integer kernels (AVX2):
    llama.cpp's arithmetic, batch-invariant, at the integer kernels' speed; float32 (bitwise the
    de-quantized model, slower) only when asked, and for weights that are not a GGUF file's. The
    integer kernels are built for the highest instruction tier this CPU runs (avx2, avx512 with
    VNNI, amx with AMX-INT8 tiles), unless a lower one is asked."""
    gguf, exec = _gguf_file(res), res.bags().exec
    res.declare("quantized_kernels", quantized_activations=activations_of(exec, gguf))
    tier = cpu_tier_of(res.bags().exec, gguf)
    if tier is not None:
        res.declare("quantized_kernels", cpu_isa=tier)


def quantized_weights_run_here(res: Resolution) -> None:
    """Quantized weights (a GGUF checkpoint, or quantization = int8 over a dense one) run the
    quantized CPU kernels: on a CPU, eagerly, in float32 or bfloat16, for a Llama, Qwen2 or Qwen3
    model, or a BERT encoder under int8; int8 does not quantize a GGUF file twice. The checkpoint is
    read first, so a GGUF file of a tensor type not served is refused before anything is written
    for it."""
    # Read first, for its raise: the cached property loads the checkpoint, and one it cannot serve (a GGUF
    # tensor of a type not served) is refused here.
    _ = res.model
    res.check(QUANTIZED_WEIGHTS_RUN_HERE)


def gguf_fits_its_decoder(res: Resolution) -> None:
    """A GGUF file holds exactly the tensors its entry class reads (Qwen2 always reads q/k/v biases,
    Qwen3 q/k norms): one the decoder would lack, or one it would never read, is refused here rather
    than in a loading child process (runtime_runner.models.gguf_fit)."""
    gguf = _gguf_file(res)
    if gguf is None:
        return
    try:
        refuse_misfit_gguf(gguf, res.model)
    except CheckpointError as err:
        raise ResolutionError(f"model_path {gguf}: {err}") from None


def safetensors_fit_their_decoder(res: Resolution) -> None:
    """A Hugging Face checkpoint names an architecture with model code and holds every tensor it
    reads, in the shape config.json implies, in safetensors files that are whole: read from the
    files' headers here, so an unservable checkpoint ends the launch in one line before any process
    starts (runtime_runner.models.safetensors_fit)."""
    model_path = res.bags().model.model_path
    if model_path is None or _gguf_file(res) is not None:
        return
    try:
        refuse_unservable_safetensors(Path(model_path), res.model)
    except (CheckpointError, UnsupportedConfigError) as err:
        raise ResolutionError(f"model_path {model_path}: {err}") from None


def task(res: Resolution) -> None:
    """The checkpoint's task unless the operator named one: embed for an encoder (BertModel),
    generate for a decoder; the rule task_served refuses one this build does not serve on it, and
    an embedding launch's Matryoshka sizes (config.json) are read."""
    res.declare("task", task=task_of_architecture(res.model.architecture))
    res.check(task_served(ServedModel.of(res.model)))
    model_path = res.bags().model.model_path
    if res.bags().model.task == "embed" and model_path is not None:
        # Read here, for its raise: a Matryoshka declaration that is not a list of sizes ends the
        # launch in one line rather than in the scheduler process that reads it again.
        try:
            matryoshka_dimensions_at(Path(model_path), res.model.hidden_size)
        except CheckpointError as err:
            raise ResolutionError(f"model_path {model_path}: {err}") from None


def tokenizer_path(res: Resolution) -> None:
    """The tokenizer lives with the model unless the operator named another directory; a GGUF
    checkpoint's is written from the file's metadata once, into the model cache."""
    gguf, model = _gguf_file(res), res.bags().model
    if gguf is None:
        res.declare("tokenizer_path", tokenizer_path=model.model_path)
        return
    if model.tokenizer_path is not None:
        return  # the operator's: nothing to write
    try:
        written = ensure_gguf_tokenizer(gguf)
    except (CheckpointError, UnsupportedConfigError, ValueError) as err:
        raise ResolutionError(
            f"model_path {gguf}: its tokenizer: {err}; or name a Hugging Face tokenizer directory with --tokenizer-path"
        ) from None
    res.declare("tokenizer_path", tokenizer_path=str(written))


def tokenizer_loads(res: Resolution) -> None:
    """The tokenizer directory holds a tokenizer that loads (a tokenizer.json that parses, or the
    vocabulary files a slow tokenizer converts), checked before the tokenizer process starts."""
    model = res.bags().model
    if model.tokenizer_path is None:
        return
    refusal = tokenizer_refusal_of(Path(model.tokenizer_path), custom_code=model.trust_remote_code)
    if refusal is not None:
        raise ResolutionError(f"tokenizer_path: {refusal} (from {res.origin('tokenizer_path')})")


def served_model_name(res: Resolution) -> None:
    """The API names the model after its directory, or its GGUF file's name without .gguf."""
    model_path = res.bags().model.model_path
    if model_path is not None:
        gguf = _gguf_file(res)
        res.declare("served_model_name", served_model_name=Path(model_path).name if gguf is None else gguf.stem)


def context_length(res: Resolution) -> None:
    """The model's maximum context, which an operator's value may not exceed."""
    model_max_length = res.model.max_position_embeddings
    res.check(context_length_within_model(model_max_length))
    res.declare("context_length", context_length=context_length_of(res.bags().model, model_max_length))


def tensor_parallel(res: Resolution) -> None:
    """The model splits over tp_size ranks (heads, KV heads, intermediate rows), before the KV
    pool is sized per rank."""
    res.check(tensor_parallel_fits_model(ServedModel.of(res.model)))


LINEAR_ATTN_LEAVES = ("linear_attn_backend", "linear_attn_prefill_backend", "linear_attn_decode_backend")
RECURRENT_STATE_LEAVES = (
    "mamba_ssm_dtype",
    "max_mamba_cache_size",
    "mamba_snapshot_interval",
    "mamba_snapshot_memory_mb",
)


def linear_attention(res: Resolution) -> None:
    """The linear-attention and recurrent-state leaves configure a hybrid model's Gated-DeltaNet
    layers: a model without them refuses the leaves rather than ignore them, and a kernel the
    operator named must run on this device."""
    bags, model = res.bags(), res.model
    if model.hybrid is None:
        for leaf in LINEAR_ATTN_LEAVES + RECURRENT_STATE_LEAVES:
            value, default = leaf_value_of(bags, leaf), leaf_spec(leaf, Bags).default
            if value != default:
                raise ResolutionError(
                    f"{leaf} = {value!r}: {model.architecture} has no linear-attention layers; accepted: "
                    f"{default!r} (the default), or a Qwen3-Next or Qwen3.5 checkpoint"
                )
        return
    device_type = device_of(bags.device).type
    for leaf in LINEAR_ATTN_LEAVES:
        name = leaf_value_of(bags, leaf)
        if name is None:
            continue
        try:
            linear_attn_kernels_for(name, device_type)
        except (AttentionBackendUnavailableError, ValueError) as err:
            raise ResolutionError(f"{leaf} = {name!r}: {err}") from None


def draft_model(res: Resolution) -> None:
    """A draft model proposes token ids the target verifies, so it must share the target's
    tokenizer: the same vocabulary size and, where both ship a tokenizer.json, the same token for
    every id; and it must hold as many positions as the served context."""
    spec = res.bags().spec
    if spec.speculative_algorithm != "draft_model" or spec.speculative_draft_model_path is None:
        return
    draft_dir = Path(spec.speculative_draft_model_path)
    try:
        draft = draft_arch_config(draft_dir)
    except (CheckpointError, UnsupportedConfigError, ValueError) as err:
        raise ResolutionError(f"speculative_draft_model_path {draft_dir}: {err}") from None
    target = res.model
    if draft.vocab_size != target.vocab_size:
        raise ResolutionError(
            f"speculative_draft_model_path {draft_dir} has a vocabulary of {draft.vocab_size} tokens and the "
            f"target {target.vocab_size}: a draft must share the target's tokenizer"
        )
    model = res.bags().model
    tokenizer_dir = Path(model.tokenizer_path or model.model_path or ".")
    differing = _vocab_difference(tokenizer_dir / "tokenizer.json", draft_dir / "tokenizer.json")
    if differing:
        raise ResolutionError(
            f"speculative_draft_model_path {draft_dir} ships a tokenizer that maps {differing} tokens differently "
            f"from the target's ({tokenizer_dir}): a draft must share the target's tokenizer"
        )
    context = context_length_of(res.bags().model, target.max_position_embeddings)
    if draft.max_position_embeddings < context:
        raise ResolutionError(
            f"speculative_draft_model_path {draft_dir} holds {draft.max_position_embeddings} positions, fewer than "
            f"the served context length {context}; accepted: a draft at least as long, or --context-length "
            f"<= {draft.max_position_embeddings}"
        )


def _vocab_difference(target_file: Path, draft_file: Path) -> int:
    """How many tokens the two tokenizer.json vocabularies map differently (0 unless both exist)."""
    if not (target_file.is_file() and draft_file.is_file()):
        return 0
    mappings = []
    for file in (target_file, draft_file):
        vocab = json.loads(file.read_text()).get("model", {}).get("vocab", {})
        # BPE and WordPiece map token -> id; Unigram lists [token, score] in id order
        mappings.append(
            set(vocab.items()) if isinstance(vocab, dict) else {(entry[0], i) for i, entry in enumerate(vocab)}
        )
    return len(mappings[0] ^ mappings[1])
