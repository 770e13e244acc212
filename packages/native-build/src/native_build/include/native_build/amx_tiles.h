// Whether this process may use AMX tiles, and the tiles' configuration. Linux hands out the tile registers' state only to a
// process that asks for it (arch_prctl, once per process); a kernel that cannot have it keeps its
// vector path. Shared by every kernel that runs tile products (include <native_build/amx_tiles.h>).
#pragma once

#include <cstdint>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace native_build {

inline bool amx_permitted() {
    constexpr long kRequestPermission = 0x1023;  // ARCH_REQ_XCOMP_PERM
    constexpr long kTileData = 18;               // XFEATURE_XTILEDATA
    static const bool permitted = syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
    return permitted;
}

// The tile configuration ldtilecfg reads (palette 1): per tile register, its rows and its bytes per row.
struct alignas(64) TileConfig {
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};

#if defined(__AMX_TILE__)
// ldtilecfg of `c`. GCC 12 does not count the instruction as reading all 64 bytes: a config built
// field by field just before it had its rows and colsb stores dropped as dead (ldtilecfg then
// faults), so a compiler barrier that reads the whole struct comes first.
inline void load_tile_config(const TileConfig& c) {
    asm volatile("" : : "m"(c) : "memory");
    _tile_loadconfig(&c);
}
#endif

}  // namespace native_build
