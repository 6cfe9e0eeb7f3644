package io.accel4j.cuda;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.SymbolLookup;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Where the native CUDA libraries come from: the one place that finds and loads them.
 *
 * <p>Order, for each candidate file name of a library (e.g. {@code libcuda.so.1}):
 * <ol>
 *   <li>{@value #PATH_ENV}: a file, or a folder, or several of them separated by {@code :};</li>
 *   <li>the dynamic loader's normal search ({@code LD_LIBRARY_PATH}, {@code ld.so.cache}, the system folders);</li>
 *   <li>the usual install folders: {@code $CUDA_HOME/lib64}, {@code /usr/local/cuda/lib64}, the distribution's
 *       multiarch folder, {@code /usr/lib64}, WSL's {@code /usr/lib/wsl/lib}, and the {@code nvidia/*&#47;lib}
 *       folders of the Python environments' site-packages (where pip's CUDA wheels put cuBLAS and NCCL).</li>
 * </ol>
 * The toolkit's {@code stubs} folder is never searched: its {@code libcuda.so} only answers "stub library".
 * Libraries are loaded into the global arena and stay loaded. A failed search is not an exception here: it is a
 * {@link Search} whose {@link Search#searched()} lists every place tried, for the error message and the doctor.
 */
public final class CudaLibraries {

    /** The environment variable naming an explicit library file or folder (or a {@code :}-separated list). */
    public static final String PATH_ENV = "ACCEL4J_CUDA_LIB_PATH";

    /** The CUDA driver's file name, as the loader knows it. */
    public static final String DRIVER = "libcuda.so.1";

    /** cuBLAS's file names (CUDA 13, then 12), the versioned ones first. */
    public static final List<String> CUBLAS = List.of("libcublas.so.13", "libcublas.so.12", "libcublas.so");

    /** cuBLASLt's file names (CUDA 13, then 12), the versioned ones first. */
    public static final List<String> CUBLASLT =
            List.of("libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so");

    /** NCCL's file names, the versioned one first. */
    public static final List<String> NCCL = List.of("libnccl.so.2", "libnccl.so");

    private CudaLibraries() {}

    /** The outcome of a search: the lookup (absent when nothing loaded), where it came from, and what was tried. */
    public record Search(String library, SymbolLookup lookup, String loadedFrom, List<String> searched) {
        public Search {
            searched = List.copyOf(searched);
        }

        public boolean found() {
            return lookup != null;
        }

        /** {@code "libcuda.so.1 not found (searched: a, b, c)"}. */
        public String notFoundMessage() {
            return library + " not found (searched: " + String.join(", ", searched) + ")";
        }
    }

    private static final class DriverHolder {
        static final Search SEARCH = find(List.of(DRIVER), System.getenv(), defaultFolders(System.getenv()));
    }

    private static final class CublasHolder {
        static final Search SEARCH =
                find(forDriver(CUBLAS, driverVersion()), System.getenv(), defaultFolders(System.getenv()));
    }

    private static final class CublasLtHolder {
        static final Search SEARCH =
                find(forDriver(CUBLASLT, driverVersion()), System.getenv(), defaultFolders(System.getenv()));
    }

    /** The driver's {@code cuDriverGetVersion}, or 0 when there is no driver or it fails. */
    private static int driverVersion() {
        if (!driver().found()) {
            return 0;
        }
        try (Arena arena = Arena.ofConfined()) {
            var v = arena.allocate(java.lang.foreign.ValueLayout.JAVA_INT);
            return io.accel4j.cuda.bindings.cuda_h.cuDriverGetVersion(v) == 0
                    ? v.get(java.lang.foreign.ValueLayout.JAVA_INT, 0) : 0;
        } catch (RuntimeException e) {
            return 0;
        }
    }

    /**
     * {@code names} (a CUDA library's file names, the newest major first) in the order to try under a driver of
     * {@code driverVersion} ({@code cuDriverGetVersion} form): under a 12.x driver the {@code .so.12} names first,
     * since a CUDA 13 library needs a 13.x driver (its first call would fail); otherwise (13.x, or unknown: 0)
     * unchanged.
     */
    public static List<String> forDriver(List<String> names, int driverVersion) {
        if (driverVersion < 12000 || driverVersion >= 13000) {
            return names;
        }
        List<String> out = new ArrayList<>(names.stream().filter(n -> n.endsWith(".so.12")).toList());
        names.stream().filter(n -> !out.contains(n)).forEach(out::add);
        return List.copyOf(out);
    }

    private static final class NcclHolder {
        static final Search SEARCH = find(NCCL, System.getenv(), defaultFolders(System.getenv()));
    }

    /** The driver library, searched once per JVM; never throws. */
    public static Search driver() {
        return DriverHolder.SEARCH;
    }

    /** cuBLAS, searched once per JVM; never throws. */
    public static Search cublas() {
        return CublasHolder.SEARCH;
    }

    /** cuBLASLt, searched once per JVM; never throws. */
    public static Search cublasLt() {
        return CublasLtHolder.SEARCH;
    }

    /** NCCL, searched once per JVM; never throws. */
    public static Search nccl() {
        return NcclHolder.SEARCH;
    }

    /**
     * Searches for a library under any of {@code names} (e.g. {@code libnccl.so.2}, {@code libnccl.so}).
     *
     * @param env     the environment to read {@value #PATH_ENV} from
     * @param folders the install folders tried after the loader (see {@link #defaultFolders(Map)})
     */
    @SuppressWarnings("restricted") // loading a native library is the point
    public static Search find(List<String> names, Map<String, String> env, List<Path> folders) {
        String library = names.getFirst();
        List<String> searched = new ArrayList<>();
        String explicit = env.get(PATH_ENV);
        if (explicit != null && !explicit.isBlank()) {
            for (String part : explicit.split(":")) {
                if (part.isBlank()) {
                    continue;
                }
                Path p = Path.of(part.strip());
                List<Path> files = Files.isDirectory(p) ? names.stream().map(p::resolve).toList() : List.of(p);
                for (Path f : files) {
                    Search s = tryFile(library, f, PATH_ENV + "=" + f, searched);
                    if (s != null) {
                        return s;
                    }
                }
            }
        }
        for (String name : names) {
            String where = "dynamic loader (" + name + ")";
            try {
                SymbolLookup lookup = SymbolLookup.libraryLookup(name, Arena.global());
                return new Search(library, lookup, where, addTo(searched, where));
            } catch (IllegalArgumentException e) {
                searched.add(where);
            }
        }
        for (Path folder : folders) {
            for (String name : names) {
                Search s = tryFile(library, folder.resolve(name), folder.resolve(name).toString(), searched);
                if (s != null) {
                    return s;
                }
            }
        }
        return new Search(library, null, null, searched);
    }

    private static List<String> addTo(List<String> searched, String where) {
        searched.add(where);
        return searched;
    }

    /** Loads {@code file} if it exists; records the attempt (and why it failed) in {@code searched}. */
    @SuppressWarnings("restricted")
    private static Search tryFile(String library, Path file, String where, List<String> searched) {
        if (!Files.isRegularFile(file)) {
            searched.add(where);
            return null;
        }
        try {
            SymbolLookup lookup = SymbolLookup.libraryLookup(file, Arena.global());
            return new Search(library, lookup, file.toString(), addTo(searched, where));
        } catch (IllegalArgumentException e) {
            searched.add(where + " (could not be loaded: " + e.getMessage() + ")");
            return null;
        }
    }

    /**
     * The install folders searched after the loader, in order; folders that do not exist are kept (the error
     * lists them too, so a user sees where the library was expected).
     */
    public static List<Path> defaultFolders(Map<String, String> env) {
        List<Path> folders = new ArrayList<>();
        for (String var : List.of("CUDA_HOME", "CUDA_PATH")) {
            String home = env.get(var);
            if (home != null && !home.isBlank()) {
                folders.add(Path.of(home.strip(), "lib64"));
            }
        }
        folders.add(Path.of("/usr/local/cuda/lib64"));
        folders.add(Path.of("/usr/lib", multiarch()));
        folders.add(Path.of("/usr/lib64"));
        folders.add(Path.of("/usr/lib/wsl/lib"));
        folders.addAll(pythonNvidiaFolders(env));
        return folders.stream().distinct().toList();
    }

    /** {@code x86_64-linux-gnu} or {@code aarch64-linux-gnu}. */
    static String multiarch() {
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        return (arch.equals("aarch64") || arch.equals("arm64") ? "aarch64" : "x86_64") + "-linux-gnu";
    }

    /**
     * {@code site-packages/nvidia/*&#47;lib} of the active virtualenv or conda environment, the user's and the
     * system's Python folders; found by listing folders, no Python is run.
     */
    static List<Path> pythonNvidiaFolders(Map<String, String> env) {
        List<Path> prefixes = new ArrayList<>();
        for (String var : List.of("VIRTUAL_ENV", "CONDA_PREFIX")) {
            String v = env.get(var);
            if (v != null && !v.isBlank()) {
                prefixes.add(Path.of(v.strip(), "lib"));
            }
        }
        String home = env.get("HOME");
        if (home != null && !home.isBlank()) {
            prefixes.add(Path.of(home.strip(), ".local", "lib"));
        }
        prefixes.add(Path.of("/usr/local/lib"));
        prefixes.add(Path.of("/usr/lib"));
        List<Path> out = new ArrayList<>();
        for (Path prefix : prefixes) {
            for (Path python : list(prefix, "python3*")) {
                for (String packages : List.of("site-packages", "dist-packages")) {
                    for (Path pkg : list(python.resolve(packages).resolve("nvidia"), "*")) {
                        Path lib = pkg.resolve("lib");
                        if (Files.isDirectory(lib)) {
                            out.add(lib);
                        }
                    }
                }
            }
        }
        return out;
    }

    private static List<Path> list(Path dir, String glob) {
        if (!Files.isDirectory(dir)) {
            return List.of();
        }
        List<Path> out = new ArrayList<>();
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir, glob)) {
            ds.forEach(out::add);
        } catch (IOException | SecurityException e) {
            return List.of();
        }
        out.sort(null);
        return out;
    }
}
