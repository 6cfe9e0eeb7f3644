package io.accel4j.kernels.bench;

import io.accel4j.core.DType;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.AdamWRange;
import io.accel4j.cuda.DeviceBuffer;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Optional;

/**
 * AdamW's bandwidth over GPT-2 124M's parameters (124,475,904 with the padded vocabulary) beside a device-to-device
 * copy ({@code cuMemcpyDtoDAsync}) that moves the same bytes: AdamW reads 16 and writes 12 bytes per parameter, the
 * copy copies 14 (reading and writing them). The copy is what the memory system gives a kernel that only streams;
 * AdamW should reach {@value #ACCEPTANCE} of it ({@link #ratio}). AdamW runs as the trainer calls it, the
 * multi-range launch ({@code adamw_f32_multi}: 16-byte loads), and, for comparison, as the single-range grid-stride
 * kernel ({@code adamw_f32}).
 */
final class AdamWCases {

    static final long PARAMETERS = 124_475_904L;
    static final double ACCEPTANCE = 0.85;
    static final String ADAMW = "adamw fp32";
    static final String ADAMW_GRID_STRIDE = "adamw fp32 1-range";
    static final String COPY = "copy DtoD";
    private static final AdamWConfig CONFIG = new AdamWConfig(6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f);

    private AdamWCases() {}

    static List<Case> cases(BenchDevice d) {
        long n = PARAMETERS;
        String shape = "n " + n;
        long copied = (long) (Flops.adamwBytes(n, false) / 2);
        return List.of(
                Case.of("adamw", ADAMW, shape, Flops.adamwBytes(n, false), Ceiling.HBM,
                        () -> adamw(d, n, false, true)),
                Case.of("adamw", COPY, "bytes " + copied, Flops.copyBytes(copied), Ceiling.HBM, () -> copy(d, copied)),
                Case.of("adamw", ADAMW_GRID_STRIDE, shape, Flops.adamwBytes(n, false), Ceiling.HBM,
                        () -> adamw(d, n, false, false)),
                Case.of("adamw", "adamw fp32+bf16", shape, Flops.adamwBytes(n, true), Ceiling.HBM,
                        () -> adamw(d, n, true, true)));
    }

    /** AdamW over n parameters; {@code ranges}: the multi-range call with one range, else the single-range one. */
    private static Case.Prepared adamw(BenchDevice d, long n, boolean bf16, boolean ranges) {
        List<AdamWRange> all = List.of(new AdamWRange(0, 0, n, true));
        BenchDevice.Buffers b = d.buffers();
        try {
            MemorySegment p = BenchDevice.view(b.random(DType.FP32, n, -1, 1));
            MemorySegment g = BenchDevice.view(b.random(DType.FP32, n, -1, 1));
            MemorySegment m = BenchDevice.view(b.random(DType.FP32, n, -0.1f, 0.1f));
            MemorySegment v = BenchDevice.view(b.random(DType.FP32, n, 0, 0.01f));
            if (!bf16) {
                return Case.Prepared.of(ranges ? () -> d.ops.adamw(p, g, m, v, all, CONFIG, 1, 1f)
                        : () -> d.ops.adamw(p, g, m, v, 0, n, CONFIG, 1, 1f), b::close);
            }
            MemorySegment p16 = BenchDevice.view(b.empty(DType.BF16, n));
            long seed = d.nextSeed();
            return Case.Prepared.of(ranges ? () -> d.ops.adamwBf16(p16, p, g, m, v, all, CONFIG, 1, 1f, seed)
                    : () -> d.ops.adamwBf16(p16, p, g, m, v, 0, n, CONFIG, 1, 1f, seed), b::close);
        } catch (RuntimeException e) {
            b.close();
            throw e;
        }
    }

    private static Case.Prepared copy(BenchDevice d, long bytes) {
        DeviceBuffer src = d.context.allocate(bytes);
        DeviceBuffer dst = null;
        try {
            dst = d.context.allocate(bytes);
            src.fill((byte) 0x3c);
            DeviceBuffer to = dst;
            return Case.Prepared.of(() -> to.copyFromAsync(src, bytes, null), () -> {
                to.close();
                src.close();
            });
        } catch (RuntimeException e) {
            if (dst != null) {
                dst.close();
            }
            src.close();
            throw e;
        }
    }

    /** AdamW's bandwidth over the copy's, when both ran. */
    static Optional<Report.Ratio> ratio(List<Result> results) {
        Optional<Result> a = find(results, ADAMW);
        Optional<Result> c = find(results, COPY);
        if (a.isEmpty() || c.isEmpty()) {
            return Optional.empty();
        }
        return Optional.of(new Report.Ratio("adamw fp32 GB/s / copy GB/s", a.get().value() / c.get().value(),
                ACCEPTANCE));
    }

    private static Optional<Result> find(List<Result> results, String kernel) {
        return results.stream().filter(r -> r.ok() && r.group().equals("adamw") && r.kernel().equals(kernel))
                .findFirst();
    }
}
