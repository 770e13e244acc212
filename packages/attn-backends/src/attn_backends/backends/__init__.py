"""The attention backends a runner holds (torch_native, cpu_paged, triton, flashinfer), and the
containers that put two halves or a wrapped backend behind one `AttentionBackend`."""
