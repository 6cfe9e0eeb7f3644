package io.accel4j.cli.bench;

import io.accel4j.cli.Main;
import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaLibraries;
import io.accel4j.cuda.CudaProbe;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;
import picocli.CommandLine;

/**
 * The GPU check's training figure ({@code scripts/gpu-check.sh run}): whole GPT-2 training steps on the GPU — the
 * 124M model ({@code gpt2}), B·T = {@value #BATCH}×{@value #SEQ}, {@value #WARMUP} untimed steps then
 * {@value #STEPS} timed, each ended by a copy back from the device — timed by {@code accel4j bench train --device
 * cuda} ({@link TrainBenchCommand}) once per matmul operand precision, fp32, bf16 then fp8: ms/step and tokens/s. Extra
 * arguments are passed on and override these ({@code --steps 20}, {@code --batch 8}).
 *
 * <p>Exit codes, as {@code GpuBench}'s: 0 every precision ran, 1 one failed (its error line is printed and the
 * next still runs), 3 no usable GPU ({@code gpu-train: no GPU: <the probe's reason>} on stderr, nothing run), 4 no
 * cuBLASLt, which every training step's matmuls need ({@code gpu-train: skipped: needs cuBLASLt: libcublasLt.so.13
 * not found (searched: …)} on stderr, nothing run): a skip that says why, not a failure.
 */
public final class GpuTrainStep {

    static final int BATCH = 4;
    static final int SEQ = 1024;
    static final int WARMUP = 2;
    static final int STEPS = 10;
    /** The precisions timed, in order. */
    static final List<String> PRECISIONS = List.of("fp32", "bf16", "fp8");
    static final int EXIT_OK = 0;
    static final int EXIT_FAILED = 1;
    static final int EXIT_NO_GPU = 3;
    static final int EXIT_NO_CUBLASLT = 4;

    private GpuTrainStep() {}

    public static void main(String[] args) {
        PrintWriter out = new PrintWriter(System.out, true), err = new PrintWriter(System.err, true);
        System.exit(run(args, Cuda::probe, CudaLibraries::cublasLt, out, err));
    }

    /** {@link #run(String[], Supplier, Supplier, PrintWriter, PrintWriter)} with this machine's cuBLASLt. */
    static int run(String[] args, Supplier<CudaProbe> probe, PrintWriter out, PrintWriter err) {
        return run(args, probe, CudaLibraries::cublasLt, out, err);
    }

    /**
     * The whole program; returns the exit code. {@code probe} is {@link Cuda#probe} and {@code cublasLt}
     * {@link CudaLibraries#cublasLt} but for tests.
     */
    static int run(String[] args, Supplier<CudaProbe> probe, Supplier<CudaLibraries.Search> cublasLt,
                   PrintWriter out, PrintWriter err) {
        CudaProbe p = probe.get();
        if (!p.ready()) {
            err.println("gpu-train: no GPU: " + p.describe());
            return EXIT_NO_GPU;
        }
        CudaLibraries.Search lt = cublasLt.get();
        if (!lt.found()) {
            err.println("gpu-train: skipped: needs cuBLASLt: " + lt.notFoundMessage());
            return EXIT_NO_CUBLASLT;
        }
        int rc = EXIT_OK;
        for (String precision : PRECISIONS) {
            String[] command = command(precision, args);
            out.println("gpu-train: accel4j " + String.join(" ", command));
            CommandLine cl = Main.commandLine();
            cl.setOverwrittenOptionsAllowed(true); // the caller's arguments override the defaults
            cl.setOut(out);
            cl.setErr(err);
            int code = cl.execute(command);
            out.flush();
            if (code != 0) {
                err.println("gpu-train: " + precision + " failed (exit " + code + ")");
                rc = EXIT_FAILED;
            }
        }
        return rc;
    }

    /** {@code bench train --device cuda} with this check's defaults for {@code precision}, then {@code extra}. */
    static String[] command(String precision, String[] extra) {
        List<String> c = new ArrayList<>(List.of("bench", "train", "--device", "cuda", "--model", "gpt2",
                "--precision", precision, "--batch", String.valueOf(BATCH), "--seq", String.valueOf(SEQ),
                "--warmup", String.valueOf(WARMUP), "--steps", String.valueOf(STEPS)));
        c.addAll(Arrays.asList(extra));
        return c.toArray(String[]::new);
    }
}
