package io.accel4j.collectives;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@link RingSchedule}, the step list {@link NcclRing} queues on the GPU, run on the host: N simulated ranks exchange
 * chunks step by step exactly as the NCCL sends/receives and the combine/divide kernels would, and the result must be
 * {@link RingCommunicator}'s bit for bit (same chunks, same order of additions, same single AVG division).
 */
class RingScheduleTest {

    @ParameterizedTest
    @CsvSource({"1,1001", "2,1001", "3,1001", "4,7", "5,3", "5,1003"})
    void simulatedNcclRingMatchesRingCommunicator(int n, int count) {
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        float[][] in = new float[n][count];
        for (float[] x : in) {
            for (int i = 0; i < count; i++) {
                x[i] = (float) rnd.nextDouble(-3, 3);
            }
        }
        in[0][0] = -0.0f; // MAX: +0 beats −0 (Math.max)
        if (n > 1) {
            in[1][0] = 0.0f;
        }
        for (ReduceOp op : ReduceOp.values()) {
            float[][] sim = simulate(in, op);
            float[][] ref = ringCommunicator(in, op);
            for (int r = 0; r < n; r++) {
                for (int i = 0; i < count; i++) {
                    assertThat(Float.floatToRawIntBits(sim[r][i])).as("%s rank %d element %d, seed %d", op, r, i, seed)
                            .isEqualTo(Float.floatToRawIntBits(ref[r][i]));
                }
            }
        }
    }

    /** The NCCL ring, one lock-step round per step: every rank sends, then every rank receives from its left. */
    static float[][] simulate(float[][] in, ReduceOp op) {
        int n = in.length, count = in[0].length;
        float[][] buf = new float[n][];
        for (int r = 0; r < n; r++) {
            buf[r] = in[r].clone();
        }
        List<List<RingSchedule.Step>> steps = java.util.stream.IntStream.range(0, n)
                .mapToObj(r -> RingSchedule.steps(n, r)).toList();
        boolean[] divided = new boolean[n];
        for (int k = 0; k < 2 * (n - 1); k++) {
            float[][] wire = new float[n][];
            for (int r = 0; r < n; r++) {
                RingSchedule.Step s = steps.get(r).get(k);
                if (!s.combine() && op == ReduceOp.AVG && !divided[r]) {
                    long a = Chunks.start(count, n, r), b = Chunks.start(count, n, r + 1);
                    for (long i = a; i < b; i++) {
                        buf[r][(int) i] = buf[r][(int) i] / n; // ring_divide_f32
                    }
                    divided[r] = true;
                }
                wire[r] = java.util.Arrays.copyOfRange(buf[r], (int) Chunks.start(count, n, s.send()),
                        (int) Chunks.start(count, n, s.send() + 1));
            }
            for (int r = 0; r < n; r++) {
                RingSchedule.Step s = steps.get(r).get(k);
                int left = (r - 1 + n) % n;
                assertThat(s.recv()).as("step %d: rank %d receives what its left sends", k, r)
                        .isEqualTo(steps.get(left).get(k).send());
                float[] got = wire[left];
                int at = (int) Chunks.start(count, n, s.recv());
                for (int i = 0; i < got.length; i++) {
                    float own = buf[r][at + i];
                    buf[r][at + i] = !s.combine() ? got[i]
                            : op == ReduceOp.MAX ? Math.max(own, got[i]) : own + got[i]; // ring_combine_f32
                }
            }
        }
        if (n == 1 && op == ReduceOp.AVG) {
            for (int i = 0; i < count; i++) {
                buf[0][i] = buf[0][i] / 1;
            }
        }
        return buf;
    }

    static float[][] ringCommunicator(float[][] in, ReduceOp op) {
        int n = in.length, count = in[0].length;
        try (InProcessGroup g = InProcessGroup.create(n, Duration.ofSeconds(60))) {
            List<float[]> out = g.run(comm -> {
                try (Arena arena = Arena.ofShared()) {
                    MemorySegment b = arena.allocate(4L * count);
                    MemorySegment.copy(in[comm.rank()], 0, b, ValueLayout.JAVA_FLOAT, 0, count);
                    comm.allReduce(b, count, DType.FP32, op);
                    return b.toArray(ValueLayout.JAVA_FLOAT);
                }
            });
            return out.toArray(float[][]::new);
        }
    }
}
