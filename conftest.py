"""Environment every test in the workspace runs under: no hub, Triton kernels interpreted on
the CPU, flashinfer's workspace in a temp dir. Set before any test module imports them."""

import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("FLASHINFER_WORKSPACE_BASE", tempfile.mkdtemp(prefix="flashinfer-"))
