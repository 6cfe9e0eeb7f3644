package io.accel4j.cli.train;

import io.accel4j.kernels.GpuMatmul;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.model.GptConfig;
import java.util.function.Function;

/**
 * What {@code train --device cuda} does not take yet, refused as usage errors before anything is written
 * ({@link TrainCommand} then checks that this machine has a usable GPU per rank, and NCCL for several).
 */
final class CudaChecks {

    private CudaChecks() {}

    /** Under a per-process launch, this process's GPU; and no --find-batch-size or --profile. */
    static void check(Launch launch, boolean findBatchSize, boolean profile,
                      Function<String, ? extends RuntimeException> usage) {
        if (launch.perProcess()) {
            try {
                launch.gpu();
            } catch (IllegalArgumentException e) {
                throw usage.apply(e.getMessage());
            }
        }
        String unsupported = findBatchSize
                ? "--find-batch-size (it plans host memory and runs a CPU trial step)"
                : profile ? "--profile (it times calls on the host; GPU calls return before their work is done)"
                : null;
        if (unsupported != null) {
            throw usage.apply("--device cuda does not support " + unsupported + " yet: use --device cpu for it");
        }
    }

    /**
     * With --precision fp8: a usage error unless the GPU's FP8 GEMMs (cuBLASLt) can take the blocks' linear layers,
     * whose K is a multiple of {@link GpuMatmul#FP8_MULTIPLE}: the width C (the forward's K, and as 3C, C, 4C, C
     * outputs the backward's dinp K) and the B·T rows of a micro-batch (the backward's dweight K).
     */
    static void checkFp8(GptConfig model, TrainConfig cfg, Function<String, ? extends RuntimeException> usage) {
        if (cfg.precision().fp8() == null) {
            return;
        }
        int m = GpuMatmul.FP8_MULTIPLE;
        if (model.C() % m != 0) {
            throw usage.apply("--device cuda --precision fp8 needs the model's width (channels, C) to be a multiple of "
                    + m + " (cuBLASLt's FP8 GEMMs), this model's is " + model.C() + ": use --device cpu for it");
        }
        long rows = (long) cfg.batch() * cfg.seq();
        if (rows % m != 0) {
            throw usage.apply("--device cuda --precision fp8 needs --batch × --seq (the rows of a micro-batch) to be a "
                    + "multiple of " + m + " (cuBLASLt's FP8 GEMMs), got " + cfg.batch() + " × " + cfg.seq() + " = "
                    + rows);
        }
    }
}
