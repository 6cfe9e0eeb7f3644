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
    private final Supplier<List<Line>> libraries;

    CudaSection(Supplier<CudaProbe> probe) {
        this(probe, CudaSection::libraries);
    }

    /** {@code libraries}: the lines of the CUDA libraries found (cuBLAS, cuBLASLt), {@link #libraries()} but for tests. */
    CudaSection(Supplier<CudaProbe> probe, Supplier<List<Line>> libraries) {
        this.probe = probe;
        this.libraries = libraries;
    }

    @Override
    public String title() {
        return "CUDA";
    }

    @Override
    public List<Line> lines() {
        return switch (probe.get()) {
            case CudaProbe.Ready r -> ready(r);
            case CudaProbe.DriverNotFound d -> notFound(d);
            case CudaProbe p -> List.of(new Line("status", p.describe()),
                    new Line("PTX", ptx()));
        };
    }

    /** The PTX ISA of the kernels and the driver it needs. */
    static String ptx() {
        return "ISA " + Cuda.PTX_ISA + ", needs driver CUDA " + Cuda.versionString(Cuda.REQUIRED_DRIVER_VERSION)
                + " or newer";
    }

    /** cuBLAS and cuBLASLt: where each was found (cuBLASLt with its version), or that it was not. */
    static List<Line> libraries() {
        List<Line> lines = new ArrayList<>();
        CudaLibraries.Search cublas = CudaLibraries.cublas(), lt = CudaLibraries.cublasLt();
        lines.add(new Line("cuBLAS", cublas.found() ? cublas.loadedFrom() : cublas.notFoundMessage()));
        String version = "";
        if (lt.found()) {
            try {
                version = " (version " + io.accel4j.cuda.bindings.cublasLt_h.cublasLtGetVersion() + ")";
            } catch (RuntimeException e) {
                version = " (version unknown: " + e.getMessage() + ")";
            }
        }
        lines.add(new Line("cuBLASLt", lt.found() ? lt.loadedFrom() + version : lt.notFoundMessage()));
        return lines;
    }

    private List<Line> ready(CudaProbe.Ready r) {
        List<Line> lines = new ArrayList<>(List.of(
                    new Line("device", r.deviceName()
                            + (r.deviceCount() > 1 ? " (device 0 of " + r.deviceCount() + ")" : "")),
                    new Line("compute capability", r.computeCapability() / 10 + "." + r.computeCapability() % 10),
                    new Line("multiprocessors", Integer.toString(r.multiprocessors())),
                    new Line("device memory",
                            String.format(Locale.ROOT, "%.1f GiB", r.totalMemory() / (1024.0 * 1024 * 1024))),
                    new Line("driver", "CUDA " + Cuda.versionString(r.driverVersion())
                            + " (" + r.library() + ")"),
                    new Line("PTX", ptx()),
                    new Line("bf16 attention", attention(r.computeCapability()))));
        lines.addAll(libraries.get());
        return lines;
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
