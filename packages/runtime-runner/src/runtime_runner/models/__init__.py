"""The decoders the runner serves, and their layers.

The Llama family (`decoder`, with the target entry classes; `drafts`) and the Gated-DeltaNet
hybrids (`hybrid/`), the layers they share (`rope`, `norm`, `mlp_activation`), the projection each
weight matrix runs (`matrix_projection`), the registry from a checkpoint's architecture to its
entry class (`architectures`), loading the served model through it (`target_loading`), and the
compiled one-request decode step (`compiled_decode`).
"""
