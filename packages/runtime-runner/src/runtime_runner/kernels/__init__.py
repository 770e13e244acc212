"""The CPU kernels behind the projections and the fused ops, each C++ source beside the Python
binding that builds it on first use (native_build, into ~/.cache/runtime-runner).

The batch-invariant linear (`batch_invariant_linear`), the linear and the embedding over a weight
kept quantized (`quantized_linear`, `quantized_embedding`, over `quantized_tensor`), oneDNN's packed
linear (`packed_linear`), the fused elementwise ops (`cpu_fused_ops`), the C entry every projection
kind exports (`native_projection`), a group of projections run side by side through those entries
(`projection_stack`); `runtime_runner.models.native_step` runs a Llama-family forward in one call
through those entries.
"""
