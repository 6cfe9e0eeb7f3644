package io.accel4j.examples;

import io.accel4j.core.DType;
import io.accel4j.fit.LearnerBuilder;
import java.nio.file.Path;
import picocli.CommandLine.Option;

/**
 * The options every example takes (a picocli mixin): steps, learning rate, optimizer, ranks, precision, threads, the
 * output directory and the seed; {@link #applyTo} puts them on a {@link LearnerBuilder}. Each example makes its own
 * with the defaults that suit it.
 */
final class TrainingOptions {

    @Option(names = "--steps", description = "Optimizer steps (default ${DEFAULT-VALUE}).")
    int steps;

    @Option(names = "--lr", description = "Peak learning rate (default ${DEFAULT-VALUE}).")
    float lr;

    @Option(names = "--optimizer", description = "adamw, adamw-bf16 (fp32 master weights, bf16 working weights), sgd (momentum 0.9) "
            + "or lion (default ${DEFAULT-VALUE}).")
    String optimizer = "adamw";

    @Option(names = "--ranks", description = "Data-parallel ranks in this process (default ${DEFAULT-VALUE}).")
    int ranks = 1;

    @Option(names = "--zero", description = "ZeRO stage over the ranks: 0 (DDP), 1 (optimizer state sharded), 2 "
            + "(gradients too), 3 (parameters too) (default ${DEFAULT-VALUE}).")
    int zero;

    @Option(names = "--precision", description = "Matmul operands: fp32, bf16 or fp16 (default ${DEFAULT-VALUE}).",
            converter = Examples.PrecisionConverter.class)
    DType precision = DType.FP32;

    @Option(names = "--threads", description = "Threads in all (default: the processors).")
    int threads = Runtime.getRuntime().availableProcessors();

    @Option(names = "--out", description = "Writes metrics.jsonl and loss.png here.")
    Path outDir;

    @Option(names = "--seed", description = "Seed of the data and the initialisation (default ${DEFAULT-VALUE}).")
    long seed;

    TrainingOptions(int steps, float lr, long seed) {
        this.steps = steps;
        this.lr = lr;
        this.seed = seed;
    }

    /** Checks the values (usage errors naming the option). */
    void check() {
        Examples.check(steps >= 1, "--steps must be >= 1, got " + steps);
        Examples.check(ranks >= 1, "--ranks must be >= 1, got " + ranks);
        Examples.check(zero >= 0 && zero <= 3, "--zero must be 0, 1, 2 or 3, got " + zero);
        Examples.check(zero == 0 || ranks >= 2, "--zero " + zero + " shards over the ranks: add --ranks 2 or more");
        Examples.check(threads >= 1, "--threads must be >= 1, got " + threads);
        Examples.check(lr > 0 && Float.isFinite(lr), "--lr must be a positive number, got " + lr);
    }

    /**
     * The optimizer (with {@code weightDecay} on the tensors that take it), precision, ranks and ZeRO stage, threads,
     * seed, output.
     */
    LearnerBuilder applyTo(LearnerBuilder b, float weightDecay) {
        return b.optimizer(Examples.optimizer(optimizer, weightDecay, seed)).precision(precision).ranks(ranks)
                .zero(zero).threads(threads).seed(seed).out(outDir);
    }
}
