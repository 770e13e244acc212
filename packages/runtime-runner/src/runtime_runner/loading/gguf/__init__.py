"""GGUF checkpoints: the container read from its header, every count, length and offset it states
checked against the file (`format`), its tensors under the Hugging Face names the loader asks for
(`names`, `file`), its decoder shape (`arch`) held against the tensors it holds (`agreement`), its
tensors as the loader reads them, quantized blocks kept (`checkpoint`), and its tokenizer written
as Hugging Face files (`tokenizer`, once per file by `tokenizer_cache`).
"""
