package io.accel4j.train.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.train.data.SampleOrder.Mode;
import io.accel4j.train.io.FileFormatException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Shards ({@link TokenShards}, llm.c's order over shards) and several reading threads. */
class ShardedLoaderTest {

    private static final long SEED = 42;

    @TempDir
    Path dir;

    /**
     * Shard k (of sizes n_k) holds tokens 1000·k + i, so a batch's first token names its shard and position. Odd
     * sizes: shards of 3, 1 and 4 samples at B·T = 6 (4 tokens left over in the first, as llm.c drops them).
     */
    private List<Path> shards(int... sizes) throws IOException {
        List<Path> out = new ArrayList<>();
        for (int k = 0; k < sizes.length; k++) {
            int[] t = new int[sizes[k]];
            for (int i = 0; i < t.length; i++) {
                t[i] = 1000 * k + i;
            }
            Path f = dir.resolve("train_" + k + ".bin");
            TokenFile.write(f, t);
            out.add(f);
        }
        return out;
    }

    private static int[] starts(DataLoader dl, int n) {
        int bt = dl.B() * dl.T();
        int[] in = new int[bt], tg = new int[bt], s = new int[n];
        for (int i = 0; i < n; i++) {
            dl.next(in, tg);
            for (int j = 0; j < bt; j++) {
                assertThat(in[j]).isEqualTo(in[0] + j);
                assertThat(tg[j]).isEqualTo(in[0] + j + 1); // never across a shard's end
            }
            s[i] = in[0];
        }
        return s;
    }

    @Test
    void sequentialReadsTheShardsInTheGivenOrder() throws IOException {
        try (TokenShards ts = TokenShards.open(shards(23, 7, 25));
             DataLoader dl = new DataLoader(ts, 2, 3, 0, 1, Mode.SEQUENTIAL, SEED, 1)) {
            assertThat(dl.samplesPerEpoch()).isEqualTo(3 + 1 + 4);
            assertThat(starts(dl, 10)).containsExactly(0, 6, 12, 1000, 2000, 2006, 2012, 2018, 0, 6);
        }
    }

    /** llm.c's order by hand: per epoch a shuffle of the shards, then of each shard's samples, one MT19937 stream. */
    @ParameterizedTest
    @EnumSource(value = Mode.class, names = {"SHUFFLED", "SHUFFLED_LLMC"})
    void shuffledPermutesTheShardsThenEachShardsSamples(Mode mode) throws IOException {
        int[] samples = {3, 1, 4};
        int[] base = {0, 1000, 2000};
        Mt19937 rng = new Mt19937(SEED); // rank 0: both modes seed with 42
        List<Integer> expected = new ArrayList<>();
        for (int epoch = 0; epoch < 3; epoch++) {
            int[] shards = {0, 1, 2};
            SampleOrder.randomPermutation(shards, 3, rng);
            for (int k : shards) {
                int[] intra = new int[samples[k]];
                for (int i = 0; i < intra.length; i++) {
                    intra[i] = i;
                }
                SampleOrder.randomPermutation(intra, intra.length, rng);
                for (int i : intra) {
                    expected.add(base[k] + 6 * i);
                }
            }
        }
        try (TokenShards ts = TokenShards.open(shards(23, 7, 25))) {
            for (int threads : new int[] {1, 3}) {
                try (DataLoader dl = new DataLoader(ts, 2, 3, 0, 1, mode, SEED, threads)) {
                    int[] got = starts(dl, expected.size());
                    assertThat(got).as("%d threads", threads)
                            .containsExactly(expected.stream().mapToInt(Integer::intValue).toArray());
                }
            }
        }
    }

    @Test
    void oneShardIsTheSingleFileOrderExactly() throws IOException {
        try (TokenShards ts = TokenShards.open(shards(200));
             DataLoader a = new DataLoader(ts, 2, 3, 0, 1, Mode.SHUFFLED, SEED, 2);
             DataLoader b = new DataLoader(ts.file(0), 2, 3, 0, 1, Mode.SHUFFLED, SEED)) {
            assertThat(starts(a, 80)).containsExactly(starts(b, 80));
            assertThat(a.position()).isEqualTo(b.position());
        }
    }

    @Test
    void twoRanksSplitEachSampleAndAgreeOnTheShardOrder() throws IOException {
        try (TokenShards ts = TokenShards.open(shards(41, 13, 30));
             DataLoader one = new DataLoader(ts, 4, 3, 0, 1, Mode.SHUFFLED, SEED, 1);
             DataLoader r0 = new DataLoader(ts, 2, 3, 0, 2, Mode.SHUFFLED, SEED, 2);
             DataLoader r1 = new DataLoader(ts, 2, 3, 1, 2, Mode.SHUFFLED, SEED, 1)) {
            int[] whole = starts(one, 12);
            int[] a = starts(r0, 12), b = starts(r1, 12);
            for (int i = 0; i < 12; i++) {
                assertThat(a[i]).isEqualTo(whole[i]);
                assertThat(b[i]).isEqualTo(whole[i] + 6);
            }
        }
    }

    @Test
    void aPositionResumesMidEpochWithAnyThreadCount() throws IOException {
        try (TokenShards ts = TokenShards.open(shards(23, 7, 25, 31))) {
            int[] all;
            try (DataLoader dl = new DataLoader(ts, 2, 3, 0, 1, Mode.SHUFFLED_LLMC, SEED, 1)) {
                all = starts(dl, 30);
            }
            DataLoader.State mid;
            try (DataLoader dl = new DataLoader(ts, 2, 3, 0, 1, Mode.SHUFFLED_LLMC, SEED, 4)) {
                assertThat(starts(dl, 13)).containsExactly(Arrays.copyOf(all, 13));
                mid = DataLoader.State.decode(dl.position().encode());
            }
            try (DataLoader dl = new DataLoader(ts, 2, 3, 0, 1, Mode.SHUFFLED_LLMC, SEED, 2)) {
                dl.seek(mid);
                assertThat(starts(dl, 17)).containsExactly(Arrays.copyOfRange(all, 13, 30));
            }
        }
    }

    @Test
    void manyThreadsHandOutEveryBatchOnceInOrder() throws IOException {
        try (TokenShards ts = TokenShards.open(shards(601, 599));
             DataLoader a = new DataLoader(ts, 1, 4, 0, 1, Mode.SHUFFLED, 7, 1);
             DataLoader b = new DataLoader(ts, 1, 4, 0, 1, Mode.SHUFFLED, 7, 8)) {
            int n = a.samplesPerEpoch();
            int[] x = starts(a, n), y = starts(b, n);
            assertThat(y).containsExactly(x);
            Set<Integer> seen = new HashSet<>();
            for (int s : y) {
                seen.add(s);
            }
            assertThat(seen).hasSize(n); // every sample once in the epoch
            assertThat(b.waitNanos()).isGreaterThanOrEqualTo(0);
            assertThat(b.threads()).isEqualTo(8);
        }
    }

    @Test
    void globsAndListsExpandAndBadOnesAreNamed() throws IOException {
        shards(23, 7, 25);
        Files.writeString(dir.resolve("notes.txt"), "x");
        String glob = dir.resolve("train_*.bin").toString();
        assertThat(TokenShards.expand(glob)).containsExactly(dir.resolve("train_0.bin"), dir.resolve("train_1.bin"),
                dir.resolve("train_2.bin"));
        assertThat(TokenShards.expand(dir.resolve("train_2.bin") + "," + glob)).containsExactly(
                dir.resolve("train_2.bin"), dir.resolve("train_0.bin"), dir.resolve("train_1.bin"));
        assertThat(TokenShards.isPattern(glob)).isTrue();
        assertThat(TokenShards.isPattern(dir.resolve("train_0.bin").toString())).isFalse();
        assertThatThrownBy(() -> TokenShards.expand(dir.resolve("val_*.bin").toString()))
                .isInstanceOf(NoSuchFileException.class).hasMessageContaining("val_*.bin: matches no file");
        assertThatThrownBy(() -> TokenShards.expand(glob + "," + dir.resolve("gone.bin")))
                .isInstanceOf(NoSuchFileException.class).hasMessageContaining("gone.bin: does not exist");
        assertThatThrownBy(() -> TokenShards.expand(glob + ","))
                .hasMessageContaining("has an empty item");
        // a shard that is not a token file: its name and the field
        Files.write(dir.resolve("train_3.bin"), new byte[2000]);
        assertThatThrownBy(() -> TokenShards.open(TokenShards.expand(glob))).isInstanceOf(FileFormatException.class)
                .hasMessageContaining("train_3.bin: header[0] (magic) is 0, expected 20240520");
    }

    @Test
    void aShardTooSmallOrOutsideTheVocabularyIsNamed() throws IOException {
        try (TokenShards ts = TokenShards.open(shards(23, 5))) {
            assertThatThrownBy(() -> new DataLoader(ts, 2, 3, 0, 1, Mode.SEQUENTIAL, SEED, 1))
                    .hasMessageContaining("train_1.bin has 5 tokens, fewer than the 1*2*3+1 = 7");
            assertThatThrownBy(() -> ts.checkVocabulary(1000)).isInstanceOf(FileFormatException.class)
                    .hasMessageContaining("train_1.bin: token 0 is 1000, outside the model's vocabulary [0, 1000)");
            assertThat(ts.tokens()).isEqualTo(28);
            assertThat(ts.describe()).contains("2 shards");
        }
    }
}
