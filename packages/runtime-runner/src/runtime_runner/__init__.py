"""runtime_runner: Llama-family decoders over a paged KV pool, `forward(batch)`, and the sampler.

    runner = ModelRunner(attention_pair_factory)   # serve wires attn_backends.build_attention_pair in
    output = runner.forward(batch)                    # any object fitting ForwardBatchView

Every setting is read from the published bags at use, so a process publishes them before it
builds a runner: serve its resolved bags, a test or a tool its own
(`config_bags.publish(Bags(...), role="standalone")`); a runner built before is refused.
`ensure_default_model()` converts the bundled SmolLM2 once.

Where things live: this folder holds the runner (`runner`, and `standalone`, which drives it
without the scheduler), its KV pool (`kv_pool`) and the seams other packages see (`batch`,
`attention_seam`, `output`, `errors`, `placement`, `determinism`, `device_faults`);
`linear_attention/` a hybrid model's recurrent state pool, its per-forward plan and the seam
attn-backends reads it through; `models/` the decoders and their layers (and the native step
that runs a whole Llama-family forward in one call),
`loading/` checkpoints and their weights (`loading/gguf/` GGUF files), `kernels/` the C++
kernels beside their bindings, `parallel/` tensor parallelism, `sampling/` the sampler.
"""

from runtime_runner.attention_seam import AttentionBackend, AttentionMetadata, AttentionPairFactory
from runtime_runner.batch import ForwardBatchView, ForwardMode, RequestView, SamplingView, TokenGrammar
from runtime_runner.errors import BatchError, CheckpointError, UnsupportedArchitectureError, UnsupportedConfigError
from runtime_runner.kv_pool import kv_bytes_per_token
from runtime_runner.loading.arch_config import ArchConfig, read_arch_config
from runtime_runner.loading.default_model import ensure_default_model
from runtime_runner.output import ForwardOutput
from runtime_runner.placement import device_of, kv_dtype_of, model_dtype_of
from runtime_runner.runner import ModelRunner

__all__ = [
    "ArchConfig",
    "AttentionBackend",
    "AttentionPairFactory",
    "AttentionMetadata",
    "BatchError",
    "CheckpointError",
    "ForwardBatchView",
    "ForwardMode",
    "ForwardOutput",
    "ModelRunner",
    "RequestView",
    "SamplingView",
    "TokenGrammar",
    "UnsupportedArchitectureError",
    "UnsupportedConfigError",
    "device_of",
    "ensure_default_model",
    "kv_bytes_per_token",
    "kv_dtype_of",
    "model_dtype_of",
    "read_arch_config",
]
