package io.accel4j.kernels;

import static io.accel4j.kernels.GpuLaunch.BLOCK;
import static io.accel4j.kernels.GpuLaunch.tiles;

import io.accel4j.core.DType;
import io.accel4j.core.ops.AttentionOps;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaKernel.Dim;
import java.lang.foreign.MemorySegment;
import java.util.function.Supplier;

/**
 * Causal attention, dispatched on the operands: FP32, attention.cu's FlashAttention-2 kernels (head size up to 128;
 * the tile sizes below are its ATTN_* constants); BF16, {@link AttentionBf16Gpu} (the tensor-core kernels on bf16
 * copies, head sizes 64 and 128; wmma, or wgmma on compute capability 9.0). Owns the fp32 backward's D scratch.
 */
final class AttentionGpu implements AutoCloseable {

    /** Threads of every attention tile kernel (4 warps). */
    private static final int THREADS = 128;
    /** Query rows per block of attention_forward (ATTN_FWD_RPW·4). */
    private static final int FWD_ROWS = 32;
    /** Query rows per block of attention_backward_dq (ATTN_DQ_RPW·4). */
    private static final int DQ_ROWS = 16;
    /** Keys per block of attention_backward_dkdv (ATTN_DKDV_KPW·4). */
    private static final int DKDV_KEYS = 16;
    /** The largest head size the kernels take (a lane owns columns lane + 32·i, i < 4). */
    static final int MAX_HEAD_SIZE = 128;

    private final GpuLaunch gpu;
    private final Supplier<AttentionBf16Gpu> bf16;
    /** attention_backward_d's D (B,NH,T), grown to the largest call so far. */
    private final ScratchBuffer d;

    AttentionGpu(GpuLaunch gpu, CudaContext context, Supplier<AttentionBf16Gpu> bf16) {
        this.gpu = gpu;
        this.bf16 = bf16;
        this.d = ScratchBuffer.of(context);
    }

    /** The head size as the kernels pad it: 32, 64 or 128 (attn_padded). */
    static int paddedHeadSize(int hs) {
        return hs <= 32 ? 32 : hs <= 64 ? 64 : 128;
    }

    /** Dynamic shared memory of each attention tile kernel: 96 padded rows of tiles (48 KiB at hs 128). */
    static int sharedBytes(int hs) {
        return 96 * paddedHeadSize(hs) * Float.BYTES;
    }

    /** The GPU's own limits past the contract's sizes ({@link AttentionOps#checkSizes}): hs ≤ 128, grid limits. */
    static int headSize(int B, int T, int C, int NH) {
        return gpuLimits(AttentionOps.checkSizes(B, T, C, NH), C, NH, B);
    }

    private static int gpuLimits(int hs, int C, int NH, int B) {
        if (hs > MAX_HEAD_SIZE) {
            throw new IllegalArgumentException("attention on the GPU takes head sizes up to "
                    + MAX_HEAD_SIZE + ", got hs = C/NH = " + C + "/" + NH + " = " + hs);
        }
        if (B > 65_535 || NH > 65_535) {
            throw new IllegalArgumentException("attention grids take B and NH up to 65535, got B " + B + ", NH " + NH);
        }
        return hs;
    }

    private static float scale(int hs) {
        return (float) (1 / Math.sqrt(hs)); // as the CPU kernels round it
    }

    void forward(MemorySegment out, MemorySegment lse, MemorySegment qkv, int B, int T, int C, int NH,
                 DType operands) {
        if (AttentionOps.checkOperands(operands) == DType.BF16) {
            bf16.get().forwardFp32(out, lse, qkv, B, T, C, NH);
            return;
        }
        int hs = gpuLimits(AttentionOps.checkForward(out, lse, qkv, B, T, C, NH), C, NH, B);
        gpu.launchShared(Kernels.ATTENTION_FORWARD, new Dim(tiles(T, FWD_ROWS), NH, B),
                Dim.of(THREADS), sharedBytes(hs), out, lse, qkv, B, T, C, NH, scale(hs));
    }

    /**
     * FP32: three kernels: D = rowsum(dO∘O) into {@link #d}, then dK, dV (a block per key tile) and dQ (a block per
     * query tile, a pass of its own so that no element is summed with atomics). Both passes recompute P from lse;
     * they add to disjoint columns of dqkv.
     */
    void backward(MemorySegment dqkv, MemorySegment dout, MemorySegment qkv, MemorySegment out, MemorySegment lse,
                  int B, int T, int C, int NH, DType operands) {
        if (AttentionOps.checkOperands(operands) == DType.BF16) {
            bf16.get().backwardFp32(dqkv, dout, qkv, out, lse, B, T, C, NH);
            return;
        }
        int hs = gpuLimits(AttentionOps.checkBackward(dqkv, dout, qkv, out, lse, B, T, C, NH), C, NH, B);
        long nLse = (long) B * NH * T;
        MemorySegment dView = d.view(4 * nLse);
        // a warp per (b, t, h): 8 warps per block of 256
        gpu.launch(Kernels.ATTENTION_BACKWARD_D, Dim.of(Math.toIntExact((nLse + 7) / 8)), Dim.of(BLOCK),
                dView, dout, out, B, T, C, NH);
        int smem = sharedBytes(hs);
        float scale = scale(hs);
        gpu.launchShared(Kernels.ATTENTION_BACKWARD_DKDV, new Dim(tiles(T, DKDV_KEYS), NH, B),
                Dim.of(THREADS), smem, dqkv, dout, qkv, lse, dView, B, T, C, NH, scale);
        gpu.launchShared(Kernels.ATTENTION_BACKWARD_DQ, new Dim(tiles(T, DQ_ROWS), NH, B),
                Dim.of(THREADS), smem, dqkv, dout, qkv, lse, dView, B, T, C, NH, scale);
    }

    /** The head-size limits of either kernel: FP32 up to 128, BF16 64 or 128 (B, T and the grid aside). */
    static void check(DType operands, int C, int NH) {
        if (AttentionOps.checkOperands(operands) == DType.BF16) {
            AttentionBf16Gpu.headSize(1, 1, C, NH);
        } else {
            headSize(1, 1, C, NH);
        }
    }

    @Override
    public void close() {
        d.close();
    }
}
