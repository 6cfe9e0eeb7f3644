package io.accel4j.optim;

import io.accel4j.core.memory.HostMemory;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.nn.Linear;
import io.accel4j.nn.Network;
import io.accel4j.nn.Sequential;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.Locale;
import org.junit.jupiter.api.Test;

/**
 * Not a test (surefire's patterns skip it): the optimizer step's time on the CPU backend, AdamW on the "device" (here
 * host memory, {@link HostMemory}), offloaded serial and offloaded overlapped, taking turns in one JVM so that the
 * machine's load hits all three alike. Run: {@code ./mvnw -q -o -pl train -am test -Dtest=OffloadStepTiming
 * -Dsurefire.failIfNoSpecifiedTests=false [-Daccel4j.timing.params=16000000 -Daccel4j.timing.steps=12]}; prints the
 * median and best milliseconds of each and the ratios.
 */
class OffloadStepTiming {

    @Test
    void time() {
        long params = Long.getLong("accel4j.timing.params", 16_000_000L);
        int steps = Integer.getInteger("accel4j.timing.steps", 12), warm = 2;
        int threads = Integer.getInteger("accel4j.timing.threads", 2);
        int width = (int) Math.sqrt((double) params);
        try (Parallel pool = new Parallel(threads)) {
            CpuOps cpu = new CpuOps(pool);
            try (Network a = Network.of(new Sequential("net", Linear.noBias("fc", width, width))).features(width)
                    .classes(width).batch(1, 1).build(cpu);
                 Network b = Network.of(new Sequential("net", Linear.noBias("fc", width, width))).features(width)
                    .classes(width).batch(1, 1).build(cpu);
                 Network c = Network.of(new Sequential("net", Linear.noBias("fc", width, width))).features(width)
                    .classes(width).batch(1, 1).build(cpu)) {
                for (Network n : new Network[] {a, b, c}) {
                    MemorySegment g = n.grads();
                    for (long i = 0; i < g.byteSize() / 4; i += 1) {
                        g.setAtIndex(java.lang.foreign.ValueLayout.JAVA_FLOAT, i, (i % 17) * 1e-3f - 8e-3f);
                    }
                }
                AdamW.Spec spec = AdamW.of(0.1f);
                String[] names = {"device AdamW", "offload serial", "offload overlapped"};
                try (Optimizer plain = spec.create(cpu, a.table(), a.params(), a.grads());
                     Optimizer serial = new Offload(spec, cpu, false).create(cpu, b.table(), b.params(), b.grads());
                     Optimizer over = new Offload(spec, cpu, true).create(cpu, c.table(), c.params(), c.grads())) {
                    Optimizer[] all = {plain, serial, over};
                    double[][] ms = new double[3][steps];
                    for (int t = 1; t <= warm + steps; t++) {
                        for (int k = 0; k < 3; k++) {
                            long t0 = System.nanoTime();
                            all[k].step(t, 1e-4f, 1f);
                            long t1 = System.nanoTime();
                            if (t > warm) {
                                ms[k][t - warm - 1] = (t1 - t0) / 1e6;
                            }
                        }
                    }
                    System.out.printf(Locale.ROOT, "%d parameters, %d threads, %d steps after %d warm-ups%n",
                            a.table().count(), threads, steps, warm);
                    double[] med = new double[3], best = new double[3];
                    for (int k = 0; k < 3; k++) {
                        double[] s = ms[k].clone();
                        Arrays.sort(s);
                        med[k] = s[s.length / 2];
                        best[k] = s[0];
                        System.out.printf(Locale.ROOT, "%-20s median %8.2f ms  best %8.2f ms%n", names[k], med[k],
                                best[k]);
                    }
                    System.out.printf(Locale.ROOT, "overlapped / serial: median %.3f, best %.3f; serial / device: "
                            + "median %.3f%n", med[2] / med[1], best[2] / best[1], med[1] / med[0]);
                }
            }
        }
    }
}
