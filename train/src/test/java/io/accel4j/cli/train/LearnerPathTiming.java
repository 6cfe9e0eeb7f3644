package io.accel4j.cli.train;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.junit.jupiter.api.Test;

/**
 * Not a test (surefire does not pick it up by name): the step time of {@code accel4j train} on the Java API
 * ({@link LearnerRun}) against the same command on {@code Trainer} ({@link RankRun}), alternated in one JVM, for
 * docs/PERFORMANCE.md. Run with {@code -Dtest=LearnerPathTiming -Dtiming.pairs=6 -Dtiming.threads=1,2}; prints, per
 * pair, the median step_ms of each path over steps 5–24 of the bench model (B 4, T 64) and their ratio.
 */
class LearnerPathTiming {

    @Test
    void alternate() throws Exception {
        int pairs = Integer.getInteger("timing.pairs", 6);
        for (String threads : System.getProperty("timing.threads", "1,2").split(",")) {
            List<Double> ratios = new ArrayList<>();
            for (int i = 0; i < pairs; i++) {
                boolean trainerFirst = i % 2 == 0;
                double a = median(trainerFirst, threads), b = median(!trainerFirst, threads);
                double trainer = trainerFirst ? a : b, learner = trainerFirst ? b : a;
                ratios.add(learner / trainer);
                System.out.printf(Locale.ROOT, "threads %s pair %d: trainer %.1f ms, learner %.1f ms, learner/trainer "
                        + "%.3f%n", threads, i, trainer, learner, learner / trainer);
            }
            ratios.sort(null);
            System.out.printf(Locale.ROOT, "threads %s: median learner/trainer %.3f over %d pairs (%.3f–%.3f)%n",
                    threads, ratios.get(ratios.size() / 2), pairs, ratios.get(0), ratios.get(ratios.size() - 1));
        }
    }

    /** The median step time of steps 5–24 of one run on the trainer's or the learner's path. */
    private static double median(boolean trainer, String threads) throws Exception {
        Path dir = Files.createTempDirectory("timing");
        TrainCommand.viaTrainer = trainer;
        try {
            TrainCommandTest.Result r = TrainCommandTest.run("train", "--out", dir.toString(), "--model", "bench",
                    "--batch", "4", "--seq", "64", "--steps", "25", "--threads", threads, "--val-every", "0",
                    "--save-every", "0", "--samples", "0", "--eval-problems", "0", "--lr", "1e-4", "--warmup", "1",
                    "--data-order", "sequential");
            if (r.code() != 0) {
                throw new AssertionError(r.err());
            }
        } finally {
            TrainCommand.viaTrainer = false;
        }
        List<Double> ms = new ArrayList<>();
        for (String line : Files.readAllLines(dir.resolve("metrics.jsonl"))) {
            java.util.regex.Matcher m = java.util.regex.Pattern.compile("\"step\":(\\d+).*\"step_ms\":([0-9.]+)")
                    .matcher(line);
            if (m.find() && Integer.parseInt(m.group(1)) >= 5) {
                ms.add(Double.parseDouble(m.group(2)));
            }
        }
        ms.sort(null);
        return ms.get(ms.size() / 2);
    }
}
