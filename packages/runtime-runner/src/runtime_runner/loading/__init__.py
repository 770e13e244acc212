"""Checkpoints and the weights read from them.

What a model path names (`checkpoint_source`: a Hugging Face directory read by `checkpoint`, or a
GGUF file, `gguf/`), its decoder shape (`arch_config`, `hybrid_config`), every tensor a family's
checkpoint holds (`checkpoint_layout`, `hybrid_layout`, and the names they share, `tensor_names`),
the decisions the loader asks an entry class for (`loader_hooks`), the weights laid out for the
forward (`weight_reader`, `weight_matrix`, `decoder_weights`, `hybrid_weights`, `int8_weights`),
where quantized weights run (`quantization_support`), and the bundled default model
(`default_model`).

Nothing here imports a model class: the entry classes answer the loader's hooks.
"""
