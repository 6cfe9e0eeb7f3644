// CPU stand-ins for the TMA and mbarrier instructions of attention_wgmma.cu's attention_wgmma_tma_forward (included
// after wgmma_emu.h when there is no __CUDA_ARCH__), and for the driver's cuTensorMapEncodeTiled that builds its map.
//
// The tensor map. The real CUtensorMap is 128 opaque bytes; the stand-in encoder stores its arguments in them, in this
// layout (EmuTensorMap, little-endian, the rest zero): global address, dims[3] (innermost first), strides[3] in bytes
// (strides[0] = the element size, strides[1..] = the encoder's globalStrides), box[3], rank, element bytes, swizzle
// (CUtensorMapSwizzle's value), oob fill. It checks what the driver documents for cuTensorMapEncodeTiled (16-byte
// aligned address and strides, box ≤ 256 a dimension, inner box bytes a multiple of 16 and, with the 128-byte
// swizzle, exactly 128 — the only inner extent emulated with it), and takes bf16, rank ≤ 3, element strides 1, no
// interleave; anything else returns CUDA_ERROR_INVALID_VALUE (1).
//
// The copy (cp.async.bulk.tensor.3d … mbarrier::complete_tx::bytes, PTX ISA 9.7.9.25): box element (i0, i1, i2) is
// global element (c0 + i0, c1 + i1, c2 + i2), zero where any coordinate is outside dims (the hardware's zero fill of
// out-of-bounds boxes); it goes to shared byte dst + ((i1 + box1·i2)·box0 + i0)·elem, then the swizzle on the
// address (128-byte: bits 4–6 ^= bits 7–9, as wgmma_emu.h reads it), dst 128-byte aligned. All box bytes count as
// complete_tx on the barrier, out-of-bounds ones included.
//
// The mbarrier (PTX ISA 9.7.13.15): a phase completes when its pending arrival count reaches 0 and its transaction
// count (raised by expect_tx, lowered by complete_tx; it may go negative in between) is 0; then the next phase
// starts expecting the init count again. try_wait.parity p is true when the phase of parity p has completed, that is
// when the current phase's parity is not p (so on a fresh barrier parity 1 passes at once). The emulation fails where
// the hardware would be racy, deterministically rather than by chance:
//   - a copy lands (its bytes reach shared memory) only when its barrier's phase completes; from its issue until
//     then its destination reads as NaN (0xFF bytes);
//   - every shared-memory element a wgmma reads (wgmma_emu.h's emu_on_smem_read) that a TMA copy wrote must have been
//     written by a copy whose barrier phase the reading thread has seen complete in a try_wait: a wrong parity or a
//     missing expect_tx (a phase that completes before its bytes) is "read before its copy landed";
//   - a copy may overwrite bytes that a thread has read only once the issuing thread has seen (through completed
//     phases, transitively: vector clocks, joined at each arrival and acquired by each successful try_wait) an
//     arrival of that reader made after its read: a producer not waiting for the consumers' release fails;
//   - arrivals beyond the expected count, and a wait that sees no progress anywhere for EMU_TMA_STALL_S seconds (a
//     deadlock, e.g. a wrong parity that waits for a phase nobody will complete), abort.
// All of it under one mutex; the per-chunk read records are relaxed atomics written by their reader alone.
// The state is reset at the first mbarrier.init of each block.
#pragma once
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#define __grid_constant__

struct alignas(128) CUtensorMap {  // (as CUDA 13 declares it)
    unsigned long long opaque[16];
};
typedef int CUresult;
typedef uint32_t cuuint32_t;
typedef uint64_t cuuint64_t;
typedef int CUtensorMapDataType, CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
        CUtensorMapFloatOOBfill;
constexpr int CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9, CU_TENSOR_MAP_INTERLEAVE_NONE = 0,
              CU_TENSOR_MAP_SWIZZLE_NONE = 0, CU_TENSOR_MAP_SWIZZLE_128B = 3, CU_TENSOR_MAP_L2_PROMOTION_L2_128B = 2,
              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0;

// The 128 bytes of an emulated CUtensorMap (see above).
struct EmuTensorMap {
    uint64_t address, dims[3], strides[3];
    uint32_t box[3], rank, elem, swizzle, oob;
};
static_assert(sizeof(EmuTensorMap) <= sizeof(CUtensorMap), "the emulated map must fit the real one's 128 bytes");

inline CUresult cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
        const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box, const cuuint32_t* elementStrides,
        CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion,
        CUtensorMapFloatOOBfill oob) {
    if (type != CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 || rank < 1 || rank > 3 || interleave != CU_TENSOR_MAP_INTERLEAVE_NONE
            || (swizzle != CU_TENSOR_MAP_SWIZZLE_NONE && swizzle != CU_TENSOR_MAP_SWIZZLE_128B)
            || (uintptr_t) address % 16 != 0)
        return 1;
    EmuTensorMap m{};
    m.address = (uint64_t) (uintptr_t) address;
    m.rank = rank;
    m.elem = 2;
    m.swizzle = (uint32_t) swizzle;
    m.oob = (uint32_t) oob;
    m.strides[0] = m.elem;
    for (uint32_t d = 0; d < 3; d++) {
        m.dims[d] = d < rank ? dims[d] : 1;
        m.box[d] = d < rank ? box[d] : 1;
        if (d > 0) m.strides[d] = d < rank ? strides[d - 1] : m.strides[d - 1] * m.dims[d - 1];
        if (m.dims[d] < 1 || m.box[d] < 1 || m.box[d] > 256 || (d < rank && elementStrides[d] != 1)) return 1;
        if (d > 0 && d < rank && m.strides[d] % 16 != 0) return 1;
    }
    uint32_t inner = m.box[0] * m.elem;
    if (inner % 16 != 0 || (swizzle == CU_TENSOR_MAP_SWIZZLE_128B && inner != 128)) return 1;
    memset(map, 0, sizeof *map);
    memcpy(map, &m, sizeof m);
    return 0;
}

#ifndef EMU_TMA_STALL_S  // (the mutation tests, whose deadlocks are expected, take a shorter one)
#define EMU_TMA_STALL_S 20
#endif
#define EMU_TMA_STR2(x) #x
#define EMU_TMA_STR(x) EMU_TMA_STR2(x)

// A copy issued but not landed: the bytes of [dst, dst + bytes.size()) in shared memory, already swizzled.
struct EmuLanding {
    uint32_t dst;
    std::vector<unsigned char> bytes;
};

struct EmuMbar {
    int index, expected, pending;
    long tx;
    uint32_t completed;              // phases completed so far: the current phase's parity is completed & 1
    std::vector<uint32_t> clock;     // the vector clock the current phase's arrivals released
    std::vector<uint32_t> released;  // the last completed phase's
    std::vector<EmuLanding> landing;
};

// The state of the block being run.
struct EmuTma {
    std::mutex mu;
    uint3e block{~0u, ~0u, ~0u};
    int threads = 0;
    std::map<uint32_t, EmuMbar> bars;
    std::vector<std::vector<uint32_t>> vc;  // vc[t][u]: how many arrivals of thread u thread t has seen (own: made)
    std::vector<uint32_t> observed;         // observed[t·32 + barrier]: the completed phases thread t has seen
    std::vector<std::atomic<uint64_t>> landed;    // per 16-byte chunk: (barrier + 1) << 32 | completion it lands at
    std::vector<std::atomic<uint32_t>> read_at;   // per chunk and thread: vc[t][t] + 1 at its last read, 0: none
    std::atomic<long long> progress{0};     // steady-clock ns of the last arrival, copy or completion
};
inline EmuTma emu_tma;

inline long long emu_now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count();
}

inline void emu_tma_on_read(uint32_t a) {
    uint32_t chunk = a >> 4;
    uint64_t lb = emu_tma.landed[chunk].load(std::memory_order_relaxed);
    if (lb == 0) return;  // not written by a copy of this block
    uint32_t bar = (uint32_t) (lb >> 32) - 1, n = (uint32_t) lb;
    if (emu_tma.observed[emu_tid * 32 + bar] < n)
        emu_fail("wgmma reads shared memory before the mbarrier phase its TMA copy completes was waited for", a);
    emu_tma.read_at[(size_t) chunk * emu_tma.threads + emu_tid].store(emu_tma.vc[emu_tid][emu_tid] + 1,
                                                                      std::memory_order_relaxed);
}

// The block's state, reset when a new block starts (called under the mutex).
inline void emu_tma_enter_block() {
    if (blockIdx.x == emu_tma.block.x && blockIdx.y == emu_tma.block.y && blockIdx.z == emu_tma.block.z) return;
    emu_tma.block = blockIdx;
    emu_tma.threads = (int) (blockDim.x * blockDim.y * blockDim.z);
    emu_tma.bars.clear();
    emu_tma.vc.assign(emu_tma.threads, std::vector<uint32_t>(emu_tma.threads, 0));
    emu_tma.observed.assign((size_t) emu_tma.threads * 32, 0);
    size_t chunks = (emu_smem_hi + 15) / 16;
    emu_tma.landed = std::vector<std::atomic<uint64_t>>(chunks);
    emu_tma.read_at = std::vector<std::atomic<uint32_t>>(chunks * emu_tma.threads);
    emu_tma.progress = emu_now_ns();
    emu_on_smem_read = emu_tma_on_read;
}

inline EmuMbar& emu_mbar(uint64_t* bar) {
    uint32_t a = aw_smem_addr(bar);
    emu_smem_at(a, 8);
    auto it = emu_tma.bars.find(a);
    if (it == emu_tma.bars.end()) emu_fail("mbarrier used before mbarrier.init", a);
    return it->second;
}

inline void emu_join(std::vector<uint32_t>& into, const std::vector<uint32_t>& from) {
    for (size_t i = 0; i < into.size(); i++) into[i] = std::max(into[i], from[i]);
}

// Completes the current phase if nothing is pending: the copies land, the next phase begins.
inline void emu_mbar_try_complete(EmuMbar& m) {
    if (m.pending != 0 || m.tx != 0) return;
    for (auto& l : m.landing) memcpy(emu_smem_at(l.dst, (uint32_t) l.bytes.size()), l.bytes.data(), l.bytes.size());
    m.landing.clear();
    m.released = m.clock;
    std::fill(m.clock.begin(), m.clock.end(), 0);
    m.completed++;
    m.pending = m.expected;
    emu_tma.progress = emu_now_ns();
}

inline void aw_mbar_init(uint64_t* bar, int count) {
    std::lock_guard<std::mutex> g(emu_tma.mu);
    emu_tma_enter_block();
    uint32_t a = aw_smem_addr(bar);
    if (a % 8 != 0) emu_fail("mbarrier not 8-byte aligned", a);
    if (count < 1) emu_fail("mbarrier.init count < 1", (unsigned) count);
    memset(emu_smem_at(a, 8), 0, 8);
    if (emu_tma.bars.size() >= 32 && !emu_tma.bars.count(a)) emu_fail("more than 32 mbarriers (emulation limit)", a);
    int index = emu_tma.bars.count(a) ? emu_tma.bars[a].index : (int) emu_tma.bars.size();
    emu_tma.bars[a] = EmuMbar{index, count, count, 0, 0, std::vector<uint32_t>(emu_tma.threads, 0),
                              std::vector<uint32_t>(emu_tma.threads, 0), {}};
}
inline void aw_fence_mbar_init() {}

inline void emu_mbar_arrive(uint64_t* bar, long tx) {
    std::lock_guard<std::mutex> g(emu_tma.mu);
    EmuMbar& m = emu_mbar(bar);
    m.tx += tx;
    auto& mine = emu_tma.vc[emu_tid];
    mine[emu_tid]++;
    emu_join(m.clock, mine);
    if (--m.pending < 0) emu_fail("mbarrier: more arrivals than its phase expects", aw_smem_addr(bar));
    emu_tma.progress = emu_now_ns();
    emu_mbar_try_complete(m);
}
inline void aw_mbar_arrive(uint64_t* bar) { emu_mbar_arrive(bar, 0); }
inline void aw_mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) { emu_mbar_arrive(bar, bytes); }

inline bool aw_mbar_try_wait(uint64_t* bar, int parity) {
    {
        std::lock_guard<std::mutex> g(emu_tma.mu);
        EmuMbar& m = emu_mbar(bar);
        if ((int) (m.completed & 1) != (parity & 1)) {
            emu_tma.observed[emu_tid * 32 + m.index] = m.completed;
            emu_join(emu_tma.vc[emu_tid], m.released);
            return true;
        }
    }
    if (emu_now_ns() - emu_tma.progress.load() > EMU_TMA_STALL_S * 1000000000LL)
        emu_fail("mbarrier wait: no progress anywhere for " EMU_TMA_STR(EMU_TMA_STALL_S) " s (a deadlock)",
                 aw_smem_addr(bar));
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    return false;
}

inline void aw_tma_load_3d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2) {
    std::lock_guard<std::mutex> g(emu_tma.mu);
    EmuTensorMap tm;
    memcpy(&tm, map, sizeof tm);
    EmuMbar& m = emu_mbar(bar);
    uint32_t d = aw_smem_addr(dst), row = tm.box[0] * tm.elem, bytes = row * tm.box[1] * tm.box[2];
    if (d % 128 != 0) emu_fail("TMA destination not 128-byte aligned", d);
    emu_smem_at(d, bytes);
    int me = emu_tid, n = emu_tma.threads;
    for (uint32_t c = d / 16; c < (d + bytes) / 16; c++) {
        for (int r = 0; r < n; r++) {
            uint32_t at = emu_tma.read_at[(size_t) c * n + r].load(std::memory_order_relaxed);
            if (at != 0 && emu_tma.vc[me][r] < at) {
                fprintf(stderr, "wgmma emulation: reader thread %d had not released the bytes\n", r);
                emu_fail("TMA overwrites shared memory a thread read before the issuer saw its release", c * 16);
            }
            emu_tma.read_at[(size_t) c * n + r].store(0, std::memory_order_relaxed);
        }
        emu_tma.landed[c].store((uint64_t) (m.index + 1) << 32 | (m.completed + 1), std::memory_order_relaxed);
    }
    EmuLanding l{d, std::vector<unsigned char>(bytes)};
    int coord[3] = {c0, c1, c2};
    for (uint32_t i2 = 0; i2 < tm.box[2]; i2++)
        for (uint32_t i1 = 0; i1 < tm.box[1]; i1++)
            for (uint32_t i0 = 0; i0 < tm.box[0]; i0++) {
                uint32_t i[3] = {i0, i1, i2};
                bool in = true;
                uint64_t src = tm.address;
                for (int k = 0; k < 3; k++) {
                    long long g = (long long) coord[k] + i[k];
                    in = in && g >= 0 && g < (long long) tm.dims[k];
                    src += (uint64_t) g * tm.strides[k];
                }
                uint32_t a = d + (i1 + tm.box[1] * i2) * row + i0 * tm.elem;
                if (tm.swizzle == CU_TENSOR_MAP_SWIZZLE_128B) a ^= ((a >> 7) & 7) << 4;
                unsigned char* to = l.bytes.data() + (a - d);
                if (in) memcpy(to, (const void*) (uintptr_t) src, tm.elem);
                else memset(to, 0, tm.elem);
            }
    memset(emu_smem_at(d, bytes), 0xFF, bytes);  // in flight: NaN until the phase completes
    m.landing.push_back(std::move(l));
    m.tx -= bytes;
    emu_tma.progress = emu_now_ns();
    emu_mbar_try_complete(m);
}

// setmaxnreg: a warpgroup-wide (.sync.aligned) register reallocation; nothing to do on the CPU.
template <int N>
inline void aw_setmaxnreg_dec() { emu_syncwarpgroup(); }
template <int N>
inline void aw_setmaxnreg_inc() { emu_syncwarpgroup(); }
