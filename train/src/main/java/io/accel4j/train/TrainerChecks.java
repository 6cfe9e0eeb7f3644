package io.accel4j.train;

import io.accel4j.collectives.Communicator;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenShards;
import io.accel4j.train.model.Fp8State;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.precision.Precision;
import java.io.IOException;

/**
 * What a {@link Trainer} refuses before it allocates anything, each with one line naming both sides: a batch larger
 * than the model was allocated for, tokens outside its vocabulary, a communicator that cannot take the model's
 * buffers, ZeRO without ranks, a model built in another precision than the run's.
 */
final class TrainerChecks {

    private TrainerChecks() {
    }

    /**
     * Checks the run {@code cfg} of {@code model} on {@code trainShards} and {@code valFile} (may be null) over
     * {@code comm} (null: one rank; {@code ranks} its size).
     *
     * @throws IllegalArgumentException for the first thing that does not fit
     * @throws IOException when a token file cannot be read
     */
    static void check(Gpt2 model, TrainConfig cfg, TokenShards trainShards, TokenFile valFile, Communicator comm,
                      int ranks) throws IOException {
        if (cfg.batch() > model.maxB() || cfg.seq() > model.maxT()) {
            throw new IllegalArgumentException("the model was allocated for B <= " + model.maxB() + ", T <= "
                    + model.maxT() + ", the run asks for B=" + cfg.batch() + ", T=" + cfg.seq());
        }
        int V = model.config().V();
        trainShards.checkVocabulary(V);
        if (valFile != null) {
            valFile.checkVocabulary(V);
        }
        if (comm != null) {
            checkMemory(comm, model.memory());
        }
        if (cfg.zeroStage() > 0 && comm == null) {
            throw new IllegalArgumentException("ZeRO stage " + cfg.zeroStage() + " shards over the ranks: it needs a "
                    + "communicator of more than one rank (got " + ranks + ")");
        }
        checkPrecision(model, cfg.precision());
        checkGradients(model, cfg);
    }

    /**
     * Refuses a model whose gradient storage is not the run's, and 16-bit gradients with ZeRO-2/3 (whose stages hold
     * fp32 gradient shards; ZeRO-1 takes them).
     *
     * @throws IllegalArgumentException naming both
     */
    static void checkGradients(Gpt2 model, TrainConfig cfg) {
        io.accel4j.core.DType g = cfg.precision().gradients();
        if (model.gradientStorage() != g) {
            throw new IllegalArgumentException("the model stores its gradients in " + label(model.gradientStorage())
                    + ", the run asks for " + label(g) + ": build it with the run's precision");
        }
        if (g != io.accel4j.core.DType.FP32 && cfg.zeroStage() > 1) {
            throw new IllegalArgumentException("--grad-storage " + label(g) + " does not go with --zero "
                    + cfg.zeroStage() + " yet: ZeRO-2/3 keep fp32 gradient shards; drop one of them");
        }
    }

    private static String label(io.accel4j.core.DType t) {
        return t.name().toLowerCase(java.util.Locale.ROOT);
    }

    /**
     * Refuses a model built in another precision than the run's: precision is fixed when the model is made.
     *
     * @throws IllegalArgumentException naming both
     */
    static void checkPrecision(Gpt2 model, Precision p) {
        Fp8State fp8 = model.fp8();
        boolean same = model.matmulOperands() == p.operands()
                && (fp8 == null ? p.fp8() == null : fp8.recipe().equals(p.fp8()));
        if (!same) {
            throw new IllegalArgumentException("the model was built for " + (fp8 != null ? "fp8 " + fp8.recipe()
                    : model.matmulOperands().name().toLowerCase(java.util.Locale.ROOT)) + " matmuls, the run asks for "
                    + p.label() + (p.fp8() != null ? " " + p.fp8() : "") + ": build it with the run's precision");
        }
    }

    /**
     * Refuses data parallelism whose communicator cannot take the model's buffers: a host backend with a model in a
     * device's memory, or NCCL with a model in host memory.
     *
     * @throws IllegalArgumentException saying which and what to do instead
     */
    static void checkMemory(Communicator comm, DeviceMemory memory) {
        String backend = comm.getClass().getSimpleName();
        if (comm.deviceBuffers() == memory.hostAccessible()) {
            throw new IllegalArgumentException("data parallelism over " + comm.size() + " ranks runs its collectives "
                    + "on the model's buffers, but the communicator (" + backend + ") takes "
                    + (comm.deviceBuffers() ? "device" : "host") + " buffers and the model is in "
                    + memory.describe() + ": use " + (memory.hostAccessible()
                    ? "a host communicator (in-process or MPI) for a CPU model"
                    : "NCCL for a model on a GPU (--device cuda), or train one rank on this device"));
        }
    }
}
