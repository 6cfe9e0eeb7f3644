package io.accel4j.train.plan;

/**
 * The machines a plan is for: {@code devices} identical devices (GPUs, or CPU ranks) of {@code memoryBytes} each, the
 * per-device bandwidth of the collectives (bus bandwidth, bytes/s) and the per-device sustained matmul rate
 * (FLOP/s) that the step-time estimate uses.
 */
public record Cluster(int devices, long memoryBytes, double bandwidth, double flops) {

    /** The rates assumed when none are given: an H100-class GPU's sustained fp32/tf32 rate and NVLink bus bandwidth. */
    public static final double DEFAULT_FLOPS = 100e12;
    public static final double DEFAULT_BANDWIDTH = 100e9;

    public Cluster {
        if (devices < 1) {
            throw new IllegalArgumentException("devices must be >= 1, got " + devices);
        }
        if (memoryBytes < 1) {
            throw new IllegalArgumentException("device memory must be >= 1 byte, got " + memoryBytes);
        }
        if (!(bandwidth > 0) || !(flops > 0) || Double.isInfinite(bandwidth) || Double.isInfinite(flops)) {
            throw new IllegalArgumentException("bandwidth and FLOP/s must be finite and > 0, got " + bandwidth + ", "
                    + flops);
        }
    }
}
