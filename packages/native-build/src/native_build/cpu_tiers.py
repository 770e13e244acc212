"""The x86-64 instruction tiers a kernel can be built for, which of them this CPU runs, and the
compiler flags that build for exactly one of them.

A tier is a set of instructions a kernel's source tests for at compile time (`__AVX512VNNI__`,
`__AMX_INT8__`, ...). Building the same source with a lower tier's flags on a higher CPU gives the
code a lower CPU runs, so one machine with AMX builds and tests all three tiers:
- avx2: AVX2, FMA and F16C (every x86-64 CPU of the last decade; the integer kernels' maddubs);
- avx512: AVX-512 F/BW/DQ/VL with VNNI (vpdpbusd; Intel Ice Lake and later, AMD Zen 4 and later);
- amx: avx512 and AMX-INT8 tiles (tdpbusd; Intel Sapphire Rapids and later), where Linux grants
  this process the tile state.
"""

from __future__ import annotations

import functools
from typing import Literal

from native_build.amx import tile_state_granted
from native_build.cpu_flags import cpu_flags

CpuTier = Literal["avx2", "avx512", "amx"]
TIERS: tuple[CpuTier, ...] = ("avx2", "avx512", "amx")

# What /proc/cpuinfo must list for each tier (each tier also needs the ones before it).
_FLAGS_OF_TIER: dict[CpuTier, tuple[str, ...]] = {
    "avx2": ("avx2", "fma", "f16c"),
    "avx512": ("avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni"),
    "amx": ("amx_tile", "amx_int8"),
}

# Flags appended after -march=native that take away what a tier does not have: the code built
# is the code a CPU of that tier would build. GCC's -mno-avx512f takes every AVX-512 subset with it.
_WITHOUT_AMX = ("-mno-amx-tile", "-mno-amx-int8", "-mno-amx-bf16")
_TIER_FLAGS: dict[CpuTier, tuple[str, ...]] = {
    "avx2": ("-march=native", "-mno-avx512f", "-mno-avxvnni", *_WITHOUT_AMX),
    "avx512": ("-march=native", *_WITHOUT_AMX),
    "amx": ("-march=native",),
}


@functools.cache
def detected_tier() -> CpuTier | None:
    """The highest tier this process can run (amx only where Linux grants the tile state), or
    None for a CPU without AVX2."""
    flags = cpu_flags()
    found: CpuTier | None = None
    for tier in TIERS:
        if not all(flag in flags for flag in _FLAGS_OF_TIER[tier]):
            break
        if tier == "amx" and not tile_state_granted():
            break
        found = tier
    return found


def tier_runs_here(tier: CpuTier) -> bool:
    """Whether this CPU (and this process, for amx) runs code built for `tier`."""
    top = detected_tier()
    return top is not None and TIERS.index(tier) <= TIERS.index(top)


def tier_flags(tier: CpuTier) -> tuple[str, ...]:
    """Compiler flags (GCC) that build for `tier` on this CPU, to use in place of -march=native."""
    return _TIER_FLAGS[tier]
