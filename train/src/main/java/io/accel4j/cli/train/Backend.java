package io.accel4j.cli.train;

import io.accel4j.cli.CliException;
import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.NcclCommunicator;
import io.accel4j.collectives.NcclRendezvous;
import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaLibraries;
import io.accel4j.cuda.CudaProbe;
import io.accel4j.kernels.GpuOps;
import java.time.Duration;
import java.util.Locale;
import java.util.function.Supplier;

/**
 * The kernels a run computes with, chosen once from {@code --device}: the Vector API kernels ({@link CpuOps}) in host
 * memory, or CUDA ({@link GpuOps} on one device, in its device memory: device 0 for one rank, the rank's own GPU for
 * data parallelism, whose collectives then run on NCCL ({@link #nccl})). No silent fallback: {@code cuda} where
 * {@link Cuda#probe()} finds no usable GPU, or fewer GPUs than ranks on this machine, is an error that says what the
 * probe found.
 */
public final class Backend implements AutoCloseable {

    /** {@code --device}'s values. */
    public enum Device {
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
    public static void check(Device device, Supplier<CudaProbe> probe) {
        check(device, 1, probe, CudaLibraries::nccl);
    }

    /**
     * {@link #check(Device, Supplier)} for {@code gpus} ranks on this machine, one GPU each: CUDA must see at least
     * that many devices and, for more than one, NCCL must be found ({@code nccl}).
     *
     * @throws CliException naming the probe's result, the GPUs needed and found, or where NCCL was searched
     */
    static void check(Device device, int gpus, Supplier<CudaProbe> probe, Supplier<CudaLibraries.Search> nccl) {
        if (device != Device.CUDA) {
            return;
        }
        CudaProbe p = probe.get();
        if (!p.ready()) {
            throw new CliException("--device cuda: no usable GPU: CUDA " + p.describe() + " (see 'accel4j "
                    + "doctor'; --device cpu trains on the CPU)");
        }
        int found = ((CudaProbe.Ready) p).deviceCount();
        if (found < gpus) {
            throw new CliException("--device cuda with " + gpus + " ranks on this machine needs " + gpus + " GPUs "
                    + "(one per rank), but CUDA finds " + found + " (" + p.describe() + "): run at most " + found
                    + " rank" + (found == 1 ? "" : "s") + " per machine (CUDA_VISIBLE_DEVICES limits what CUDA sees)");
        }
        if (gpus > 1) {
            CudaLibraries.Search lib = nccl.get();
            if (!lib.found()) {
                throw new CliException("--device cuda with " + gpus + " ranks averages the gradients with NCCL, but "
                        + "libnccl was not found (searched: " + String.join(", ", lib.searched()) + "): install "
                        + "NCCL (e.g. the nvidia-nccl-cu12 wheel's lib folder on LD_LIBRARY_PATH)");
            }
        }
    }

    /** The CPU kernels on {@code pool}, or CUDA's on device 0 (the pool then idles). */
    public static Backend open(Device device, Parallel pool) {
        return open(device, pool, 0);
    }

    /** The CPU kernels on {@code pool}, or CUDA's on device {@code gpu} (the pool then idles). */
    static Backend open(Device device, Parallel pool, int gpu) {
        if (device == Device.CPU) {
            return new Backend(new CpuOps(pool), null);
        }
        check(device, Cuda::probe);
        CudaContext ctx = Cuda.open(gpu);
        try {
            return new Backend(new GpuOps(ctx), ctx);
        } catch (RuntimeException | Error e) {
            ctx.close();
            throw e;
        }
    }

    /**
     * The communicator a data-parallel rank trains with on this backend: {@code host} itself on the CPU (or for one
     * rank, {@code host} null), otherwise a new NCCL communicator on this backend's GPU, rank {@code host.rank()} of
     * {@code host.size()}, whose unique id rank 0 hands out over {@code host} (the in-process ring or MPI); the
     * caller closes it, before this backend. Blocks until every rank has joined.
     */
    Communicator dataParallel(Communicator host, Duration timeout) {
        if (context == null || host == null || host.size() == 1) {
            return host;
        }
        return NcclCommunicator.create(context, host.rank(), host.size(), NcclRendezvous.over(host), null, timeout);
    }

    /** The kernels; their {@link Ops#memory()} is where the model must live. */
    public Ops ops() {
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
    public static final class Devices implements picocli.CommandLine.ITypeConverter<Device> {
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
