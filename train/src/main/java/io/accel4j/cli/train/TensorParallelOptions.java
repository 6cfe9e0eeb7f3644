package io.accel4j.cli.train;

import io.accel4j.train.model.GptConfig;
import io.accel4j.train.precision.Precision;
import java.util.function.Function;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;

/**
 * {@code accel4j train}'s tensor-parallel flag, {@code --tp T}: the model's attention heads, MLP and vocabulary split
 * over T ranks (Megatron-LM's scheme), the ranks ({@code --ranks} or mpirun's) then D·T with data parallelism over
 * the D replicas. Its checks are usage errors naming the flag and the numbers, made before anything is allocated.
 */
public final class TensorParallelOptions {

    @Option(names = "--tp", paramLabel = "T", defaultValue = "1", description = "Tensor parallelism: split every "
            + "block's attention heads and MLP, and the vocabulary of the embedding, head and loss, over T ranks "
            + "(T must divide the heads NH, C, 4C and the padded vocabulary Vp); --ranks (or mpirun's -np) is then "
            + "D·T, data parallelism over the D replicas; runs on the CPU through the Java API's Learner, from a "
            + "preset's initialisation or a --model file; --precision bf16|fp16 stores the activations saved for "
            + "backward in 16 bits there too (default: ${DEFAULT-VALUE}: not split).")
    int tp = 1;

    /** Whether the run is split. */
    public boolean active() {
        return tp > 1;
    }

    /** T. */
    public int tp() {
        return tp;
    }

    /**
     * Checks T against the model and the world of {@code world} ranks and the other flags the split path takes.
     *
     * @throws ParameterException (from {@code usage}) naming --tp and the numbers
     */
    public void check(GptConfig model, int world, boolean cuda, int zero, Precision precision,
                      Function<String, ? extends RuntimeException> usage) {
        if (tp < 1) {
            throw usage.apply("--tp must be >= 1, got " + tp);
        }
        if (!active()) {
            return;
        }
        long[][] sizes = {{model.NH(), 0}, {model.C(), 1}, {4L * model.C(), 2}, {model.Vp(), 3}};
        String[] names = {"the attention heads NH", "the channels C", "the MLP's width 4C", "the padded vocabulary Vp"};
        for (long[] s : sizes) {
            if (s[0] % tp != 0) {
                throw usage.apply("--tp " + tp + " must divide " + names[(int) s[1]] + " = " + s[0]
                        + " of the model");
            }
        }
        if (world % tp != 0) {
            throw usage.apply("--tp " + tp + " does not divide the " + world + " ranks (--ranks or mpirun's -np): "
                    + "the ranks are D·T, data-parallel replicas × tensor ranks");
        }
        if (cuda) {
            throw usage.apply("--tp runs on the CPU so far: drop --device cuda");
        }
        if (zero > 1) {
            throw usage.apply("--tp composes with --zero 0 or 1 so far, got --zero " + zero);
        }
        if (zero == 1 && world / tp < 2) {
            throw usage.apply("--zero 1 with --tp " + tp + " shards over the " + world / tp + " data-parallel "
                    + "replica(s): it needs --ranks " + 2 * tp + " or more");
        }
        if (precision.fp8() != null) {
            throw usage.apply("--tp has no fp8 path: use --precision fp32, bf16 or fp16");
        }
        if (precision.scalesLoss() && (precision.initialLossScale() != Precision.DEFAULT_LOSS_SCALE
                || precision.lossScaleWindow() != Precision.DEFAULT_LOSS_SCALE_WINDOW)) {
            throw usage.apply("--tp trains fp16 with the default loss scaling so far: drop --loss-scale and "
                    + "--loss-scale-window");
        }
    }
}
