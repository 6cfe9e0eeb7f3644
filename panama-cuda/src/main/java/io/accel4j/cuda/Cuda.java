package io.accel4j.cuda;

import io.accel4j.cuda.bindings.cuda_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The entry point: whether CUDA is usable here ({@link #probe()}, computed once and logged once at debug level),
 * and {@link #open(int)} for a device's context. The code that chooses the backend logs the user-facing line
 * ({@code CUDA: driver not found (searched: …) — running on CPU}) from {@link CudaProbe#describe()}; the probe
 * itself stays quiet so that commands like {@code accel4j doctor} keep stderr clean.
 */
public final class Cuda {

    /**
     * The oldest driver accepted ({@code cuDriverGetVersion} form: 1000·major + 10·minor): 12.0, what the kernels
     * and the bound functions need: the PTX is ISA {@value #PTX_ISA} (CUDA 12.0's), {@code cuTensorMapEncodeTiled}
     * is 12.0+, and {@code cuEventElapsedTime_v2} (12.8+) is used only where the driver has it ({@link Event}).
     * R525 and later drivers, so the R550/R560 drivers common on H100/H200 machines too.
     */
    public static final int REQUIRED_DRIVER_VERSION = 12000;

    /** The PTX ISA version of the committed kernels ({@code .version} in their PTX); a 12.0 driver JITs it. */
    public static final String PTX_ISA = "8.0";

    private static final Logger LOG = LoggerFactory.getLogger(Cuda.class);

    private Cuda() {}

    private static final class ProbeHolder {
        static final CudaProbe PROBE = logged(probe(CudaLibraries.driver(), REQUIRED_DRIVER_VERSION));
    }

    /** The outcome for device 0, found once per JVM and logged once; never throws. */
    public static CudaProbe probe() {
        return ProbeHolder.PROBE;
    }

    /** Retains device {@code ordinal}'s primary context; throws {@link CudaException} if CUDA is not usable. */
    public static CudaContext open(int ordinal) {
        CudaProbe p = probe();
        if (!p.ready()) {
            throw new IllegalStateException("CUDA is not usable: " + p.describe());
        }
        return CudaContext.primary(ordinal);
    }

    private static CudaProbe logged(CudaProbe p) {
        LOG.debug("CUDA: {}", p.describe());
        return p;
    }

    /** Probes with the given library search; package-private for tests. */
    static CudaProbe probe(CudaLibraries.Search search, int required) {
        if (!search.found()) {
            return new CudaProbe.DriverNotFound(search.searched());
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment i = arena.allocate(ValueLayout.JAVA_INT);
            int rc = cuda_h.cuDriverGetVersion(i);
            if (rc != cuda_h.CUDA_SUCCESS) {
                return new CudaProbe.Failed(CudaException.of("cuDriverGetVersion", rc, null).getMessage());
            }
            int version = i.get(ValueLayout.JAVA_INT, 0);
            if (version < required) {
                return new CudaProbe.DriverTooOld(version, required);
            }
            rc = cuda_h.cuInit(0);
            if (rc == cuda_h.CUDA_ERROR_NO_DEVICE) {
                return new CudaProbe.NoDevice(version, "cuInit: CUDA_ERROR_NO_DEVICE");
            }
            if (rc == cuda_h.CUDA_ERROR_STUB_LIBRARY) {
                return new CudaProbe.Failed(search.loadedFrom() + " is the toolkit's stub library, not a driver");
            }
            if (rc != cuda_h.CUDA_SUCCESS) {
                return new CudaProbe.Failed(CudaException.of("cuInit", rc, null).getMessage());
            }
            CudaException.check("cuDeviceGetCount", cuda_h.cuDeviceGetCount(i));
            int count = i.get(ValueLayout.JAVA_INT, 0);
            if (count < 1) {
                return new CudaProbe.NoDevice(version, "cuDeviceGetCount returned " + count);
            }
            CudaException.check("cuDeviceGet", cuda_h.cuDeviceGet(i, 0));
            int device = i.get(ValueLayout.JAVA_INT, 0);
            int major = attribute(arena, cuda_h.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
            int minor = attribute(arena, cuda_h.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
            int sms = attribute(arena, cuda_h.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
            MemorySegment bytes = arena.allocate(ValueLayout.JAVA_LONG);
            CudaException.check("cuDeviceTotalMem_v2", cuda_h.cuDeviceTotalMem_v2(bytes, device));
            return new CudaProbe.Ready(deviceName(device), major * 10 + minor, sms, bytes.get(ValueLayout.JAVA_LONG, 0),
                    version, count, search.loadedFrom());
        } catch (CudaException e) {
            return new CudaProbe.Failed(e.getMessage());
        }
    }

    private static int attribute(Arena arena, int attribute, int device) {
        MemorySegment v = arena.allocate(ValueLayout.JAVA_INT);
        CudaException.check("cuDeviceGetAttribute", cuda_h.cuDeviceGetAttribute(v, attribute, device));
        return v.get(ValueLayout.JAVA_INT, 0);
    }

    /** {@code cuDeviceGetName}. */
    static String deviceName(int device) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment name = arena.allocate(256);
            CudaException.check("cuDeviceGetName", cuda_h.cuDeviceGetName(name, 256, device));
            return name.getString(0);
        }
    }

    /** 12080 → {@code "12.8"}. */
    public static String versionString(int version) {
        return version / 1000 + "." + (version % 1000) / 10;
    }
}
