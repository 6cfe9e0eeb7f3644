package io.accel4j.nn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.Bf16;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.CountingMemory;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link HalfParameters}: a wide unit longer than the scratch ({@link HalfParameters#CHUNK}) and two half units, one
 * of two pieces; what a unit reads while acquired is the store's bf16 values exactly, every element is handed to the
 * optimizer's writer once and lands in the store, and the bytes are the formula's.
 */
class HalfParametersTest {

    private static final long WIDE = HalfParameters.CHUNK + 4_465;
    private static final long COUNT = WIDE + 69;
    private static Parallel pool;
    private static CpuOps ops;

    @BeforeAll
    static void setUp() {
        pool = new Parallel(2);
        ops = new CpuOps(pool);
    }

    @AfterAll
    static void tearDown() {
        pool.close();
    }

    /** Unit 0 wide [0, WIDE); unit 1 half: [WIDE, +40) and [WIDE+60, +9); unit 2 half: [WIDE+40, +20). */
    static List<HalfUnitLayout.Unit> units() {
        return List.of(
                new HalfUnitLayout.Unit(List.of(new HalfUnitLayout.Piece(0, WIDE, 0)), false),
                new HalfUnitLayout.Unit(List.of(new HalfUnitLayout.Piece(WIDE, 40, 0),
                        new HalfUnitLayout.Piece(WIDE + 60, 9, 40)), true),
                new HalfUnitLayout.Unit(List.of(new HalfUnitLayout.Piece(WIDE + 40, 20, 0)), true));
    }

    private static float[] widened(HalfParameters p, Arena a) {
        MemorySegment dst = a.allocate(COUNT * 4);
        dst.fill((byte) 0x7f); // NaN-ish poison
        p.widen(dst);
        return dst.toArray(ValueLayout.JAVA_FLOAT);
    }

    @Test
    void unitsReadTheStoreAndTheWriterReachesEveryElementOnce() {
        long seed = 31;
        Random r = new Random(seed);
        CountingMemory counted = new CountingMemory();
        try (HalfParameters p = new HalfParameters(counted.ops(ops), COUNT, units()); Arena a = Arena.ofShared()) {
            long bytes = WIDE * 4 + 69 * 2 + 49 * 4 + HalfParameters.CHUNK * 2;
            assertThat(HalfParameters.bytes(units(), COUNT)).isEqualTo(bytes);
            assertThat(p.bytes()).isEqualTo(bytes);
            assertThat(counted.live.get()).isEqualTo(bytes);
            MemorySegment host = a.allocate(COUNT * 2);
            float[] want = new float[(int) COUNT];
            for (int i = 0; i < COUNT; i++) {
                short h = Bf16.fromFloat((float) r.nextGaussian());
                host.setAtIndex(ValueLayout.JAVA_SHORT, i, h);
                want[i] = Bf16.toFloat(h);
            }
            p.load(host);
            assertThat(widened(p, a)).as("seed %d", seed).containsExactly(want);
            p.acquire(1);
            assertThat(p.param(1, WIDE + 61, 8).toArray(ValueLayout.JAVA_FLOAT))
                    .containsExactly(java.util.Arrays.copyOfRange(want, (int) WIDE + 61, (int) WIDE + 69));
            assertThatThrownBy(() -> p.acquire(2)).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("one unit at a time");
            assertThatThrownBy(() -> p.update(0, COUNT, (o, b, n) -> { })).isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(() -> p.param(1, WIDE + 30, 20)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("not inside one piece");
            p.release(1);
            assertThatThrownBy(() -> p.param(2, WIDE + 40, 1)).isInstanceOf(IllegalStateException.class);
            assertThat(p.param(0, 5, 3).toArray(ValueLayout.JAVA_FLOAT)).containsExactly(want[5], want[6], want[7]);

            // the optimizer's writer: element i gets bf16(i / 7), each once, in order
            List<long[]> calls = new ArrayList<>();
            p.update(0, COUNT, (o, b, n) -> {
                assertThat(b.byteSize()).isEqualTo(n * 2);
                calls.add(new long[] {o, n});
                for (long i = 0; i < n; i++) {
                    b.setAtIndex(ValueLayout.JAVA_SHORT, i, Bf16.fromFloat((o + i) / 7f));
                }
            });
            long next = 0;
            for (long[] c : calls) {
                assertThat(c[0]).isEqualTo(next);
                assertThat(c[1]).isLessThanOrEqualTo(Math.max(HalfParameters.CHUNK, 40));
                next += c[1];
            }
            assertThat(next).isEqualTo(COUNT);
            for (int i = 0; i < COUNT; i++) {
                want[i] = Bf16.toFloat(Bf16.fromFloat(i / 7f));
            }
            assertThat(widened(p, a)).containsExactly(want);
            p.acquire(1); // widened again: the update made the working region stale
            assertThat(p.param(1, WIDE, 40).toArray(ValueLayout.JAVA_FLOAT))
                    .containsExactly(java.util.Arrays.copyOfRange(want, (int) WIDE, (int) WIDE + 40));
            p.release(1);
        }
        assertThat(counted.live.get()).isZero();
    }

    @Test
    void unitsThatDoNotCoverTheVectorAreRefused() {
        List<HalfUnitLayout.Unit> gap = List.of(new HalfUnitLayout.Unit(List.of(new HalfUnitLayout.Piece(0, 5, 0)),
                true), new HalfUnitLayout.Unit(List.of(new HalfUnitLayout.Piece(6, 4, 0)), true));
        assertThatThrownBy(() -> new HalfParameters(ops, 10, gap)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("the units must cover the 10 parameters once each: element 5 is in no unit");
        assertThatThrownBy(() -> HalfParameters.bytes(units(), COUNT + 1)).isInstanceOf(
                IllegalArgumentException.class).hasMessageContaining("the vector has " + (COUNT + 1));
    }
}
