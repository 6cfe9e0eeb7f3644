package io.accel4j.cuda;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Optional;

/**
 * The test side of the stub driver ({@code src/test/c/stub_cuda.c}, a test double of {@code libcuda.so.1} over host
 * memory, compiled by {@code build-stub.sh} before the tests): whether this JVM loaded it as its CUDA driver, and its
 * controls (driver version, injected errors, call counts, the last launch). The {@code *StubTest} classes run in a
 * Surefire execution of their own whose {@code ACCEL4J_CUDA_LIB_PATH} points at it; they call {@link #assume()}
 * first, which skips them, saying why, where gcc was missing or a real driver was loaded instead.
 */
public final class StubDriver {

    private StubDriver() {}

    /** The folder {@code build-stub.sh} wrote ({@code target/stub-driver}), from the Surefire execution. */
    public static Path dir() {
        return Path.of(System.getProperty("accel4j.stub.dir", "target/stub-driver"));
    }

    /** Skips the calling test unless the driver this JVM loaded is the stub; the reason says what was found. */
    public static void assume() {
        Path skipped = dir().resolve("SKIPPED");
        if (Files.isRegularFile(skipped)) {
            String why;
            try {
                why = Files.readString(skipped).strip();
            } catch (IOException e) {
                why = "stub driver not built (" + skipped + ")";
            }
            assumeTrue(false, why);
        }
        CudaLibraries.Search driver = CudaLibraries.driver();
        assumeTrue(driver.found(), "stub driver not loaded: " + driver.notFoundMessage()
                + " (the *StubTest classes run in Surefire's stub-driver execution, which sets "
                + CudaLibraries.PATH_ENV + ")");
        assumeTrue(driver.lookup().find("stub_is_accel4j_stub").isPresent(),
                "the CUDA driver loaded is a real one (" + driver.loadedFrom() + "), not the stub");
    }

    private static final Linker LINKER = Linker.nativeLinker();

    @SuppressWarnings("restricted")
    private static MethodHandle handle(String name, FunctionDescriptor descriptor) {
        SymbolLookup lookup = CudaLibraries.driver().lookup();
        Optional<MemorySegment> address = lookup.find(name);
        return LINKER.downcallHandle(address.orElseThrow(() -> new IllegalStateException(name + " not in the stub")),
                descriptor);
    }

    private static RuntimeException rethrow(Throwable t) {
        return t instanceof RuntimeException r ? r : new IllegalStateException(t);
    }

    /** Whether this JVM's CUDA driver is the stub. */
    public static boolean loaded() {
        CudaLibraries.Search driver = CudaLibraries.driver();
        return driver.found() && driver.lookup().find("stub_is_accel4j_stub").isPresent();
    }

    /** Back to the defaults: driver 13.0, no injected errors, call counts zero (nothing where the stub is absent). */
    public static void reset() {
        if (!loaded()) {
            return;
        }
        try {
            handle("stub_reset", FunctionDescriptor.ofVoid()).invokeExact();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** The version {@code cuDriverGetVersion} reports from now on (e.g. 12040 for 12.4). */
    public static void driverVersion(int version) {
        try {
            handle("stub_set_driver_version", FunctionDescriptor.ofVoid(ValueLayout.JAVA_INT)).invokeExact(version);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * The next {@code times} calls ({@code -1}: all) of {@code function} whose subject (the PTX image of a module
     * load, the kernel name of a launch or lookup) contains {@code match} ({@code ""}: any) return {@code status}.
     */
    public static void fail(String function, String match, int status, int times) {
        try (Arena arena = Arena.ofConfined()) {
            int rc = (int) handle("stub_fail", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS,
                    ValueLayout.ADDRESS, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT))
                    .invokeExact(arena.allocateFrom(function), arena.allocateFrom(match), status, times);
            if (rc != 0) {
                throw new IllegalStateException("the stub's table of injected errors is full");
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** How often {@code function} was called since the last {@link #reset()}. */
    public static long calls(String function) {
        try (Arena arena = Arena.ofConfined()) {
            return (long) handle("stub_calls", FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.ADDRESS))
                    .invokeExact(arena.allocateFrom(function));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Device allocations not yet freed. */
    public static int liveAllocations() {
        return intOf("stub_live_allocations");
    }

    /** Modules not yet unloaded. */
    public static int liveModules() {
        return intOf("stub_live_modules");
    }

    private static int intOf(String name) {
        try {
            return (int) handle(name, FunctionDescriptor.of(ValueLayout.JAVA_INT)).invokeExact();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@code CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES} of kernel {@code entry} in the newest live module that
     * has it: -1 if never set, -2 if no live module has it.
     */
    public static int dynamicSharedAttribute(String entry) {
        try (Arena arena = Arena.ofConfined()) {
            return (int) handle("stub_dynamic_shared_attribute",
                    FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS))
                    .invokeExact(arena.allocateFrom(entry));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** What the stub recorded of the last launch: the kernel, grid, block, dynamic shared bytes, each parameter. */
    public record Launch(String kernel, int[] grid, int[] block, int sharedBytes, byte[][] params) {
        public long longParam(int i) {
            return MemorySegment.ofArray(params[i]).get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
        }

        public int intParam(int i) {
            return MemorySegment.ofArray(params[i]).get(ValueLayout.JAVA_INT_UNALIGNED, 0);
        }

        public float floatParam(int i) {
            return MemorySegment.ofArray(params[i]).get(ValueLayout.JAVA_FLOAT_UNALIGNED, 0);
        }

        @Override
        public String toString() {
            return kernel + "<<<" + Arrays.toString(grid) + ", " + Arrays.toString(block) + ", " + sharedBytes
                    + ">>>(" + params.length + " params)";
        }
    }

    /** The last launch, or empty if there was none. */
    public static Optional<Launch> lastLaunch() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment name = arena.allocate(128);
            MemorySegment dims = arena.allocate(ValueLayout.JAVA_INT, 7);
            MemorySegment sizes = arena.allocate(ValueLayout.JAVA_INT, 32);
            MemorySegment bytes = arena.allocate(32 * 128);
            int n = (int) handle("stub_last_launch", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS,
                    ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.ADDRESS))
                    .invokeExact(name, 128, dims, sizes, bytes);
            if (n < 0) {
                return Optional.empty();
            }
            int[] d = dims.toArray(ValueLayout.JAVA_INT);
            byte[][] params = new byte[n][];
            long at = 0;
            for (int i = 0; i < n; i++) {
                int size = sizes.getAtIndex(ValueLayout.JAVA_INT, i);
                params[i] = bytes.asSlice(at, size).toArray(ValueLayout.JAVA_BYTE);
                at += size;
            }
            return Optional.of(new Launch(name.getString(0), Arrays.copyOfRange(d, 0, 3), Arrays.copyOfRange(d, 3, 6),
                    d[6], params));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }
}
