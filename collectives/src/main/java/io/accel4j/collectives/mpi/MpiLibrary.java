package io.accel4j.collectives.mpi;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * Finds Open MPI's {@code libmpi.so.40}, in one place: {@code -Daccel4j.mpi.library=/path/libmpi.so.40} if set, else
 * the dynamic loader's search ({@code LD_LIBRARY_PATH}, ld.so.cache), else {@code $MPI_HOME/lib} and the usual
 * Debian, Ubuntu and Fedora directories. The library is opened with {@code RTLD_GLOBAL} so that the components Open
 * MPI itself loads with {@code dlopen} resolve its symbols. Failure names every place searched and how to install it.
 */
@SuppressWarnings("restricted") // dlopen and libraryLookup: run with --enable-native-access
public final class MpiLibrary {

    /** System property naming the library file to use. */
    public static final String PROPERTY = "accel4j.mpi.library";
    static final String NAME = "libmpi.so.40";
    private static final int RTLD_NOW = 0x2;
    private static final int RTLD_GLOBAL = 0x100;

    private MpiLibrary() {}

    private static final class Holder {
        static final SymbolLookup LOOKUP;
        static final String WHERE;
        static final String ERROR;

        static {
            SymbolLookup lookup = null;
            String where = null;
            List<String> tried = new ArrayList<>();
            for (String candidate : candidates()) {
                tried.add(candidate);
                if (candidate.startsWith("/") && !Files.exists(Path.of(candidate))) {
                    continue;
                }
                if (dlopenGlobal(candidate)) {
                    try {
                        lookup = SymbolLookup.libraryLookup(candidate, Arena.global());
                        where = candidate;
                        break;
                    } catch (IllegalArgumentException e) {
                        // keep looking
                    }
                }
            }
            LOOKUP = lookup;
            WHERE = where;
            ERROR = lookup != null ? null : "Open MPI not found: " + NAME + " could not be loaded (searched: "
                    + String.join(", ", tried) + "); install it with scripts/install-openmpi.sh (Debian/Ubuntu: "
                    + "apt-get install openmpi-bin libopenmpi-dev) or set -D" + PROPERTY + "=/path/to/" + NAME;
        }
    }

    private static List<String> candidates() {
        List<String> out = new ArrayList<>();
        String forced = System.getProperty(PROPERTY);
        if (forced != null && !forced.isBlank()) {
            out.add(forced.trim());
            return out;
        }
        out.add(NAME); // the loader's own search
        String home = System.getenv("MPI_HOME");
        if (home != null && !home.isBlank()) {
            out.add(home + "/lib/" + NAME);
        }
        out.add("/usr/lib/x86_64-linux-gnu/" + NAME);
        out.add("/usr/lib/aarch64-linux-gnu/" + NAME);
        out.add("/usr/lib/x86_64-linux-gnu/openmpi/lib/" + NAME);
        out.add("/usr/lib64/openmpi/lib/" + NAME);
        out.add("/usr/local/lib/" + NAME);
        out.add("/opt/openmpi/lib/" + NAME);
        return out;
    }

    /** {@code dlopen(name, RTLD_NOW | RTLD_GLOBAL)} through libc; true if it loaded. */
    private static boolean dlopenGlobal(String name) {
        Linker linker = Linker.nativeLinker();
        MemorySegment dlopen = linker.defaultLookup().find("dlopen").orElse(null);
        if (dlopen == null) {
            return true; // let libraryLookup try on its own
        }
        MethodHandle h = linker.downcallHandle(dlopen, FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT));
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment handle = (MemorySegment) h.invokeExact(arena.allocateFrom(name), RTLD_NOW | RTLD_GLOBAL);
            return handle.address() != 0;
        } catch (Throwable t) {
            return false;
        }
    }

    /** Whether {@code libmpi} can be loaded. */
    public static boolean available() {
        return Holder.LOOKUP != null;
    }

    /** Why {@code libmpi} cannot be loaded (with the places searched), or {@code null} when it can. */
    public static String unavailableReason() {
        return Holder.ERROR;
    }

    /** The file or name that was loaded, or {@code null}. */
    public static String loadedFrom() {
        return Holder.WHERE;
    }

    /** The address of symbol {@code name} in {@code libmpi}. */
    static MemorySegment symbol(String name) {
        if (Holder.LOOKUP == null) {
            throw new UnsatisfiedLinkError(Holder.ERROR);
        }
        return Holder.LOOKUP.find(name).orElseThrow(() -> new UnsatisfiedLinkError(
                "symbol " + name + " not found in " + Holder.WHERE + " (is it Open MPI 4 or 5, ABI libmpi.so.40?)"));
    }
}
