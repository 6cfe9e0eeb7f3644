package io.accel4j.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.memory.HostMemory;
import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.fit.Learner;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * What the schedules keep alive, seen by the allocator: each stage's backend memory counts the bytes allocated and
 * live; after the build, a step only adds its micro-batch slots, so the growth is the slots the schedule kept at
 * once — at most P under 1F1B, M under GPipe — times a slot's bytes.
 */
class PipelineMemoryTest {

    /** Host memory that counts the bytes live and their peak. */
    static final class CountingMemory implements DeviceMemory {
        final AtomicLong live = new AtomicLong(), peak = new AtomicLong();

        @Override
        public DeviceArena arena() {
            DeviceArena a = HostMemory.INSTANCE.arena();
            return new DeviceArena() {
                long mine;

                @Override
                public MemorySegment allocate(long bytes) {
                    MemorySegment s = a.allocate(bytes);
                    mine += bytes;
                    peak.accumulateAndGet(live.addAndGet(bytes), Math::max);
                    return s;
                }

                @Override
                public void close() {
                    live.addAndGet(-mine);
                    mine = 0;
                    a.close();
                }
            };
        }

        @Override
        public void copyToDevice(MemorySegment host, MemorySegment device) {
            HostMemory.INSTANCE.copyToDevice(host, device);
        }

        @Override
        public void copyToHost(MemorySegment device, MemorySegment host) {
            HostMemory.INSTANCE.copyToHost(device, host);
        }

        @Override
        public void copy(MemorySegment src, MemorySegment dst) {
            HostMemory.INSTANCE.copy(src, dst);
        }

        @Override
        public void zero(MemorySegment device) {
            HostMemory.INSTANCE.zero(device);
        }

        @Override
        public boolean hostAccessible() {
            return true;
        }

        @Override
        public String describe() {
            return "counting host memory";
        }
    }

    /** {@code ops} whose {@code memory()} is {@code memory}. */
    static Ops withMemory(Ops ops, DeviceMemory memory) {
        return (Ops) Proxy.newProxyInstance(Ops.class.getClassLoader(), new Class<?>[] {Ops.class}, (p, m, args) -> {
            if (m.getName().equals("memory") && m.getParameterCount() == 0) {
                return memory;
            }
            try {
                return m.invoke(ops, args);
            } catch (InvocationTargetException e) {
                throw e.getCause();
            }
        });
    }

    @Test
    void oneFOneBKeepsAtMostPMicroBatchesAliveAndGPipeM() {
        int P = 2, M = 6;
        for (Schedule schedule : List.of(Schedule.ONE_F_ONE_B, Schedule.GPIPE)) {
            CountingMemory[] mem = {new CountingMemory(), new CountingMemory()};
            try (Parallel pool0 = new Parallel(1); Parallel pool1 = new Parallel(1);
                 Learner pp = PipelineGpt2Test.gpt2().backend(r -> withMemory(new CpuOps(r == 0 ? pool0 : pool1),
                         mem[r])).pipeline(Gpt2Stages.of(PipelineGpt2Test.TINY), P, M, schedule).build()) {
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
