package io.accel4j.train.parallel;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterLayout;
import java.util.BitSet;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** ZeRO-2/3's split of the parameters: every element in exactly one rank's shard, each unit split evenly. */
class UnitShardsTest {

    @ParameterizedTest(name = "L={0}, N={1}")
    @CsvSource({"1, 1", "1, 2", "3, 3", "2, 5", "3, 7", "1, 1000"})
    void theRanksShardsPartitionTheParameters(int L, int ranks) {
        ParameterLayout layout = new ParameterLayout(new GptConfig(12, 11, 16, L, 2, 8)); // odd sizes
        long psi = layout.count();
        BitSet seen = new BitSet((int) psi);
        long total = 0, most = 0;
        for (int r = 0; r < ranks; r++) {
            UnitShards s = new UnitShards(layout, ranks, r);
            long inShard = 0;
            BitSet shardSlots = new BitSet();
            for (UnitShards.Piece p : s.pieces()) {
                assertThat(seen.get((int) p.flat(), (int) (p.flat() + p.length())).isEmpty())
                        .as("rank %d's piece %s is nobody else's", r, p).isTrue();
                seen.set((int) p.flat(), (int) (p.flat() + p.length()));
                assertThat(shardSlots.get((int) p.shard(), (int) (p.shard() + p.length())).isEmpty()).isTrue();
                shardSlots.set((int) p.shard(), (int) (p.shard() + p.length()));
                inShard += p.length();
            }
            assertThat(inShard).isEqualTo(s.shardLength());
            assertThat(shardSlots.cardinality()).as("the shard is filled without gaps").isEqualTo((int) inShard);
            for (ParameterLayout.Unit u : layout.units()) { // each unit split as evenly as Chunks splits
                assertThat(s.chunkLength(u.index())).isBetween(u.count() / ranks, (u.count() + ranks - 1) / ranks);
            }
            total += inShard;
            most = Math.max(most, inShard);
        }
        assertThat(total).isEqualTo(psi);
        assertThat(seen.cardinality()).isEqualTo((int) psi);
        assertThat(most).isEqualTo(UnitShards.largestShard(layout, ranks))
                .isBetween((psi + ranks - 1) / ranks, (psi + ranks - 1) / ranks + L + 1);
    }
}
