"""GGUF checkpoints: the container read from its header (`format`), its tensors under the Hugging
Face names the loader asks for (`names`, `file`), its decoder shape (`arch`), its tensors as the
loader reads them, quantized blocks kept (`checkpoint`), and its tokenizer written as Hugging Face
files (`tokenizer`, once per file by `tokenizer_cache`).
"""
