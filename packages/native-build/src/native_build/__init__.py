"""Build a package's C++ source into a shared library on first use, cached per machine.

The runtime packages ship small C++ kernels (attn-backends' paged attention, the runner's fused
elementwise ops) as source and compile them with the system's compiler the first time a process
needs them, as torch.compile's CPU backend does. This package is that one build step: stdlib only,
no torch, no other package of this repository.
"""

from native_build.amx import amx_tiles_available
from native_build.cpu_flags import cpu_flags
from native_build.cpu_tiers import TIERS, CpuTier, detected_tier, tier_flags, tier_runs_here
from native_build.library import NativeBuildError, build_library, cache_dir_of, default_compiler, load_library

__all__ = [
    "TIERS",
    "CpuTier",
    "NativeBuildError",
    "amx_tiles_available",
    "build_library",
    "cache_dir_of",
    "cpu_flags",
    "default_compiler",
    "detected_tier",
    "load_library",
    "tier_flags",
    "tier_runs_here",
]
