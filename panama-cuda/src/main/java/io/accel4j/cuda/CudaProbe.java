package io.accel4j.cuda;

import java.util.List;
import java.util.Locale;

/** What {@link Cuda#probe()} found: one of four outcomes, or a failure it could not classify. */
public sealed interface CudaProbe {

    /** One line for logs and {@code accel4j doctor}. */
    String describe();

    /** {@code true} only for {@link Ready}. */
    default boolean ready() {
        return this instanceof Ready;
    }

    /** No driver library ({@code libcuda.so.1}) could be loaded; {@code searched} lists every place tried. */
    record DriverNotFound(List<String> searched) implements CudaProbe {
        public DriverNotFound {
            searched = List.copyOf(searched);
        }

        @Override
        public String describe() {
            return "driver not found (searched: " + String.join(", ", searched) + ")";
        }
    }

    /** The driver loaded but reports no device ({@code detail} says what it returned). */
    record NoDevice(int driverVersion, String detail) implements CudaProbe {
        @Override
        public String describe() {
            return "no CUDA device (driver " + Cuda.versionString(driverVersion) + ": " + detail + ")";
        }
    }

    /** The driver is older than {@code required} (both as {@code cuDriverGetVersion} reports, e.g. 12080). */
    record DriverTooOld(int version, int required) implements CudaProbe {
        @Override
        public String describe() {
            return "driver too old: CUDA " + Cuda.versionString(version) + ", needs "
                    + Cuda.versionString(required) + " or newer (update the NVIDIA driver)";
        }
    }

    /** The driver loaded but failed otherwise (a stub library, no permission on the device files, …). */
    record Failed(String reason) implements CudaProbe {
        @Override
        public String describe() {
            return "unusable: " + reason;
        }
    }

    /** Device 0 is usable. {@code computeCapability} is {@code major * 10 + minor}. */
    record Ready(String deviceName, int computeCapability, int multiprocessors, long totalMemory,
                 int driverVersion, int deviceCount, String library) implements CudaProbe {
        @Override
        public String describe() {
            return String.format(Locale.ROOT, "%s, compute capability %d.%d, %d SMs, %.1f GiB, driver CUDA %s%s",
                    deviceName, computeCapability / 10, computeCapability % 10, multiprocessors,
                    totalMemory / (1024.0 * 1024 * 1024), Cuda.versionString(driverVersion),
                    deviceCount > 1 ? " (" + deviceCount + " devices, using 0)" : "");
        }
    }
}
