package io.accel4j.train;

import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.fit.Learner;
import io.accel4j.optim.Offload;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.GptConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Locale;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Not a test (surefire's patterns skip it): whole training steps of the bench model (16.1M parameters) on the CPU
 * backend with the optimizer offloaded ({@link Offload}), serial and overlapped (the copies pipelined with the host's
 * update over chunks, {@code optim.OffloadPipeline}), two GPT-2 {@link Learner}s as the CLI builds them taking turns
 * step by step (which goes first alternating) in one JVM so that the machine's load hits both alike; prints the median
 * and best step time of each and whether their losses are the same bits. Run: {@code ./mvnw -q -o -pl train -am test
 * -Dtest=OffloadTrainerTiming -Dsurefire.failIfNoSpecifiedTests=false [-Daccel4j.timing.steps=12]}.
 */
class OffloadTrainerTiming {

    @Test
    void time() throws Exception {
        int steps = Integer.getInteger("accel4j.timing.steps", 12), warm = 2, b = 4, t = 64;
        GptConfig config = GptConfig.BENCH;
        Path dir = Files.createTempDirectory("offload-timing");
        Random r = new Random(1);
        int[] tokens = new int[20_000];
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = r.nextInt(config.V());
        }
        TokenFile.write(dir.resolve("t.bin"), tokens);
        TrainConfig cfg = TrainConfig.builder().batch(b).seq(t).steps(warm + steps).lr(3e-4f).warmup(2)
                .dataOrder(SampleOrder.Mode.SEQUENTIAL).build();
        try (Parallel pool = new Parallel(Integer.getInteger("accel4j.timing.threads", 2));
             TokenFile data = TokenFile.open(dir.resolve("t.bin"));
             TokenSource serialData = Gpt2LearnerRuns.source(data, cfg); TokenSource overData = Gpt2LearnerRuns.source(data, cfg);
             Learner serial = Gpt2LearnerRuns.builder(config, cfg, 1, serialData).backend(rank -> new CpuOps(pool))
                     .optimizer(new Offload(cfg.adamw(), new CpuOps(pool), false)).build();
             Learner over = Gpt2LearnerRuns.builder(config, cfg, 1, overData).backend(rank -> new CpuOps(pool))
                     .optimizer(new Offload(cfg.adamw(), new CpuOps(pool), true)).build()) {
            Gpt2LearnerRuns.initialised(serial, config, cfg, serialData, 3);
            Gpt2LearnerRuns.initialised(over, config, cfg, overData, 3);
            double[][] ms2 = new double[2][steps];
            boolean same = true;
            for (int s = 0; s < warm + steps; s++) {
                double[] loss = new double[2];
                for (int k = 0; k < 2; k++) { // which goes first alternates, step by step
                    int which = (s + k) % 2;
                    long t0 = System.nanoTime();
                    loss[which] = (which == 0 ? serial : over).fit(1, null).get(0).trainLoss();
                    if (s >= warm) {
                        ms2[which][s - warm] = (System.nanoTime() - t0) / 1e6;
                    }
                }
                same &= loss[0] == loss[1];
            }
            for (double[] x : ms2) {
                Arrays.sort(x);
            }
            System.out.printf(Locale.ROOT, "bench model, B=%d T=%d, %d threads, %d steps after %d: serial median %.1f "
                    + "best %.1f ms, overlapped median %.1f best %.1f ms (overlapped/serial %.3f median, %.3f best); "
                    + "losses the same bits: %s%n", b, t, pool.threads(), steps, warm, ms2[0][steps / 2], ms2[0][0],
                    ms2[1][steps / 2], ms2[1][0], ms2[1][steps / 2] / ms2[0][steps / 2], ms2[1][0] / ms2[0][0], same);
        }
    }
}
