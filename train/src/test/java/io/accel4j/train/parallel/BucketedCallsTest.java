package io.accel4j.train.parallel;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.Pending;
import io.accel4j.core.memory.HostMemory;
import io.accel4j.fit.BucketedDataParallel;
import io.accel4j.fit.DataParallel;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.model.ParameterLayout.Param;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@code fit.BucketedDataParallel} over GPT-2's {@link LayerRanges} issues the all-reduces (offset, count) the
 * trainer's old {@code GradientBuckets} issued, in the same order, and counts the same layer buckets: run side by side
 * with it before its deletion (commit 20badec), now against {@link #expected}, its rule written out. For layers
 * reported L−1 … 0, a bucket closes once its layers hold at least bucketBytes; each bucket of layers
 * {@code [lo, hi)} is the 12 per-layer tensors' slices {@code [layerOffset(lo), layerOffset(hi))} in llm.c's order;
 * the final report (−1) closes the open bucket, then wte+wpe and lnfw+lnfb. The same collectives on the same bytes
 * give the same bits on any communicator, at any number of ranks.
 */
class BucketedCallsTest {

    private static final int RANKS = 3;

    /** A communicator of {@value #RANKS} ranks that records each all-reduce's place and length and does nothing. */
    private static Communicator recording(MemorySegment base, List<long[]> calls) {
        Pending done = new Pending() {
            @Override
            public void await() {
            }

            @Override
            public boolean isDone() {
                return true;
            }
        };
        return (Communicator) Proxy.newProxyInstance(Communicator.class.getClassLoader(),
                new Class<?>[] {Communicator.class}, (proxy, m, args) -> switch (m.getName()) {
                    case "rank" -> 0;
                    case "size" -> RANKS;
                    case "deviceBuffers" -> false;
                    case "timeout" -> Duration.ofSeconds(1);
                    case "allReduceAsync" -> {
                        MemorySegment buf = (MemorySegment) args[0];
                        calls.add(new long[] {(buf.address() - base.address()) / Float.BYTES, (long) args[1]});
                        yield done;
                    }
                    case "close" -> null;
                    default -> throw new UnsupportedOperationException(m.getName());
                });
    }

    private static final Param[] PER_LAYER = {Param.LN1W, Param.LN1B, Param.QKVW, Param.QKVB, Param.ATTPROJW,
        Param.ATTPROJB, Param.LN2W, Param.LN2B, Param.FCW, Param.FCB, Param.FCPROJW, Param.FCPROJB};

    /** The old buckets' calls for one step, added to {@code calls}; returns the layer buckets. */
    private static int expected(ParameterLayout layout, long bucketBytes, List<long[]> calls) {
        int L = layout.config().L();
        long layerFloats = 0;
        for (Param p : PER_LAYER) {
            layerFloats += layout.tensor(p).count() / L;
        }
        int buckets = 0, hi = L;
        for (int lo = L - 1; lo >= 0; lo--) {
            if ((long) (hi - lo) * layerFloats * Float.BYTES >= bucketBytes || lo == 0) {
                for (Param p : PER_LAYER) {
                    ParameterLayout.Span t = layout.tensor(p);
                    calls.add(new long[] {t.layerOffset(lo), t.layerOffset(hi) - t.layerOffset(lo)});
                }
                buckets++;
                hi = lo;
            }
        }
        calls.add(new long[] {layout.tensor(Param.WTE).offset(),
            layout.tensor(Param.WTE).count() + layout.tensor(Param.WPE).count()});
        calls.add(new long[] {layout.tensor(Param.LNFW).offset(),
            layout.tensor(Param.LNFW).count() + layout.tensor(Param.LNFB).count()});
        return buckets;
    }

    @ParameterizedTest(name = "L={0} bucketBytes={1}")
    @CsvSource({"1,1", "3,1", "5,1", "5,2000", "5,5000", "4,100000000", "7,3000"})
    void theSameCollectivesInTheSameOrder(int L, long bucketBytes) {
        ParameterLayout layout = new ParameterLayout(new GptConfig(8, 11, 16, L, 2, 8));
        long count = layout.count();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment grads = arena.allocate(count * Float.BYTES, 64);
            List<long[]> oldCalls = new ArrayList<>(), newCalls = new ArrayList<>();
            DataParallel dp = new DataParallel(recording(grads, newCalls), HostMemory.INSTANCE, 8);
            int oldBuckets = 0;
            try (BucketedDataParallel now = new BucketedDataParallel(dp, grads, count, LayerRanges.of(layout),
                    bucketBytes)) {
                for (int step = 0; step < 2; step++) {
                    for (int l = L - 1; l >= -1; l--) {
                        now.gradientsDone().accept(l);
                    }
                    now.reduce(grads, count);
                    oldBuckets += expected(layout, bucketBytes, oldCalls);
                }
                assertThat(newCalls).isNotEmpty();
                assertThat(newCalls.stream().map(java.util.Arrays::toString).toList())
                        .containsExactlyElementsOf(oldCalls.stream().map(java.util.Arrays::toString).toList());
                assertThat(now.buckets()).isEqualTo(oldBuckets);
                long reduced = 0;
                for (long[] c : newCalls) {
                    reduced += c[1];
                }
                assertThat(reduced).as("every element once a step").isEqualTo(2 * count);
            }
        }
    }
}
