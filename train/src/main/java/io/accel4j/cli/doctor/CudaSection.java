package io.accel4j.cli.doctor;

import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaLibraries;
import io.accel4j.cuda.CudaProbe;
import io.accel4j.kernels.AttentionBf16Gpu;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.Supplier;

/** What {@code Cuda.probe()} found: the device, or why CUDA is not usable here and where the driver was looked for. */
final class CudaSection implements DoctorSection {

    private final Supplier<CudaProbe> probe;

    CudaSection(Supplier<CudaProbe> probe) {
        this.probe = probe;
    }

    @Override
    public String title() {
        return "CUDA";
    }

    @Override
    public List<Line> lines() {
        return switch (probe.get()) {
            case CudaProbe.Ready r -> List.of(
                    new Line("device", r.deviceName()
                            + (r.deviceCount() > 1 ? " (device 0 of " + r.deviceCount() + ")" : "")),
                    new Line("compute capability", r.computeCapability() / 10 + "." + r.computeCapability() % 10),
                    new Line("multiprocessors", Integer.toString(r.multiprocessors())),
                    new Line("device memory",
                            String.format(Locale.ROOT, "%.1f GiB", r.totalMemory() / (1024.0 * 1024 * 1024))),
                    new Line("driver", "CUDA " + Cuda.versionString(r.driverVersion())
                            + " (" + r.library() + ")"),
                    new Line("bf16 attention", attention(r.computeCapability())));
            case CudaProbe.DriverNotFound d -> notFound(d);
            case CudaProbe p -> List.of(new Line("status", p.describe()));
        };
    }

    /** Which bf16 attention forward {@code AttentionBf16Gpu} runs on the device (the backward is wmma everywhere). */
    static String attention(int computeCapability) {
        return AttentionBf16Gpu.forwardKernelFor(computeCapability) == AttentionBf16Gpu.ForwardKernel.WGMMA
                ? "forward wgmma (sm_90a), backward wmma" : "forward and backward wmma";
    }

    private static List<Line> notFound(CudaProbe.DriverNotFound d) {
        List<Line> lines = new ArrayList<>();
        lines.add(new Line("status", "driver not found (" + CudaLibraries.DRIVER + ") — CPU only"));
        for (int i = 0; i < d.searched().size(); i++) {
            lines.add(new Line(i == 0 ? "searched" : "", d.searched().get(i)));
        }
        lines.add(new Line("hint", "install the NVIDIA driver, or set " + CudaLibraries.PATH_ENV
                + " to libcuda.so.1 or its folder"));
        return lines;
    }
}
