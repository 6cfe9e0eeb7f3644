package io.accel4j.kernels;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaProbe;
import io.accel4j.cuda.DeviceBuffer;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link AttentionBf16Gpu} on a GPU against the float64 reference ({@link AttentionBf16Check}, the same cases and
 * tolerances as the emulator's test, plus long sequences), run-to-run bit equality, and the PTX set {@link GpuOps}
 * chose. Every case runs with each forward kernel the device supports (wmma everywhere, wgmma and its TMA variant on
 * compute capability 9.0, unless -Daccel4j.attention.tma=false), each followed by the (wmma) backward; the two wgmma
 * forwards must agree bit for bit. The GPU tests skip, with {@link Cuda#probe()}'s description as the reason, where
 * there is no GPU; the precondition test needs none.
 */
class AttentionBf16GpuTest {

    private static final long SEED = 20261204L;
    private static CudaProbe probe;
    private static CudaContext ctx;
    private static GpuOps ops;
    private static AttentionBf16Gpu attention;
    private final List<DeviceBuffer> buffers = new ArrayList<>();
    private final Arena arena = Arena.ofShared();

    @BeforeAll
    static void open() {
        probe = Cuda.probe();
        if (probe.ready()) {
            ctx = Cuda.open(0);
            ops = new GpuOps(ctx);
            attention = new AttentionBf16Gpu(ops);
        }
    }

    @AfterAll
    static void close() {
        if (attention != null) {
            attention.close();
        }
        if (ops != null) {
            ops.close();
        }
        if (ctx != null) {
            ctx.close();
        }
    }

    @AfterEach
    void free() {
        buffers.forEach(DeviceBuffer::close);
        buffers.clear();
        arena.close();
    }

    private static void needGpu() {
        assumeTrue(ops != null, "no usable GPU: CUDA " + probe.describe());
    }

    @Test
    void loadsTheHopperPtxOnlyOnComputeCapability90() {
        needGpu();
        assertThat(ops.describe()).contains("PTX " + Kernels.ptxArch(ctx.computeCapability()) + ",");
    }

    @Test
    void forwardKernelIsWgmmaExactlyOnComputeCapability90() {
        needGpu();
        boolean hopper = ctx.computeCapability() == 90;
        assertThat(attention.forwardKernel()).isEqualTo(hopper ? AttentionBf16Gpu.ForwardKernel.WGMMA
                : AttentionBf16Gpu.ForwardKernel.WMMA);
        assertThat(attention.describe()).contains(hopper ? "attention_wgmma_forward" : "needs compute capability 9.0");
        boolean tmaOff = "false".equalsIgnoreCase(System.getProperty(AttentionBf16Gpu.TMA_PROPERTY, "true").strip());
        assertThat(attention.supports(AttentionBf16Gpu.ForwardKernel.WGMMA_TMA)).isEqualTo(hopper && !tmaOff);
        if (hopper && tmaOff) { // the GPU check's first process: the TMA forward runs in a later one
            assertThat(attention.unsupported(AttentionBf16Gpu.ForwardKernel.WGMMA_TMA))
                    .contains("-D" + AttentionBf16Gpu.TMA_PROPERTY + "=false");
        }
        if (!hopper) {
            MemorySegment any = up(poison(6 * 128 * 64));
            for (AttentionBf16Gpu.ForwardKernel k : List.of(AttentionBf16Gpu.ForwardKernel.WGMMA,
                    AttentionBf16Gpu.ForwardKernel.WGMMA_TMA)) {
                assertThatThrownBy(() -> attention.forward(k, any, any, any, 1, 1, 64, 1, true))
                        .isInstanceOf(IllegalStateException.class).hasMessageContaining("compute capability 9.0");
            }
        }
    }

    /**
     * The TMA forward runs the cp.async forward's instructions on the same tiles in the same order: the same bits
     * (so does the emulation), over several stages' reuse, a partial last tile and both head sizes.
     */
    @Test
    void tmaForwardGivesTheWgmmaForwardsBits() {
        needGpu();
        assumeTrue(attention.supports(AttentionBf16Gpu.ForwardKernel.WGMMA_TMA), "the wgmma forwards need Hopper");
        for (AttentionBf16Check c : List.of(new AttentionBf16Check(3, 777, 384, 3, true),
                new AttentionBf16Check(1, 1030, 256, 4, false))) {
            AttentionBf16Check.Inputs in = c.inputs(SEED + 7 * c.T());
            long btc = (long) c.B() * c.T() * c.C(), nLse = (long) c.B() * c.NH() * c.T();
            MemorySegment qkv = up(arena.allocateFrom(JAVA_SHORT, in.qkv()));
            MemorySegment out = up(poison(2 * btc)), lse = up(poison(4 * nLse));
            MemorySegment outTma = up(poison(2 * btc)), lseTma = up(poison(4 * nLse));
            attention.forward(AttentionBf16Gpu.ForwardKernel.WGMMA, out, lse, qkv, c.B(), c.T(), c.C(), c.NH(),
                    c.causal());
            attention.forward(AttentionBf16Gpu.ForwardKernel.WGMMA_TMA, outTma, lseTma, qkv, c.B(), c.T(), c.C(),
                    c.NH(), c.causal());
            assertThat(down(outTma).mismatch(down(out))).as("out, %s", c).isEqualTo(-1);
            assertThat(down(lseTma).mismatch(down(lse))).as("lse, %s", c).isEqualTo(-1);
        }
    }

    @Test
    void headSize64MatchesReference() {
        needGpu();
        run(new AttentionBf16Check(2, 67, 128, 2, true));
        run(new AttentionBf16Check(2, 67, 128, 2, false));
        run(new AttentionBf16Check(2, 17, 64, 1, false));
    }

    @Test
    void headSize128MatchesReference() {
        needGpu();
        run(new AttentionBf16Check(3, 17, 256, 2, true));
        run(new AttentionBf16Check(1, 67, 384, 3, false));
        run(new AttentionBf16Check(1, 1, 128, 1, true));
    }

    @Test
    void longSequencesMatchReference() {
        needGpu();
        run(new AttentionBf16Check(1, 1000, 256, 2, true));   // hs 128
        run(new AttentionBf16Check(1, 1001, 256, 4, false));  // hs 64
    }

    @Test
    void preconditionsNameTheArgument() {
        assertThatThrownBy(() -> AttentionBf16Gpu.headSize(1, 8, 96, 3)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("head sizes 64 and 128, got hs = C/NH = 96/3 = 32");
        assertThatThrownBy(() -> AttentionBf16Gpu.headSize(1, 8, 100, 3)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("C (100) must be divisible by NH (3)");
        assertThatThrownBy(() -> AttentionBf16Gpu.headSize(1, 0, 128, 2)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("T must be >= 1, got 0");
        assertThat(AttentionBf16Gpu.headSize(2, 5, 384, 3)).isEqualTo(128);
        // the wmma kernels set no opt-in attribute: a launch may take at most 48 KiB of dynamic shared memory; the
        // wgmma forward opts in, up to Hopper's 227 KiB a block
        for (int hs : new int[] {64, 128}) {
            assertThat(AttentionBf16Gpu.forwardSharedBytes(hs)).isLessThanOrEqualTo(48 * 1024);
            assertThat(AttentionBf16Gpu.backwardSharedBytes(hs)).isLessThanOrEqualTo(48 * 1024);
            assertThat(AttentionBf16Gpu.wgmmaSharedBytes(hs)).isLessThanOrEqualTo(227 * 1024);
            assertThat(AttentionBf16Gpu.wgmmaTmaSharedBytes(hs)).isLessThanOrEqualTo(227 * 1024);
        }
        assertThat(AttentionBf16Gpu.wgmmaSharedBytes(128)).isEqualTo(1024 + 6 * 128 * 128 * 2);
        assertThat(AttentionBf16Gpu.wgmmaTmaSharedBytes(128)).isEqualTo(1024 + 5 * 128 * 128 * 2 + 128);
    }

    /**
     * GpuOps with BF16 operands (fp32 buffers: casts, the kernels, accumulation into dqkv) against CpuOps with BF16
     * operands ({@link AttentionBf16OpsCheck}: the emulator's tolerances), odd T, both head sizes, T = 1.
     */
    @Test
    void gpuOpsBf16AttentionMatchesCpuBackend() {
        needGpu();
        try (Parallel pool = new Parallel(2)) {
            CpuOps cpu = new CpuOps(pool);
            for (AttentionBf16OpsCheck c : List.of(new AttentionBf16OpsCheck(2, 67, 128, 2),
                    new AttentionBf16OpsCheck(1, 200, 256, 2), new AttentionBf16OpsCheck(3, 1, 128, 1),
                    new AttentionBf16OpsCheck(2, 130, 384, 6))) {
                AttentionBf16OpsCheck.Case h = c.run(arena, cpu, SEED + c.T() + 7L * c.C());
                MemorySegment out = up(poison(4 * c.btc())), lse = up(poison(4 * c.nLse())), dqkv = up(h.prefill());
                MemorySegment qkv = up(h.qkv()), dout = up(h.dout());
                ops.attentionForward(out, lse, qkv, c.B(), c.T(), c.C(), c.NH(), DType.BF16);
                ops.attentionBackward(dqkv, dout, qkv, out, lse, c.B(), c.T(), c.C(), c.NH(), DType.BF16);
                c.check(h, down(out), down(lse), down(dqkv));
            }
        }
    }

    /** What a trainer asks before its first step: the head sizes each kernel takes, FP16 refused. */
    @Test
    void gpuOpsNamesTheHeadSizesItTakes() {
        needGpu();
        ops.checkAttention(DType.BF16, 128, 2);
        ops.checkAttention(DType.BF16, 768, 6);
        ops.checkAttention(DType.FP32, 96, 3);
        assertThatThrownBy(() -> ops.checkAttention(DType.BF16, 96, 3)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("head sizes 64 and 128, got hs = C/NH = 96/3 = 32");
        assertThatThrownBy(() -> ops.checkAttention(DType.FP32, 512, 2)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("head sizes up to 128");
        assertThatThrownBy(() -> ops.checkAttention(DType.FP16, 128, 2)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("FP32 or BF16");
        MemorySegment small = up(poison(4096));
        assertThatThrownBy(() -> ops.attentionForward(small, small, small, 1, 1, 96, 3, DType.BF16))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("hs = C/NH = 96/3 = 32");
    }

    /** {@link #run(AttentionBf16Check, AttentionBf16Gpu.ForwardKernel)} with every forward kernel supported. */
    private void run(AttentionBf16Check c) {
        for (AttentionBf16Gpu.ForwardKernel k : AttentionBf16Gpu.ForwardKernel.values()) {
            if (attention.supports(k)) {
                run(c, k);
            }
        }
    }

    /** Forward, backward (each twice: the second must give the same bits), compared with the reference. */
    private void run(AttentionBf16Check c, AttentionBf16Gpu.ForwardKernel kernel) {
        AttentionBf16Check.Inputs in = c.inputs(SEED + c.T() + c.C());
        long btc = (long) c.B() * c.T() * c.C(), nLse = (long) c.B() * c.NH() * c.T();
        MemorySegment qkv = up(arena.allocateFrom(JAVA_SHORT, in.qkv())), dout = up(arena.allocateFrom(JAVA_SHORT,
                in.dout()));
        MemorySegment out = up(poison(2 * btc)), lse = up(poison(4 * nLse)), dqkv = up(poison(6 * btc));
        MemorySegment out2 = up(poison(2 * btc)), lse2 = up(poison(4 * nLse)), dqkv2 = up(poison(6 * btc));
        attention.forward(kernel, out, lse, qkv, c.B(), c.T(), c.C(), c.NH(), c.causal());
        attention.backward(dqkv, dout, qkv, out, lse, c.B(), c.T(), c.C(), c.NH(), c.causal());
        attention.forward(kernel, out2, lse2, qkv, c.B(), c.T(), c.C(), c.NH(), c.causal());
        attention.backward(dqkv2, dout, qkv, out2, lse2, c.B(), c.T(), c.C(), c.NH(), c.causal());
        MemorySegment hOut = down(out), hLse = down(lse), hDqkv = down(dqkv);
        try {
            c.check(in, hOut.toArray(JAVA_SHORT), hLse.toArray(JAVA_FLOAT), hDqkv.toArray(JAVA_SHORT));
        } catch (AssertionError e) {
            throw new AssertionError(kernel + " forward: " + e.getMessage(), e);
        }
        assertThat(down(out2).mismatch(hOut)).as("out of a second run differs at byte (%s)", c).isEqualTo(-1);
        assertThat(down(lse2).mismatch(hLse)).as("lse of a second run differs at byte (%s)", c).isEqualTo(-1);
        assertThat(down(dqkv2).mismatch(hDqkv)).as("dqkv of a second run differs at byte (%s)", c).isEqualTo(-1);
    }

    /** {@code bytes} of 0xFF: NaN as bf16 and as fp32. */
    private MemorySegment poison(long bytes) {
        return arena.allocate(bytes, 16).fill((byte) 0xFF);
    }

    private MemorySegment up(MemorySegment host) {
        DeviceBuffer b = ctx.allocate(host.byteSize());
        buffers.add(b);
        b.copyFrom(host);
        return GpuOps.device(b);
    }

    private MemorySegment down(MemorySegment view) {
        DeviceBuffer b = buffers.stream().filter(x -> x.address() == view.address()).findFirst().orElseThrow();
        MemorySegment host = arena.allocate(b.byteSize(), 16);
        b.copyTo(host);
        return host;
    }
}
