package io.accel4j.examples;

import io.accel4j.fit.Learner;
import io.accel4j.nn.Linear;
import io.accel4j.nn.Module;
import io.accel4j.nn.Sequential;
import io.accel4j.optim.LrSchedule;
import io.accel4j.train.StepMetrics;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * An MLP classifier of the two spirals ({@link Spirals}): 2 → 64 → 64 → 2 with GELU, AdamW, trained on 4,096 generated
 * points and tested on 1,024 others; prints the loss as it goes and the test accuracy at the end (chance is 50 %).
 */
@Command(name = "mlp", mixinStandardHelpOptions = true,
        description = "An MLP classifier learns the two-spirals problem (generated data); prints test accuracy.")
public final class MlpSpirals implements java.util.concurrent.Callable<Integer> {

    @Mixin
    TrainingOptions run = new TrainingOptions(600, 1e-2f, 7);

    @Option(names = "--batch", description = "Points per rank and step (default ${DEFAULT-VALUE}).")
    int batch = 128;

    /** The result of a run: the final train loss and the test accuracy. */
    public record Result(double trainLoss, double accuracy) {}

    @Override
    public Integer call() {
        Result r = run(System.out);
        return r.accuracy() > 0 ? 0 : 1;
    }

    /** Trains and tests, printing progress to {@code out}. */
    public Result run(PrintStream out) {
        run.check();
        Examples.check(batch >= 1, "--batch must be >= 1, got " + batch);
        int steps = run.steps;
        Spirals train = new Spirals(4096, 0.02, run.seed), test = new Spirals(1024, 0.02, run.seed + 1);
        int hidden = 64;
        try (Learner learner = run.applyTo(Learner.of(() -> model(hidden))
                .features(2).classes(2).batch(batch, 1), 0f)
                .schedule(LrSchedule.warmupCosine(run.lr, steps / 20, steps, 0.1f)).data(train.batches())
                .progress(new java.io.PrintWriter(out, true)).build()) {
            out.println("two spirals: " + train.size() + " training points, " + test.size() + " test points; "
                    + learner.describe());
            List<StepMetrics> metrics = learner.fit(steps, null);
            double last = metrics.get(metrics.size() - 1).trainLoss();
            double accuracy = accuracy(learner, test);
            out.printf("test accuracy %.1f %% (chance 50 %%), final train loss %.4f%n", 100 * accuracy, last);
            return new Result(last, accuracy);
        }
    }

    /** 2 → hidden → hidden → 2, GELU after each hidden layer (fused into its GEMM). */
    static Module model(int hidden) {
        return new Sequential("mlp", Linear.gelu("fc1", 2, hidden), Linear.gelu("fc2", hidden, hidden),
                Linear.of("head", hidden, 2));
    }

    static double accuracy(Learner learner, Spirals test) {
        int n = test.size(), B = Math.min(n, learner.network().maxB());
        int correct = 0;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment xy = a.allocate(2L * B * Float.BYTES), labels = a.allocate((long) B * Integer.BYTES);
            for (int from = 0; from < n; from += B) {
                int count = Math.min(B, n - from);
                test.copy(from, count, xy, labels);
                int[] predicted = learner.predict(xy, count, 1);
                for (int j = 0; j < count; j++) {
                    correct += predicted[j] == test.label(from + j) ? 1 : 0;
                }
            }
        }
        return (double) correct / n;
    }
}
