package io.accel4j.fit;

import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.nn.Network;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Checks that data-parallel replicas hold the same parameters: a 64-bit FNV-1a hash of the fp32 words, split in four
 * 16-bit pieces (exact in fp32), whose maximum and minimum over the ranks ({@link GradientSync#max} of the pieces and
 * their negations, two pieces a call: the strategies' exchange holds at least 4 values) must agree. Parameters in a device's memory are hashed from host copies of
 * {@link #STAGING_FLOATS} at a time.
 */
final class ReplicaCheck {

    /** Floats copied to the host at a time when the parameters are not host memory: 16 MiB. */
    static final long STAGING_FLOATS = 1L << 22;

    private ReplicaCheck() {
    }

    /**
     * Throws an {@link IllegalStateException} on every rank of {@code sync} unless all ranks' parameters of
     * {@code net} (its flat fp32 buffer) are the same bits; {@code rank} names this one in the message.
     */
    static void check(GradientSync sync, int rank, Network net) {
        long h = hash(net.memory(), net.params(), net.table().count());
        for (int half = 0; half < 2; half++) { // 4 values a call: a data-parallel exchange holds 2 a rank, ranks >= 2
            float a = (h >>> (32 * half)) & 0xFFFF, b = (h >>> (32 * half + 16)) & 0xFFFF;
            float[] max = sync.max(new float[] {a, b, -a, -b});
            if (max[0] != -max[2] || max[1] != -max[3]) {
                throw new IllegalStateException("the ranks' parameters differ (rank " + rank + "'s checksum is "
                        + Long.toHexString(h) + "): every rank must start from the same parameters (the same seed "
                        + "or model file)");
            }
        }
    }

    /** FNV-1a over the first {@code count} fp32 words of {@code p}, read through host copies off the CPU. */
    static long hash(DeviceMemory memory, MemorySegment p, long count) {
        long h = 0xcbf29ce484222325L;
        try (Arena tmp = Arena.ofConfined()) {
            MemorySegment staging = memory.hostAccessible() ? null
                    : tmp.allocate(Math.min(count, STAGING_FLOATS) * Float.BYTES, 64);
            for (long at = 0; at < count; at += STAGING_FLOATS) {
                long n = Math.min(STAGING_FLOATS, count - at);
                MemorySegment words = p.asSlice(at * Float.BYTES, n * Float.BYTES);
                if (staging != null) {
                    MemorySegment host = staging.asSlice(0, n * Float.BYTES);
                    memory.copyToHost(words, host);
                    words = host;
                }
                for (long i = 0; i < n; i++) {
                    h ^= words.getAtIndex(ValueLayout.JAVA_INT_UNALIGNED, i) & 0xFFFF_FFFFL;
                    h *= 0x100000001b3L;
                }
            }
        }
        return h;
    }
}
