package io.accel4j.pipeline;

import static org.assertj.core.api.Assertions.assertThat;
import io.accel4j.train.CountingMemory;

import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.fit.Learner;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * What the schedules keep alive, seen by the allocator: each stage's backend memory counts the bytes allocated and
 * live; after the build, a step only adds its micro-batch slots, so the growth is the slots the schedule kept at
 * once — at most P under 1F1B, M under GPipe — times a slot's bytes.
 */
class PipelineMemoryTest {

    @Test
    void oneFOneBKeepsAtMostPMicroBatchesAliveAndGPipeM() {
        int P = 2, M = 6;
        for (Schedule schedule : List.of(Schedule.ONE_F_ONE_B, Schedule.GPIPE)) {
            CountingMemory[] mem = {new CountingMemory(), new CountingMemory()};
            try (Parallel pool0 = new Parallel(1); Parallel pool1 = new Parallel(1);
                 Learner pp = PipelineGpt2Test.gpt2().backend(r -> mem[r].ops(new CpuOps(r == 0 ? pool0 : pool1))).pipeline(Gpt2Stages.of(PipelineGpt2Test.TINY), P, M, schedule).build()) {
                long[] built = {mem[0].live.get(), mem[1].live.get()};
                pp.fit(2, null);
                for (int s = 0; s < P; s++) {
                    PipelineRank r = pp.stages().get(s);
                    long grown = mem[s].peak.get() - built[s];
                    int slots = r.network().slotsAllocated();
                    assertThat(grown).as("%s stage %d: bytes allocated by the steps", schedule.name(), s)
                            .isEqualTo(slots * r.network().slotBytes());
                    if (schedule == Schedule.ONE_F_ONE_B) {
                        assertThat(slots).as("1F1B stage %d", s).isLessThanOrEqualTo(P);
                    } else if (s == 0) {
                        assertThat(slots).as("GPipe stage 0").isEqualTo(M);
                    }
                }
            }
        }
    }
}
