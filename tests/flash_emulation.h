// A CPU emulation of the CUDA features src/cuda/flash_attn.cu, flash_attn32.cu,
// flash_attn_tf32.cu and layernorm_rows.cu use, force-included (g++ -include) when such a file
// is built as plain C++ with -DZB_FLASH_EMULATE for tests/test_flash_emulated.c,
// test_flash32_emulated.c, test_flash_tf32_emulated.c and test_layernorm_rows_emulated.c. Each CUDA thread is a ucontext fiber with its own stack; a launch
// runs the blocks one after another, the block's fibers round-robin on one OS thread.
// Warp-wide operations (mma.m16n8k16, mma.m16n8k8 .tf32, ldmatrix.x2.trans, shuffles) and
// __syncthreads are rendezvous: each lane posts its operands and yields until the last lane of its warp (block)
// arrives and computes every lane's result, so a kernel that calls them divergently hangs here
// as it would on a GPU (the scheduler reports it instead). Fragment layouts are the PTX ISA's.
// cp.async copies are deferred until a cp.async.wait_group covers their group (the latest a GPU
// may complete them), so a missing commit or wait leaves stale shared memory, and copies never
// waited for are reported as an error; __shared__ arrays are function statics, shared by the
// fibers of the one block that runs at a time, and dynamic shared memory one buffer per launch,
// NaN bytes at the start of every block (a read before a write shows).
#ifndef ZBPP_TESTS_FLASH_EMULATION_H
#define ZBPP_TESTS_FLASH_EMULATION_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <cuda_runtime_api.h> /* dim3, uint3, uint4, cudaStream_t (host headers only) */

#include "util/bf16.h"

#undef __global__
#undef __device__
#undef __shared__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __shared__ static
#define __forceinline__ inline
#define __launch_bounds__(...)

// the kernels' entry points under other names: the test links these next to libzbpp's
#define zb_cuk_flash_supported zb_flash_emu_supported
#define zb_cuk_flash_forward zb_flash_emu_forward
#define zb_cuk_flash_backward_scratch_bytes zb_flash_emu_backward_scratch_bytes
#define zb_cuk_flash_backward zb_flash_emu_backward
#define zb_cuk_flash_backward_marked zb_flash_emu_backward_marked
#define zb_cuk_flash32_supported zb_flash32_emu_supported
#define zb_cuk_flash32_forward zb_flash32_emu_forward
#define zb_cuk_flash32_backward_scratch_bytes zb_flash32_emu_backward_scratch_bytes
#define zb_cuk_flash32_backward zb_flash32_emu_backward
#define zb_cuk_flash_tf32_supported zb_flash_tf32_emu_supported
#define zb_cuk_flash_tf32_forward zb_flash_tf32_emu_forward
#define zb_cuk_flash_tf32_backward_scratch_bytes zb_flash_tf32_emu_backward_scratch_bytes
#define zb_cuk_flash_tf32_backward zb_flash_tf32_emu_backward
#define zb_cuk_flash_3xtf32_forward zb_flash_3xtf32_emu_forward
#define zb_cuk_flash_3xtf32_backward zb_flash_3xtf32_emu_backward
#define zb_cuk_layernorm_rows_forward zb_layernorm_rows_emu_forward
#define zb_cuk_layernorm_rows_backward_input zb_layernorm_rows_emu_backward_input

namespace flash_emu {

constexpr size_t kStack = 256 * 1024;
constexpr int kMaxThreads = 1024;
constexpr size_t kMaxDynSmem = 227 * 1024;  // an sm_90 block's shared memory opt-in limit

struct Lane {  // one lane's operands and results of the current warp-wide operation
    uint32_t a[4], b[2];
    float c[4], d[4];
    const uint16_t *row;  // ldmatrix: this lane's row address
    float f, g;           // shuffle in / out
    double df, dg;        // a double's shuffle in / out
};

struct Copy {  // one pending 16-byte cp.async
    uint16_t *dst;
    const uint16_t *src;
    bool in;
    unsigned group;
};

constexpr int kMaxCopies = 64;

struct Thread {
    ucontext_t ctx;
    char *stack;
    uint3 tid;
    bool done;
    Copy copy[kMaxCopies];
    int ncopies;
    unsigned committed;  // groups committed so far; later copies belong to the open group
};

struct Group {  // a warp or the block: arrival count and generation of the current rendezvous
    int arrived;
    unsigned gen;
};

struct State {
    dim3 grid, block;
    uint3 bid;
    int nthreads, cur;
    Thread th[kMaxThreads];
    Lane lane[kMaxThreads];
    Group warp[kMaxThreads / 32], blk;
    ucontext_t sched;
    void (*body)(void *);
    void *arg;
    char *dyn;               // dynamic shared memory, room for dyn_cap bytes
    size_t dyn_cap;
    unsigned long progress;  // arrivals and finished threads (a round without any: deadlock)
    int error;               // 1: a launch the runtime would refuse; 2: copies never waited for
};

inline State &st()
{
    static State s;
    return s;
}

inline uint3 thread_idx() { return st().th[st().cur].tid; }

inline uint3 u3(unsigned x, unsigned y, unsigned z)
{
    uint3 u;
    u.x = x, u.y = y, u.z = z;
    return u;
}

inline void yield()
{
    State &s = st();
    swapcontext(&s.th[s.cur].ctx, &s.sched);
}

// Wait at group G (size n) until everyone arrives; the last arrival runs op(first lane index).
template <typename Op> inline void rendezvous(Group &G, int n, int first, Op op)
{
    unsigned gen = G.gen;
    st().progress++;
    if (++G.arrived == n) {
        op(first);
        G.arrived = 0;
        G.gen++;
        return;
    }
    while (G.gen == gen)
        yield();
}

inline int lane_id() { return st().cur & 31; }

template <typename Op> inline void warp_op(Op op)
{
    State &s = st();
    int w = s.cur >> 5;
    rendezvous(s.warp[w], 32, w * 32, op);
}

inline uint16_t bf(uint32_t reg, int hi) { return (uint16_t)(hi ? reg >> 16 : reg & 0xffffu); }

// D = A·B + C on the fragments of the 32 lanes from `first` (layouts: flash_attn.cu's table)
inline void mma_all(int first)
{
    Lane *L = st().lane + first;
    float A[16][16], B[16][8], C[16][8];
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3;
        for (int i = 0; i < 2; i++) {
            A[g][2 * t + i] = zb_bf16_to_f32(bf(L[l].a[0], i));
            A[g + 8][2 * t + i] = zb_bf16_to_f32(bf(L[l].a[1], i));
            A[g][2 * t + 8 + i] = zb_bf16_to_f32(bf(L[l].a[2], i));
            A[g + 8][2 * t + 8 + i] = zb_bf16_to_f32(bf(L[l].a[3], i));
            B[2 * t + i][g] = zb_bf16_to_f32(bf(L[l].b[0], i));
            B[2 * t + 8 + i][g] = zb_bf16_to_f32(bf(L[l].b[1], i));
            C[g][2 * t + i] = L[l].c[i];
            C[g + 8][2 * t + i] = L[l].c[2 + i];
        }
    }
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3;
        for (int i = 0; i < 4; i++) {
            int r = g + (i >> 1) * 8, n = 2 * t + (i & 1);
            float acc = C[r][n];
            for (int k = 0; k < 16; k++)
                acc += A[r][k] * B[k][n];
            L[l].d[i] = acc;
        }
    }
}

// D = A·B + C for mma.m16n8k8 with TF32 operands (flash_attn_tf32.cu's table): the registers'
// fp32 bits with the low 13 mantissa bits ignored, as the tensor core reads them; products
// and sums in fp32.
inline float tf32_value(uint32_t reg)
{
    reg &= 0xffffe000u;
    float f;
    memcpy(&f, &reg, sizeof f);
    return f;
}

inline void mma_tf32_all(int first)
{
    Lane *L = st().lane + first;
    float A[16][8], B[8][8], C[16][8];
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3;
        A[g][t] = tf32_value(L[l].a[0]);
        A[g + 8][t] = tf32_value(L[l].a[1]);
        A[g][t + 4] = tf32_value(L[l].a[2]);
        A[g + 8][t + 4] = tf32_value(L[l].a[3]);
        B[t][g] = tf32_value(L[l].b[0]);
        B[t + 4][g] = tf32_value(L[l].b[1]);
        for (int i = 0; i < 2; i++) {
            C[g][2 * t + i] = L[l].c[i];
            C[g + 8][2 * t + i] = L[l].c[2 + i];
        }
    }
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3;
        for (int i = 0; i < 4; i++) {
            int r = g + (i >> 1) * 8, n = 2 * t + (i & 1);
            float acc = C[r][n];
            for (int k = 0; k < 8; k++)
                acc += A[r][k] * B[k][n];
            L[l].d[i] = acc;
        }
    }
}

// ldmatrix.x2.trans: lanes 0-7 name the rows of matrix 0, lanes 8-15 those of matrix 1 (8 b16
// each); lane l receives, per matrix, the elements (rows 2(l%4), 2(l%4)+1; column l/4).
inline void ldsm_trans_all(int first)
{
    Lane *L = st().lane + first;
    uint32_t out[32][2];
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3;
        for (int m = 0; m < 2; m++) {
            const uint16_t *r0 = L[m * 8 + 2 * t].row, *r1 = L[m * 8 + 2 * t + 1].row;
            out[l][m] = (uint32_t)r0[g] | (uint32_t)r1[g] << 16;
        }
    }
    for (int l = 0; l < 32; l++) {
        L[l].b[0] = out[l][0];
        L[l].b[1] = out[l][1];
    }
}

// ldmatrix.x4: lane l names row l % 8 of matrix l / 8; lane l receives, of matrix m, the pair
// (row l / 4, columns 2(l % 4), +1).
inline void ldsm_x4_all(int first)
{
    Lane *L = st().lane + first;
    uint32_t out[32][4];
    for (int l = 0; l < 32; l++)
        for (int m = 0; m < 4; m++) {
            const uint16_t *r = L[m * 8 + (l >> 2)].row;
            out[l][m] = (uint32_t)r[2 * (l & 3)] | (uint32_t)r[2 * (l & 3) + 1] << 16;
        }
    for (int l = 0; l < 32; l++)
        memcpy(L[l].a, out[l], sizeof L[l].a);
}

inline void entry()
{
    State &s = st();
    int me = s.cur;
    s.body(s.arg);
    if (s.th[me].ncopies)
        s.error = 2;
    s.th[me].done = true;
    s.progress++;
    swapcontext(&s.th[me].ctx, &s.sched);
}

template <typename F> inline void call(void *f) { (*static_cast<F *>(f))(); }

// getcontext returns twice: kept apart so no caller's locals live across it
__attribute__((noinline)) inline void init_fiber(Thread &t, unsigned i)
{
    getcontext(&t.ctx);
    t.ctx.uc_stack.ss_sp = t.stack;
    t.ctx.uc_stack.ss_size = kStack;
    t.ctx.uc_link = nullptr;
    makecontext(&t.ctx, entry, 0);
    t.tid = u3(i, 0, 0);
    t.done = false;
    t.ncopies = 0;
    t.committed = 0;
}

// Runs f (the kernel call) for every thread of every block of grid × block, with dyn bytes of
// dynamic shared memory.
template <typename F> inline void launch(dim3 grid, dim3 block, F f, size_t dyn = 0)
{
    State &s = st();
    int n = (int)(block.x * block.y * block.z);
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || n < 1 || n > kMaxThreads || n % 32 ||
        block.y != 1 || block.z != 1 || dyn > kMaxDynSmem) {
        s.error = 1;  // cudaErrorInvalidConfiguration (the emulation runs 1-D blocks only)
        return;
    }
    s.grid = grid, s.block = block, s.nthreads = n, s.body = call<F>, s.arg = &f;
    if (dyn > s.dyn_cap) {
        free(s.dyn);
        s.dyn = static_cast<char *>(malloc(dyn));
        s.dyn_cap = dyn;
    }
    for (int i = 0; i < n; i++)
        if (!s.th[i].stack)
            s.th[i].stack = static_cast<char *>(malloc(kStack));
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                s.bid = u3(x, y, z);
                memset(s.warp, 0, sizeof s.warp);
                memset(&s.blk, 0, sizeof s.blk);
                if (dyn)
                    memset(s.dyn, 0xff, dyn);
                for (int i = 0; i < n; i++)
                    init_fiber(s.th[i], (unsigned)i);
                for (int left = n; left > 0;) {
                    unsigned long before = s.progress;
                    left = 0;
                    for (int i = 0; i < n; i++) {
                        if (s.th[i].done)
                            continue;
                        s.cur = i;
                        swapcontext(&s.sched, &s.th[i].ctx);
                        left += !s.th[i].done;
                    }
                    if (left && s.progress == before) {
                        fprintf(stderr, "flash emulation: block (%u,%u,%u) deadlocked (a warp-wide "
                                        "operation or barrier not reached by every thread)\n",
                                x, y, z);
                        abort();
                    }
                }
            }
}

// A vector load (float2 / float4) from an address the GPU would fault on.
inline void check_aligned(const void *p, size_t bytes)
{
    if ((uintptr_t)p % bytes) {
        fprintf(stderr, "flash emulation: a %zu-byte vector load from a misaligned address\n",
                bytes);
        abort();
    }
}

}  // namespace flash_emu

#define threadIdx (flash_emu::thread_idx())
#define blockIdx (flash_emu::st().bid)
#define blockDim (flash_emu::st().block)
#define gridDim (flash_emu::st().grid)

#define FLASH_LAUNCH(kernel, grid, block, stream, ...)                                 \
    ((void)(stream), flash_emu::launch(dim3(grid), dim3(block), [&]() { kernel(__VA_ARGS__); }))
#define FLASH_LAUNCH_DYN(kernel, grid, block, smem, stream, ...)                        \
    ((void)(stream), flash_emu::launch(dim3(grid), dim3(block), [&]() { kernel(__VA_ARGS__); }, \
                                       (size_t)(smem)))
#define FLASH_DYN_SMEM(name) float *name = reinterpret_cast<float *>(flash_emu::st().dyn)

inline void __syncthreads()
{
    flash_emu::State &s = flash_emu::st();
    flash_emu::rendezvous(s.blk, s.nthreads, 0, [](int) {});
}

inline float __shfl_xor_sync(unsigned mask, float v, int o)
{
    (void)mask;
    flash_emu::State &s = flash_emu::st();
    s.lane[s.cur].f = v;
    flash_emu::warp_op([o](int first) {
        flash_emu::Lane *L = flash_emu::st().lane + first;
        for (int l = 0; l < 32; l++)
            L[l].g = L[l ^ o].f;
    });
    return s.lane[s.cur].g;
}

inline double __shfl_xor_sync(unsigned mask, double v, int o)
{
    (void)mask;
    flash_emu::State &s = flash_emu::st();
    s.lane[s.cur].df = v;
    flash_emu::warp_op([o](int first) {
        flash_emu::Lane *L = flash_emu::st().lane + first;
        for (int l = 0; l < 32; l++)
            L[l].dg = L[l ^ o].df;
    });
    return s.lane[s.cur].dg;
}

inline float __uint_as_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

inline uint32_t __float_as_uint(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

inline int min(int a, int b) { return a < b ? a : b; }

inline void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    flash_emu::State &s = flash_emu::st();
    flash_emu::Lane &L = s.lane[s.cur];
    memcpy(L.a, a, sizeof L.a);
    L.b[0] = b0, L.b[1] = b1;
    memcpy(L.c, c, sizeof L.c);
    flash_emu::warp_op(flash_emu::mma_all);
    memcpy(c, s.lane[s.cur].d, 4 * sizeof *c);
}

inline void mma1688(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    flash_emu::State &s = flash_emu::st();
    flash_emu::Lane &L = s.lane[s.cur];
    memcpy(L.a, a, sizeof L.a);
    L.b[0] = b0, L.b[1] = b1;
    memcpy(L.c, c, sizeof L.c);
    flash_emu::warp_op(flash_emu::mma_tf32_all);
    memcpy(c, s.lane[s.cur].d, 4 * sizeof *c);
}

inline void ldsm_x2_trans(uint32_t &b0, uint32_t &b1, const uint16_t *tile, int ld, int lane)
{
    flash_emu::State &s = flash_emu::st();
    s.lane[s.cur].row = tile + (lane & 15) * ld;
    flash_emu::warp_op(flash_emu::ldsm_trans_all);
    b0 = s.lane[s.cur].b[0];
    b1 = s.lane[s.cur].b[1];
}

inline void ldsm_x4(uint32_t r[4], const uint16_t *row)
{
    flash_emu::State &s = flash_emu::st();
    s.lane[s.cur].row = row;
    flash_emu::warp_op(flash_emu::ldsm_x4_all);
    memcpy(r, s.lane[s.cur].a, 4 * sizeof *r);
}

inline uint32_t pack_bf16(float lo, float hi)
{
    return (uint32_t)zb_bf16_from_f32(lo) | (uint32_t)zb_bf16_from_f32(hi) << 16;
}

inline void copy16_async(uint16_t *dst, const uint16_t *src, bool in)
{
    flash_emu::Thread &t = flash_emu::st().th[flash_emu::st().cur];
    if (t.ncopies == flash_emu::kMaxCopies) {
        fprintf(stderr, "flash emulation: more than %d cp.async copies in flight\n",
                flash_emu::kMaxCopies);
        abort();
    }
    t.copy[t.ncopies++] = flash_emu::Copy{dst, src, in, t.committed};
}

inline void cp_async_commit()
{
    flash_emu::st().th[flash_emu::st().cur].committed++;
}

// Completes the copies of every committed group but the newest `pending`.
template <int pending> inline void cp_async_wait()
{
    flash_emu::Thread &t = flash_emu::st().th[flash_emu::st().cur];
    int kept = 0;
    for (int i = 0; i < t.ncopies; i++) {
        flash_emu::Copy c = t.copy[i];
        if (c.group + pending < t.committed) {
            if (c.in)
                memcpy(c.dst, c.src, 16);
            else
                memset(c.dst, 0, 16);
        } else {
            t.copy[kept++] = c;
        }
    }
    t.ncopies = kept;
}

extern "C" int zb_flash_emu_take_error(void)
{
    int e = flash_emu::st().error;
    flash_emu::st().error = 0;
    return e;
}

#endif
