package io.accel4j.cli.train;

import io.accel4j.cli.CliException;
import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaProbe;
import io.accel4j.kernels.GpuOps;
import java.util.Locale;
import java.util.function.Supplier;

/**
 * The kernels a run computes with, chosen once from {@code --device}: the Vector API kernels ({@link CpuOps}) in host
 * memory, or CUDA ({@link GpuOps} on device 0, in its device memory). No silent fallback: {@code cuda} where
 * {@link Cuda#probe()} finds no usable GPU is an error that says what the probe found.
 */
final class Backend implements AutoCloseable {

    /** {@code --device}'s values. */
    enum Device {
        CPU, CUDA;

        /** The flag's spelling. */
        String flag() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    private final Ops ops;
    private final CudaContext context;

    private Backend(Ops ops, CudaContext context) {
        this.ops = ops;
        this.context = context;
    }

    /**
     * Fails unless {@code device} can be opened here: for CUDA, {@code probe} must find a usable GPU. Cheap; call it
     * before the run writes anything.
     *
     * @throws CliException naming the probe's result
     */
    static void check(Device device, Supplier<CudaProbe> probe) {
        if (device == Device.CUDA) {
            CudaProbe p = probe.get();
            if (!p.ready()) {
                throw new CliException("--device cuda: no usable GPU: CUDA " + p.describe() + " (see 'accel4j "
                        + "doctor'; --device cpu trains on the CPU)");
            }
        }
    }

    /** The CPU kernels on {@code pool}, or CUDA's on device 0 (the pool then idles). */
    static Backend open(Device device, Parallel pool) {
        if (device == Device.CPU) {
            return new Backend(new CpuOps(pool), null);
        }
        check(device, Cuda::probe);
        CudaContext ctx = Cuda.open(0);
        try {
            return new Backend(new GpuOps(ctx), ctx);
        } catch (RuntimeException | Error e) {
            ctx.close();
            throw e;
        }
    }

    /** The kernels; their {@link Ops#memory()} is where the model must live. */
    Ops ops() {
        return ops;
    }

    /** Frees the GPU's kernels and context; every model on it must be closed first. */
    @Override
    public void close() {
        if (context != null) {
            try {
                ((GpuOps) ops).close();
            } finally {
                context.close();
            }
        }
    }

    /** {@code cpu|cuda}, case-insensitive. */
    static final class Devices implements picocli.CommandLine.ITypeConverter<Device> {
        @Override
        public Device convert(String s) {
            for (Device d : Device.values()) {
                if (d.flag().equalsIgnoreCase(s)) {
                    return d;
                }
            }
            throw new picocli.CommandLine.TypeConversionException("'" + s + "' is not a device: cpu or cuda");
        }
    }
}
