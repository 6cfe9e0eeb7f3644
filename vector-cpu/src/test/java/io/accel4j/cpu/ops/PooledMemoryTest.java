package io.accel4j.cpu.ops;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.memory.HostMemory;
import io.accel4j.cpu.Parallel;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

/**
 * {@link PooledMemory}: {@code zero} clears exactly the segment given, on any thread count and at sizes around its
 * thresholds (one chunk, two chunks, a partial last chunk, above the parallel maximum), shared or confined; the rest is
 * {@link HostMemory}'s.
 */
class PooledMemoryTest {

    @Test
    void zeroClearsExactlyTheSegmentOnAnyThreadCount() {
        long c = PooledMemory.CHUNK_BYTES;
        long[] sizes = {0, 1, 7, c - 1, c, 2 * c - 1, 2 * c, 2 * c + 3, 5 * c + 12, PooledMemory.PARALLEL_MAX_BYTES + 4};
        for (int threads : new int[] {1, 2, 3}) {
            try (Parallel pool = new Parallel(threads); Arena arena = Arena.ofShared()) {
                PooledMemory memory = new PooledMemory(pool);
                for (long n : sizes) {
                    MemorySegment all = arena.allocate(n + 128, 64);
                    all.fill((byte) 0x5a);
                    memory.zero(all.asSlice(64, n));
                    for (long i = 0; i < n + 128; i++) {
                        byte expected = i >= 64 && i < 64 + n ? 0 : (byte) 0x5a;
                        if (all.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i) != expected) {
                            throw new AssertionError(threads + " threads, " + n + " bytes: byte " + i + " is "
                                    + all.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i));
                        }
                    }
                }
            }
        }
    }

    @Test
    void aConfinedSegmentIsZeroedOnTheCallingThread() {
        try (Parallel pool = new Parallel(2); Arena arena = Arena.ofConfined()) {
            MemorySegment s = arena.allocate(4 * PooledMemory.CHUNK_BYTES, 64);
            s.fill((byte) 1);
            new PooledMemory(pool).zero(s);
            assertThat(s.mismatch(arena.allocate(s.byteSize()))).isEqualTo(-1L);
        }
    }

    @Test
    void theRestIsHostMemorys() {
        try (Parallel pool = new Parallel(2)) {
            PooledMemory memory = new PooledMemory(pool);
            assertThat(memory.hostAccessible()).isTrue();
            assertThat(memory.describe()).isEqualTo(HostMemory.INSTANCE.describe());
            assertThat(new CpuOps(pool).memory()).isInstanceOf(PooledMemory.class);
        }
    }
}
