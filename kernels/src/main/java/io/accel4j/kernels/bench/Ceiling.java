package io.accel4j.kernels.bench;

/**
 * The H200 SXM's peak figures (NVIDIA's datasheet, dense, i.e. without 2:4 sparsity) that each benchmark figure is
 * divided by: what fraction of the hardware a kernel uses. On another GPU the ratios are still against the H200
 * (the report says so).
 */
public enum Ceiling {
    /** FP32 on the CUDA cores (SIMT; cuBLASLt without TF32, the fp32 attention kernels). */
    FP32(67e12, "TFLOP/s"),
    /** TF32 tensor cores. */
    TF32(494e12, "TFLOP/s"),
    /** BF16 (and FP16) tensor cores. */
    BF16(989e12, "TFLOP/s"),
    /** FP8 tensor cores. */
    FP8(1979e12, "TFLOP/s"),
    /** HBM3e bandwidth, bytes read plus bytes written. */
    HBM(4.8e12, "GB/s");

    /** The GPU these ceilings are for. */
    public static final String GPU = "H200 SXM";

    private final double perSecond;
    private final String unit;

    Ceiling(double perSecond, String unit) {
        this.perSecond = perSecond;
        this.unit = unit;
    }

    /** FLOP/s or bytes/s. */
    public double perSecond() {
        return perSecond;
    }

    /** The unit figures against this ceiling are reported in: {@code TFLOP/s} or {@code GB/s}. */
    public String unit() {
        return unit;
    }

    /** {@code perSecond} (FLOP/s or bytes/s) in {@link #unit()}. */
    public double inUnit(double perSecond) {
        return perSecond / (this == HBM ? 1e9 : 1e12);
    }

    /** E.g. {@code "BF16 989 TFLOP/s"}. */
    public String label() {
        return name() + " " + Math.round(inUnit(perSecond)) + " " + unit;
    }
}
