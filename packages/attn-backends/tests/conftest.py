"""The paged-attention reference (paged_reference.py) lives beside the tests.

Without a GPU the triton backend's kernels run in Triton's interpreter, which is chosen when
`@triton.jit` is applied (when triton_kernels is imported): so TRITON_INTERPRET is set here, before
any test module imports it. With a GPU the kernels compile natively.
"""

import os
import sys
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

sys.path.insert(0, str(Path(__file__).parent))
