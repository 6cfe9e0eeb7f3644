package io.accel4j.grid;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.collectives.InProcessGroup;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The Megatron layout (tp innermost, then dp, pp outermost) and the three groups it splits: every group's members,
 * checked by summing world ranks over each group (exact small integers), and the layout's usage errors.
 */
class ProcessGridTest {

    @Test
    void coordinatesAreMegatrons() {
        GridLayout g = new GridLayout(2, 2, 2); // D=2, P=2, T=2
        assertThat(g.coordinates(0)).isEqualTo(new GridLayout.Coordinates(0, 0, 0));
        assertThat(g.coordinates(1)).isEqualTo(new GridLayout.Coordinates(0, 0, 1));
        assertThat(g.coordinates(2)).isEqualTo(new GridLayout.Coordinates(1, 0, 0));
        assertThat(g.coordinates(5)).isEqualTo(new GridLayout.Coordinates(0, 1, 1));
        for (int r = 0; r < 8; r++) {
            GridLayout.Coordinates c = g.coordinates(r);
            assertThat(g.rank(c.dp(), c.pp(), c.tp())).isEqualTo(r);
        }
    }

    @Test
    void groupsHoldTheRightRanks() {
        GridLayout layout = new GridLayout(3, 2, 2); // 12 ranks: odd D
        try (InProcessGroup world = InProcessGroup.create(12, Duration.ofSeconds(30))) {
            List<int[]> sums = world.run(comm -> {
                try (ProcessGrid grid = ProcessGrid.of(comm, layout); Arena a = Arena.ofShared()) {
                    GridLayout.Coordinates c = grid.coordinates();
                    assertThat(grid.tensor().rank()).isEqualTo(c.tp());
                    assertThat(grid.data().rank()).isEqualTo(c.dp());
                    assertThat(grid.pipeline().rank()).isEqualTo(c.pp());
                    assertThat(grid.tensor().size()).isEqualTo(2);
                    assertThat(grid.data().size()).isEqualTo(3);
                    assertThat(grid.pipeline().size()).isEqualTo(2);
                    MemorySegment v = a.allocate(4, 64);
                    int[] out = new int[3];
                    int i = 0;
                    for (var g : List.of(grid.tensor(), grid.data(), grid.pipeline())) {
                        v.set(ValueLayout.JAVA_FLOAT, 0, comm.rank());
                        g.allReduce(v, 1, DType.FP32, ReduceOp.SUM);
                        out[i++] = (int) v.get(ValueLayout.JAVA_FLOAT, 0);
                    }
                    return out;
                }
            });
            for (int r = 0; r < 12; r++) {
                GridLayout.Coordinates c = layout.coordinates(r);
                int t = 0, d = 0, p = 0;
                for (int x = 0; x < 2; x++) {
                    t += layout.rank(c.dp(), c.pp(), x);
                    p += layout.rank(c.dp(), x, c.tp());
                }
                for (int x = 0; x < 3; x++) {
                    d += layout.rank(x, c.pp(), c.tp());
                }
                assertThat(sums.get(r)).as("rank %d", r).containsExactly(t, d, p);
            }
        }
    }

    @Test
    void badLayoutsAreUsageErrorsNamingTheFlags() {
        assertThatThrownBy(() -> new GridLayout(1, 1, 2).requireWorld(3))
                .hasMessage("--dp 1 × --tp 2 × --pp 1 = 2 ranks, but the world has 3: D·T·P must equal the number "
                        + "of ranks (--ranks or mpirun's -np)");
        assertThatThrownBy(() -> GridLayout.of(6, 1, 4))
                .hasMessageStartingWith("--tp 4 × --pp 1 = 4 does not divide the 6 ranks");
        assertThatThrownBy(() -> new GridLayout(1, 0, 1)).hasMessageContaining("--pp 0");
        assertThat(GridLayout.of(8, 2, 2)).isEqualTo(new GridLayout(2, 2, 2));
    }
}
