// Whether this process may use AMX tiles. Linux hands out the tile registers' state only to a
// process that asks for it (arch_prctl, once per process); a kernel that cannot have it keeps its
// vector path. Shared by every kernel that runs tile products (include <native_build/amx_permission.h>).
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

namespace native_build {

inline bool amx_permitted() {
    constexpr long kRequestPermission = 0x1023;  // ARCH_REQ_XCOMP_PERM
    constexpr long kTileData = 18;               // XFEATURE_XTILEDATA
    static const bool permitted = syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
    return permitted;
}

}  // namespace native_build
