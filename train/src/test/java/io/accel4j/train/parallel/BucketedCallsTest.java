package io.accel4j.train.parallel;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.Pending;
import io.accel4j.core.memory.HostMemory;
import io.accel4j.fit.BucketedDataParallel;
import io.accel4j.fit.DataParallel;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterLayout;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Side by side: the trainer's old {@link GradientBuckets} and {@code fit.BucketedDataParallel} over GPT-2's
 * {@link LayerRanges} issue the same all-reduces (offset, count), in the same order, for the same backward reports,
 * and count the same layer buckets. The same collectives on the same bytes give the same bits on any communicator, at
 * any number of ranks.
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

    @ParameterizedTest(name = "L={0} bucketBytes={1}")
    @CsvSource({"1,1", "3,1", "5,1", "5,2000", "5,5000", "4,100000000", "7,3000"})
    void theSameCollectivesInTheSameOrder(int L, long bucketBytes) {
        ParameterLayout layout = new ParameterLayout(new GptConfig(8, 11, 16, L, 2, 8));
        long count = layout.count();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment grads = arena.allocate(count * Float.BYTES, 64);
            List<long[]> oldCalls = new ArrayList<>(), newCalls = new ArrayList<>();
            GradientBuckets old = new GradientBuckets(recording(grads, oldCalls), grads, layout, bucketBytes);
            DataParallel dp = new DataParallel(recording(grads, newCalls), HostMemory.INSTANCE, 8);
            try (BucketedDataParallel now = new BucketedDataParallel(dp, grads, count, LayerRanges.of(layout),
                    bucketBytes)) {
                for (int step = 0; step < 2; step++) {
                    for (int l = L - 1; l >= -1; l--) {
                        old.hook().accept(l);
                        now.gradientsDone().accept(l);
                    }
                    old.finish();
                    now.reduce(grads, count);
                }
                assertThat(newCalls).isNotEmpty();
                assertThat(newCalls.stream().map(java.util.Arrays::toString).toList())
                        .containsExactlyElementsOf(oldCalls.stream().map(java.util.Arrays::toString).toList());
                assertThat(now.buckets()).isEqualTo(old.layerBuckets());
                long reduced = 0;
                for (long[] c : newCalls) {
                    reduced += c[1];
                }
                assertThat(reduced).as("every element once a step").isEqualTo(2 * count);
            }
        }
    }
}
