package io.accel4j.kernels.bench;

import static io.accel4j.kernels.AttentionBf16Gpu.ForwardKernel.WGMMA;
import static io.accel4j.kernels.AttentionBf16Gpu.ForwardKernel.WGMMA_TMA;
import static io.accel4j.kernels.AttentionBf16Gpu.ForwardKernel.WMMA;

import io.accel4j.core.DType;
import io.accel4j.cuda.DeviceBuffer;
import io.accel4j.kernels.AttentionBf16Gpu;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Flash-attention throughput, as FlashAttention's benchmarks measure it: B·T = 16k tokens, model width 2048 (so
 * NH = 2048/hd), head sizes 64 and 128, T from 512 to 16k, causal and not, the forward alone and the forward then the
 * backward; FLOP counted by {@link Flops}. Inputs are the fused {@code qkv (B,T,3C)} of {@link
 * io.accel4j.kernels.GpuOps#attentionForward}, the output {@code (B,T,C)} and the fp32 log-sum-exp {@code (B,NH,T)}.
 *
 * <p>A kernel is a {@link Kernel}: its element type and two launches; adding one is one line in {@link #kernels}. A
 * kernel without a non-causal variant (the fp32 one) has its non-causal cases skipped, saying so; one without a
 * backward (the wgmma forward) has forward cases only; one the device lacks gets one skip line.
 *
 * <p>The bf16 forward runs three times on Hopper, the two wgmma forwards (cp.async loads; TMA loads from a producer
 * warpgroup) side by side at every shape, then wmma, so one device run gives every figure; to stay inside the bench
 * budget (127 cases, as before the TMA forward came) wmma skips T ≤ 2k and the fp32 kernel T ≤ 4k, where the
 * kernels' differences matter least.
 */
final class AttentionCases {

    static final int TOKENS = 16 * 1024;
    static final int WIDTH = 2048;
    static final int[] HEAD_SIZES = {64, 128};
    static final int[] SEQUENCE_LENGTHS = {512, 1024, 2048, 4096, 8192, 16384};

    record Shape(int B, int T, int NH, int hd, boolean causal) {
        int C() {
            return NH * hd;
        }

        String label() {
            return String.format(Locale.ROOT, "hd%d T%d B%d NH%d %s", hd, T, B, NH, causal ? "causal" : "full");
        }
    }

    /** Device views of one case's buffers, elements of the kernel's type except {@code lse} (fp32). */
    record Buffers(MemorySegment qkv, MemorySegment out, MemorySegment lse, MemorySegment dout, MemorySegment dqkv) {}

    /** A launch (queued on the default stream). */
    @FunctionalInterface
    interface Launch {
        void run(Buffers b, Shape s);
    }

    /**
     * An attention kernel: name, element type, ceiling, whether it has a non-causal variant, forward, backward (null:
     * forward cases only), the shortest T it is measured at, and why the device cannot run it (null when it can).
     */
    record Kernel(String name, DType type, Ceiling ceiling, boolean nonCausal, Launch forward, Launch backward,
                  int minT, String unavailable) {

        /** A kernel measured at every T, on any device. */
        Kernel(String name, DType type, Ceiling ceiling, boolean nonCausal, Launch forward, Launch backward) {
            this(name, type, ceiling, nonCausal, forward, backward, 0, null);
        }
    }

    private AttentionCases() {}

    /** The kernels on {@code d} (null: listing only, every kernel taken as available). */
    static List<Kernel> kernels(BenchDevice d) {
        AttentionBf16Gpu a = d == null ? null : d.attentionBf16;
        return List.of(
                // the wgmma forward first: a budget cut short drops the fp32 cases, not the figure wanted most
                new Kernel("flash bf16 wgmma", DType.BF16, Ceiling.BF16, true,
                        (b, s) -> a.forward(WGMMA, b.out(), b.lse(), b.qkv(), s.B(), s.T(), s.C(), s.NH(),
                                s.causal()),
                        null, 0, a == null ? null : a.unsupported(WGMMA)),
                new Kernel("flash bf16", DType.BF16, Ceiling.BF16, true,
                        (b, s) -> a.forward(WMMA, b.out(), b.lse(), b.qkv(), s.B(), s.T(), s.C(), s.NH(),
                                s.causal()),
                        (b, s) -> a.backward(b.dqkv(), b.dout(), b.qkv(), b.out(), b.lse(), s.B(), s.T(), s.C(),
                                s.NH(), s.causal()),
                        4096, null),
                new Kernel("GpuOps fp32", DType.FP32, Ceiling.FP32, false,
                        (b, s) -> d.ops.attentionForward(b.out(), b.lse(), b.qkv(), s.B(), s.T(), s.C(), s.NH()),
                        (b, s) -> d.ops.attentionBackward(b.dqkv(), b.dout(), b.qkv(), b.out(), b.lse(), s.B(),
                                s.T(), s.C(), s.NH()), 8192, null));
    }

    /**
     * The TMA forward on {@code d} (null: listing only): GpuBench's group {@code tma}, which the GPU check runs in a
     * process of its own after everything else (a kernel that hangs on its first hardware run stalls its process).
     */
    static List<Kernel> tmaKernels(BenchDevice d) {
        AttentionBf16Gpu a = d == null ? null : d.attentionBf16;
        return List.of(new Kernel("flash bf16 wgmma tma", DType.BF16, Ceiling.BF16, true,
                (b, s) -> a.forward(WGMMA_TMA, b.out(), b.lse(), b.qkv(), s.B(), s.T(), s.C(), s.NH(), s.causal()),
                null, 0, a == null ? null : a.unsupported(WGMMA_TMA)));
    }

    /** The shapes for one head size and masking: T over {@link #SEQUENCE_LENGTHS}, B = {@link #TOKENS}/T. */
    static List<Shape> shapes(int hd, boolean causal) {
        List<Shape> shapes = new ArrayList<>();
        for (int T : SEQUENCE_LENGTHS) {
            shapes.add(new Shape(TOKENS / T, T, WIDTH / hd, hd, causal));
        }
        return shapes;
    }

    /**
     * Every kernel: forward and (if it has a backward) forward+backward per shape from its {@link Kernel#minT()};
     * one skip line per kernel for the masks it lacks, or for all of it where the device cannot run it.
     */
    static List<Case> cases(BenchDevice d, List<Kernel> kernels) {
        List<Case> cases = new ArrayList<>();
        for (Kernel k : kernels) {
            if (k.unavailable() != null) {
                cases.add(Case.skip("attention", k.name(), "all", k.ceiling(), k.unavailable()));
                continue;
            }
            for (boolean causal : new boolean[] {true, false}) {
                if (!causal && !k.nonCausal()) {
                    cases.add(Case.skip("attention", k.name(), "all full (non-causal)", k.ceiling(),
                            k.name() + " is causal only"));
                    continue;
                }
                for (int hd : HEAD_SIZES) {
                    for (Shape s : shapes(hd, causal)) {
                        if (s.T() < k.minT()) {
                            continue;
                        }
                        cases.add(Case.of("attention", k.name() + " fwd", s.label(),
                                Flops.attentionForward(s.B(), s.NH(), s.T(), s.hd(), causal), k.ceiling(),
                                () -> prepare(d, k, s, false)));
                        if (k.backward() != null) {
                            cases.add(Case.of("attention", k.name() + " fwd+bwd", s.label(),
                                    Flops.attentionForwardBackward(s.B(), s.NH(), s.T(), s.hd(), causal),
                                    k.ceiling(), () -> prepare(d, k, s, true)));
                        }
                    }
                }
            }
        }
        return cases;
    }

    private static Case.Prepared prepare(BenchDevice d, Kernel k, Shape s, boolean backward) {
        BenchDevice.Buffers owned = d.buffers();
        try {
            long bt = (long) s.B() * s.T();
            MemorySegment qkv = BenchDevice.view(owned.random(k.type(), bt * 3 * s.C(), -1, 1));
            MemorySegment out = BenchDevice.view(owned.empty(k.type(), bt * s.C()));
            MemorySegment lse = BenchDevice.view(owned.empty(DType.FP32, (long) s.B() * s.NH() * s.T()));
            MemorySegment dout = MemorySegment.NULL;
            MemorySegment dqkv = MemorySegment.NULL;
            if (backward) {
                dout = BenchDevice.view(owned.random(k.type(), bt * s.C(), -1, 1));
                DeviceBuffer g = owned.empty(k.type(), bt * 3 * s.C());
                g.fill((byte) 0);
                dqkv = BenchDevice.view(g);
            }
            Buffers b = new Buffers(qkv, out, lse, dout, dqkv);
            Runnable call = backward ? () -> {
                k.forward().run(b, s);
                k.backward().run(b, s);
            } : () -> k.forward().run(b, s);
            return Case.Prepared.of(call, owned::close);
        } catch (RuntimeException e) {
            owned.close();
            throw e;
        }
    }
}
