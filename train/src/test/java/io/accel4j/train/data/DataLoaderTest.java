package io.accel4j.train.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.train.data.SampleOrder.Mode;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class DataLoaderTest {

    private static final long SEED = 20240520;

    @TempDir
    Path dir;

    /** A token file whose token i is i mod 65536 (so a batch shows where it was read), N tokens. */
    private TokenFile counting(int n) throws IOException {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = i & 0xFFFF;
        }
        Path f = dir.resolve("count" + n + ".bin");
        TokenFile.write(f, t);
        return TokenFile.open(f);
    }

    @Test
    void aBatchIsBTPlusOneConsecutiveTokensShiftedForTheTargets() throws IOException {
        try (TokenFile tf = counting(100);
             DataLoader dl = new DataLoader(tf, 2, 3, 0, 1, Mode.SEQUENTIAL, 42);
             Arena arena = Arena.ofConfined()) {
            assertThat(dl.samplesPerEpoch()).isEqualTo(16); // 99 / 6
            MemorySegment in = arena.allocate(6 * 4);
            MemorySegment tg = arena.allocate(6 * 4);
            dl.next(in, tg);
            assertThat(in.toArray(ValueLayout.JAVA_INT)).containsExactly(0, 1, 2, 3, 4, 5);
            assertThat(tg.toArray(ValueLayout.JAVA_INT)).containsExactly(1, 2, 3, 4, 5, 6);
            dl.next(in, tg);
            assertThat(in.toArray(ValueLayout.JAVA_INT)).containsExactly(6, 7, 8, 9, 10, 11);
            assertThat(tg.toArray(ValueLayout.JAVA_INT)).containsExactly(7, 8, 9, 10, 11, 12);
            assertThatThrownBy(() -> dl.next(arena.allocate(5 * 4), tg)).hasMessageContaining("B*T = 6");
        }
    }

    @Test
    void sequentialWrapsAroundAfterAnEpoch() throws IOException {
        try (TokenFile tf = counting(20); DataLoader dl = new DataLoader(tf, 1, 6, 0, 1, Mode.SEQUENTIAL, 42)) {
            // S = 19 / 6 = 3: starts 0, 6, 12, then 0 again
            assertThat(starts(dl, 5)).containsExactly(0, 6, 12, 0, 6);
            assertThat(dl.position().order().epoch()).isEqualTo(1);
        }
    }

    /**
     * Data parallelism: at every step, R ranks at batch B together read exactly what one rank at batch R·B reads, in
     * rank order — over several epochs, sequential and shuffled (shared seed).
     */
    @ParameterizedTest
    @EnumSource(value = Mode.class, names = {"SEQUENTIAL", "SHUFFLED"})
    void ranksTogetherReadWhatOneBigRankReads(Mode mode) throws IOException {
        int ranks = 3, B = 2, T = 5;
        try (TokenFile tf = counting(1000)) {
            DataLoader one = new DataLoader(tf, ranks * B, T, 0, 1, mode, SEED);
            List<DataLoader> many = new ArrayList<>();
            for (int r = 0; r < ranks; r++) {
                many.add(new DataLoader(tf, B, T, r, ranks, mode, SEED));
            }
            try {
                assertThat(one.samplesPerEpoch()).isEqualTo(33); // 999 / 30
                int[] bigIn = new int[ranks * B * T], bigTg = new int[ranks * B * T];
                int[] in = new int[B * T], tg = new int[B * T];
                for (int step = 0; step < 3 * 33 + 5; step++) {
                    one.next(bigIn, bigTg);
                    for (int r = 0; r < ranks; r++) {
                        many.get(r).next(in, tg);
                        assertThat(in).as("step %d rank %d", step, r)
                                .containsExactly(Arrays.copyOfRange(bigIn, r * B * T, (r + 1) * B * T));
                        assertThat(tg).containsExactly(Arrays.copyOfRange(bigTg, r * B * T, (r + 1) * B * T));
                    }
                }
            } finally {
                one.close();
                many.forEach(DataLoader::close);
            }
        }
    }

    /** Every rank reads each of its slices once per epoch, whatever the mode (llm.c's per-rank seeds included). */
    @ParameterizedTest
    @EnumSource(Mode.class)
    void everySliceIsReadOncePerEpoch(Mode mode) throws IOException {
        int ranks = 2, B = 1, T = 4;
        try (TokenFile tf = counting(81)) { // S = 80 / 8 = 10
            for (int r = 0; r < ranks; r++) {
                try (DataLoader dl = new DataLoader(tf, B, T, r, ranks, mode, SEED)) {
                    for (int epoch = 0; epoch < 2; epoch++) {
                        int[] s = starts(dl, 10);
                        Arrays.sort(s);
                        int rank = r;
                        assertThat(s).as("rank %d epoch %d", r, epoch).containsExactly(
                                java.util.stream.IntStream.range(0, 10).map(j -> (j * ranks + rank) * B * T).toArray());
                    }
                }
            }
        }
    }

    /** A loader built afresh and sought to a saved state hands out exactly the batches the original would have. */
    @ParameterizedTest
    @EnumSource(Mode.class)
    void resumingIsBitIdentical(Mode mode) throws IOException {
        SplittableRandom rnd = new SplittableRandom(SEED);
        int[] tokens = rnd.ints(500, 0, 50257).toArray();
        Path f = dir.resolve("r.bin");
        TokenFile.write(f, tokens);
        try (TokenFile tf = TokenFile.open(f)) {
            int B = 2, T = 7; // S = 499 / 28 = 17 per rank-pair
            for (int before : new int[] {0, 5, 17, 30}) {
                byte[] saved;
                List<int[]> expected = new ArrayList<>();
                try (DataLoader a = new DataLoader(tf, B, T, 1, 2, mode, SEED)) {
                    batches(a, before);
                    saved = a.position().encode();
                    expected.addAll(batches(a, 25)); // crosses at least one epoch boundary
                }
                try (DataLoader b = new DataLoader(tf, B, T, 1, 2, mode, SEED)) {
                    batches(b, 3); // wherever it was, seeking puts it back
                    b.seek(DataLoader.State.decode(saved));
                    assertThat(b.position().encode()).isEqualTo(saved);
                    List<int[]> got = batches(b, 25);
                    for (int i = 0; i < got.size(); i++) {
                        assertThat(got.get(i)).as("batch %d after %d (%s)", i, before, mode)
                                .containsExactly(expected.get(i));
                    }
                }
            }
        }
    }

    @Test
    void aStateOfAnotherLoaderIsRefused() throws IOException {
        try (TokenFile tf = counting(200);
             DataLoader a = new DataLoader(tf, 2, 3, 0, 1, Mode.SHUFFLED, 1);
             DataLoader b = new DataLoader(tf, 2, 4, 0, 1, Mode.SHUFFLED, 1);
             DataLoader c = new DataLoader(tf, 2, 3, 0, 1, Mode.SHUFFLED, 2)) {
            assertThatThrownBy(() -> b.seek(a.position())).hasMessageContaining("(T 3 vs 4)");
            assertThatThrownBy(() -> c.seek(a.position())).hasMessageContaining("(seed 1 vs 2)");
            assertThatThrownBy(() -> DataLoader.State.decode(new byte[] {1, 2, 3})).hasMessageContaining("truncated");
            byte[] bytes = a.position().encode();
            assertThatThrownBy(() -> DataLoader.State.decode(Arrays.copyOf(bytes, bytes.length - 4)))
                    .hasMessageContaining("corrupt");
            bytes[0] ^= 1;
            assertThatThrownBy(() -> DataLoader.State.decode(bytes)).hasMessageContaining("bad magic");
            int[] in = new int[6], tg = new int[6];
            a.next(in, tg); // still works after the refusals
        }
    }

    @Test
    void anErrorInThePrefetchThreadIsRethrownByNext() {
        AtomicInteger reads = new AtomicInteger();
        DataLoader.Reader failing = (start, dst, n) -> {
            if (reads.incrementAndGet() == 3) {
                throw new IllegalStateException("disk on fire");
            }
            Arrays.fill(dst, 0, n, 7);
        };
        try (DataLoader dl = new DataLoader(dir.resolve("x.bin"), 1000, failing, 2, 2, 0, 1, Mode.SEQUENTIAL, 1)) {
            int[] in = new int[4], tg = new int[4];
            dl.next(in, tg);
            dl.next(in, tg);
            assertThat(in).containsOnly(7);
            for (int i = 0; i < 2; i++) {
                assertThatThrownBy(() -> dl.next(in, tg))
                        .isInstanceOf(IllegalStateException.class)
                        .hasMessageContaining("x.bin")
                        .hasMessageContaining("disk on fire")
                        .cause().hasMessage("disk on fire");
            }
            assertThat(dl.thread()).isNull();
        }
    }

    @Test
    void closeStopsTheThreadAndWakesAWaitingNext() throws Exception {
        CountDownLatch never = new CountDownLatch(1);
        DataLoader.Reader blocked = (start, dst, n) -> {
            try {
                never.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted");
            }
        };
        DataLoader dl = new DataLoader(dir.resolve("y.bin"), 1000, blocked, 2, 2, 0, 1, Mode.SEQUENTIAL, 1);
        Thread prefetch = dl.thread();
        assertThat(prefetch.isDaemon()).isTrue();
        CompletableFuture<Void> waiting = CompletableFuture.runAsync(() -> dl.next(new int[4], new int[4]));
        Thread.sleep(50);
        assertThat(waiting).isNotDone();
        dl.close();
        assertThat(prefetch.isAlive()).isFalse();
        assertThatThrownBy(() -> waiting.get(5, TimeUnit.SECONDS))
                .isInstanceOf(ExecutionException.class)
                .cause().isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
        dl.close(); // idempotent
        assertThatThrownBy(() -> dl.next(new int[4], new int[4])).hasMessageContaining("closed");
    }

    @Test
    void aFileTooSmallForOneStepIsRefused() throws IOException {
        try (TokenFile tf = counting(12)) {
            assertThatThrownBy(() -> new DataLoader(tf, 2, 3, 0, 2, Mode.SEQUENTIAL, 1))
                    .hasMessageContaining("12 tokens, fewer than the 2*2*3+1 = 13");
            assertThatThrownBy(() -> new DataLoader(tf, 1, 1, 2, 2, Mode.SEQUENTIAL, 1))
                    .hasMessageContaining("rank must be in [0, 2)");
        }
    }

    /** The first token of each of the next n batches (the file counts, so that is where it was read). */
    private static int[] starts(DataLoader dl, int n) {
        int bt = dl.B() * dl.T();
        int[] in = new int[bt], tg = new int[bt];
        int[] s = new int[n];
        for (int i = 0; i < n; i++) {
            dl.next(in, tg);
            s[i] = in[0];
        }
        return s;
    }

    /** The next n batches, inputs then targets in one array each. */
    private static List<int[]> batches(DataLoader dl, int n) {
        int bt = dl.B() * dl.T();
        List<int[]> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            int[] in = new int[bt], tg = new int[bt];
            dl.next(in, tg);
            int[] both = Arrays.copyOf(in, 2 * bt);
            System.arraycopy(tg, 0, both, bt, bt);
            out.add(both);
        }
        return out;
    }
}
