"""Whether this process can run AMX tile products: the CPU has them and Linux grants their state.

The kernels ask Linux themselves (include/native_build/amx_tiles.h) and fall back to their
vector paths when refused. Their tests ask here, the same way, so that on a machine that has the
tiles a tile path that went missing fails its tests rather than skipping them.
"""

from __future__ import annotations

import ctypes
import functools
import platform

from native_build.cpu_flags import cpu_flags

_SYS_ARCH_PRCTL = 158  # x86-64
_ARCH_REQ_XCOMP_PERM = 0x1023
_XFEATURE_XTILEDATA = 18


@functools.cache
def amx_tiles_available() -> bool:
    """True where /proc/cpuinfo lists amx_bf16 and Linux grants this process the tile state."""
    return "amx_bf16" in cpu_flags() and tile_state_granted()


@functools.cache
def tile_state_granted() -> bool:
    """Whether Linux grants this process the AMX tile state (asked once; False off Linux x86-64)."""
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.syscall(_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA)) == 0
