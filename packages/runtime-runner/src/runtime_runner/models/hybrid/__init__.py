"""The Gated-DeltaNet hybrids (Qwen3-Next, Qwen3.5 text): the decoder and its entry classes
(`decoder`), their drafts (`drafts`), and Qwen3-Next's sparse mixture-of-experts MLP (`sparse_moe`).

What their checkpoints hold and how their weights are laid out are read in runtime_runner.loading
(`hybrid_config`, `hybrid_layout`, `hybrid_weights`), beside the Llama family's.
"""
