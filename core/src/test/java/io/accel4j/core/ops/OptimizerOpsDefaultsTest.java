package io.accel4j.core.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The defaults of {@link OptimizerOps}: SGD and Lion refuse on a backend without them; the multi-range calls slice. */
class OptimizerOpsDefaultsTest {

    /** A backend with AdamW only, as GpuOps is. */
    static class AdamWOnly implements OptimizerOps {
        @Override
        public void adamw(MemorySegment params, MemorySegment grads, MemorySegment m, MemorySegment v, long offset,
                          long length, AdamWConfig config, int step, float gradScale) {}

        @Override
        public void adamwBf16(MemorySegment paramsBf16, MemorySegment master, MemorySegment grads, MemorySegment m,
                              MemorySegment v, long offset, long length, AdamWConfig config, int step,
                              float gradScale, long seed) {}
    }

    /** Records the single-range calls the multi-range defaults make: (address of params, offset, length, wd). */
    static final class Recording extends AdamWOnly {
        final List<String> calls = new ArrayList<>();

        @Override
        public void sgd(MemorySegment params, MemorySegment grads, MemorySegment buf, long offset, long length,
                        SgdConfig config, int step, float gradScale) {
            calls.add("sgd p+" + params.address() % 4096 + " buf " + buf.byteSize() + " " + offset + " " + length
                    + " wd " + config.weightDecay());
        }

        @Override
        public void lion(MemorySegment params, MemorySegment grads, MemorySegment m, long offset, long length,
                         LionConfig config, float gradScale) {
            calls.add("lion m " + m.byteSize() + " " + offset + " " + length + " wd " + config.weightDecay());
        }
    }

    @Test
    void aBackendWithoutTheKernelSaysWhich() {
        OptimizerOps ops = new AdamWOnly();
        MemorySegment s = MemorySegment.NULL;
        assertThatThrownBy(() -> ops.sgd(s, s, s, 0, 1, new SgdConfig(0.1f, 0.9f, 0f, 0f, false), 1, 1f))
                .isInstanceOf(UnsupportedOperationException.class).hasMessage("AdamWOnly has no SGD kernel");
        assertThatThrownBy(() -> ops.lion(s, s, s, 0, 1, new LionConfig(1e-4f, 0.9f, 0.99f, 0f), 1f))
                .isInstanceOf(UnsupportedOperationException.class).hasMessage("AdamWOnly has no Lion kernel");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment one = arena.allocate(4);
            assertThatThrownBy(() -> ops.lion(one, one, one, List.of(new AdamWRange(0, 0, 1, true)),
                    new LionConfig(1e-4f, 0.9f, 0.99f, 0f), 1f)).hasMessage("AdamWOnly has no Lion kernel");
        }
    }

    @Test
    void multiRangeCallsAreOnePerRangeWithTheRowsDecay() {
        Recording ops = new Recording();
        List<AdamWRange> ranges = List.of(new AdamWRange(0, 100, 3, true), new AdamWRange(5, 105, 2, false));
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment p = arena.allocate(4 * 7, 4096), g = arena.allocate(4 * 7), b = arena.allocate(4 * 7);
            ops.sgd(p, g, b, ranges, new SgdConfig(0.1f, 0.9f, 0f, 0.5f, false), 2, 1f);
            ops.sgd(p, g, MemorySegment.NULL, ranges, new SgdConfig(0.1f, 0f, 0f, 0.5f, false), 2, 1f);
            ops.lion(p, g, b, ranges, new LionConfig(1e-4f, 0.9f, 0.99f, 0.25f), 1f);
        }
        assertThat(ops.calls).containsExactly("sgd p+0 buf 12 100 3 wd 0.5", "sgd p+20 buf 8 105 2 wd 0.0",
                "sgd p+0 buf 0 100 3 wd 0.5", "sgd p+20 buf 0 105 2 wd 0.0", // no momentum: buf passed as it is
                "lion m 12 100 3 wd 0.25", "lion m 8 105 2 wd 0.0");
        assertThatThrownBy(() -> ops.lion(MemorySegment.NULL, MemorySegment.NULL, MemorySegment.NULL,
                List.of(new AdamWRange(5, 0, 2, true), new AdamWRange(0, 0, 6, true)),
                new LionConfig(1e-4f, 0.9f, 0.99f, 0f), 1f)).hasMessageContaining("ranges[1]");
    }
}
