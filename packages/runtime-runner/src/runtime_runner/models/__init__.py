"""The decoders the runner serves, and their layers.

The Llama family (`decoder`, with the target entry classes; `drafts`) and the Gated-DeltaNet
hybrids (`hybrid/`), the layers they share (`rope`, `norm`, `mlp_activation`), the attention
callables a runner hands them (`layer_attention`), the projection each weight matrix runs
(`matrix_projection`), the registry from a checkpoint's architecture to its entry class
(`architectures`), which checkpoint a runner loads and loading it through that registry, as the
served target or a draft (`model_loading`), and the compiled one-request decode step
(`compiled_decode`).
"""
