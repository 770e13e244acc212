"""Resident memory of the default model's weights as a runner holds them: served from its bundled
GGUF file (Q4_1/Q8_0 blocks kept), from its bf16 conversion, and that conversion with
--quantization int8.

Each variant runs in a fresh process: its resident memory (VmRSS, after handing freed heap back
with malloc_trim) is read before the runner is built and again after; the KV pool's bytes (a small
1024-token pool) are subtracted, so the figure is the weights (with the kernels' packed copies; a
bf16 checkpoint's matrices stay mapped from its safetensors file, resident as they were read),
norms and rotary tables.

    uv run python tools/bench_weights_memory.py                  # the default model's three variants
    uv run python tools/bench_weights_memory.py FILE.gguf DIR ...  # these models instead, beside their size on disk
"""

from __future__ import annotations

import ctypes
import gc
import subprocess
import sys
from pathlib import Path


def resident_mb() -> float:
    """This process's resident memory, MB, once the heap's free memory went back to the system."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status (Linux only)")


def size_on_disk_mb(path: Path) -> float:
    """The file's size, or the sum of a directory's weight files (safetensors), MB."""
    files = [path] if path.is_file() else list(path.glob("*.safetensors"))
    return sum(f.stat().st_size for f in files) / 2**20


def measure(variant: str) -> None:
    """Build the runner of `variant` (gguf, bf16, int8, or a model's path) and print its weights' resident MB."""
    from attn_backends import build_attention_pair
    from config_bags import publish
    from config_bags.server import Bags, MemoryBag, ModelBag, ScheduleBag
    from runtime_runner.loading.default_model import bundled_gguf, ensure_default_model
    from runtime_runner.runner import ModelRunner

    named = {"gguf": bundled_gguf, "bf16": ensure_default_model, "int8": ensure_default_model}
    path = str(named[variant]()) if variant in named else variant
    pool = 1024
    bags = Bags(
        model=ModelBag(model_path=path, quantization="int8" if variant == "int8" else None),
        memory=MemoryBag(max_total_tokens=pool),
        schedule=ScheduleBag(chunked_prefill_size=pool, max_prefill_tokens=pool),
    )
    publish(bags, role="standalone")
    before = resident_mb()
    runner = ModelRunner(build_attention_pair)
    pool_mb = sum(t.nbytes for t in (*runner.pool.k, *runner.pool.v)) / 2**20
    on_disk = "" if variant in named else f" (on disk {size_on_disk_mb(Path(path)):.0f} MB)"
    print(
        f"{variant:5s} activations {str(runner.model.dtype).removeprefix('torch.'):8s} "
        f"weights {resident_mb() - before - pool_mb:6.0f} MB{on_disk} (pool {pool_mb:.0f} MB apart)"
    )


def main() -> None:
    """Each variant in its own process."""
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        measure(sys.argv[2])
        return
    for variant in sys.argv[1:] or ("gguf", "bf16", "int8"):
        subprocess.run([sys.executable, __file__, "--one", variant], check=True)


if __name__ == "__main__":
    main()
