"""Whether this process can run AMX tile products: the CPU has them and Linux grants their state.

The kernels ask Linux themselves (include/native_build/amx_tiles.h) and fall back to their
vector paths when refused. Their tests ask here, the same way, so that on a machine that has the
tiles a tile path that went missing fails its tests rather than skipping them.
"""

from __future__ import annotations

import ctypes
import functools
import platform
from pathlib import Path

_SYS_ARCH_PRCTL = 158  # x86-64
_ARCH_REQ_XCOMP_PERM = 0x1023
_XFEATURE_XTILEDATA = 18


@functools.cache
def amx_tiles_available() -> bool:
    """True where /proc/cpuinfo lists amx_bf16 and Linux grants this process the tile state."""
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return False
    try:
        flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "")
    except OSError:
        return False
    if "amx_bf16" not in flags.split():
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.syscall(_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA)) == 0
