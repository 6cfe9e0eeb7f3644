package io.accel4j.cli;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Compares what a command will allocate, known from its memory plan before the first allocation, with what this
 * process can have, and refuses a plan that does not fit with one line instead of an {@link OutOfMemoryError} (or the
 * kernel's OOM killer) later. What the process can have: the machine's available memory ({@code MemAvailable} of
 * {@code /proc/meminfo}, else the JVM's free physical memory), less, in a container, what its memory limit leaves
 * (cgroup v2 {@code memory.max − memory.current}, or v1's); {@code -Daccel4j.memory.limit=SIZE} replaces it. The
 * off-heap memory the kernels use ({@link java.lang.foreign.Arena}) is not bounded by
 * {@code -XX:MaxDirectMemorySize} (measured on JDK 25), so that flag is not consulted.
 */
public final class MemoryCheck {

    /** The system property that sets the limit instead of what the machine has available. */
    public static final String LIMIT_PROPERTY = "accel4j.memory.limit";

    /**
     * Bytes the process can have and where the figure comes from.
     *
     * @param bytes  the bytes
     * @param source e.g. "this machine has", "the container's limit leaves", "-Daccel4j.memory.limit is"
     */
    public record Available(long bytes, String source) {}

    /** One part of a plan, for the message: e.g. ("parameters", 4Ψ). */
    public record Part(String name, long bytes) {}

    private MemoryCheck() {}

    /** What this process can allocate now. */
    public static Available available() {
        String limit = System.getProperty(LIMIT_PROPERTY);
        if (limit != null && !limit.isBlank()) {
            try {
                return new Available(parseBytes(limit), "-D" + LIMIT_PROPERTY + " allows %s");
            } catch (IllegalArgumentException e) {
                throw new CliException("-D" + LIMIT_PROPERTY + "=" + limit + ": " + e.getMessage());
            }
        }
        long machine = meminfoAvailable();
        Available a = new Available(machine >= 0 ? machine : osFree(), "this machine has %s available");
        long container = cgroupLeft();
        if (container >= 0 && container < a.bytes()) {
            a = new Available(container, "the container's memory limit leaves %s");
        }
        return a;
    }

    /**
     * Refuses ({@link CliException}, exit 1) a plan whose parts add up to more than {@link #available()}: "needs
     * 28.6 GiB (parameters …, activations …), this machine has 23.4 GiB available; try …". A plan too large to
     * count (a long overflows) is refused the same way.
     *
     * @param what what needs it, e.g. "this run (2 ranks)"
     * @param hint what to do, e.g. "a smaller --batch or --seq"
     */
    public static void require(String what, List<Part> parts, String hint) {
        require(what, parts, hint, available());
    }

    /** {@link #require(String, List, String)} against {@code available} (e.g. a GPU's memory). */
    public static void require(String what, List<Part> parts, String hint, Available available) {
        long total = 0;
        boolean overflow = false;
        List<String> named = new ArrayList<>();
        for (Part p : parts) {
            if (p.bytes() <= 0) {
                continue;
            }
            named.add(p.name() + " " + size(p.bytes()));
            try {
                total = Math.addExact(total, p.bytes());
            } catch (ArithmeticException e) {
                overflow = true;
            }
        }
        if (overflow || total > available.bytes()) {
            throw new CliException(what + " needs " + (overflow ? "more than 8 EiB" : size(total)) + " ("
                    + String.join(", ", named) + "), " + String.format(Locale.ROOT, available.source(),
                    size(available.bytes())) + "; try " + hint);
        }
    }

    /** Bytes as GiB, MiB or KiB with one decimal. */
    public static String size(long bytes) {
        if (bytes >= 1L << 30) {
            return String.format(Locale.ROOT, "%.1f GiB", bytes / (double) (1L << 30));
        }
        if (bytes >= 1L << 20) {
            return String.format(Locale.ROOT, "%.1f MiB", bytes / (double) (1L << 20));
        }
        return String.format(Locale.ROOT, "%.1f KiB", bytes / 1024.0);
    }

    /** Parses {@code 123}, {@code 64k}, {@code 512M}, {@code 1.5g}, {@code 2GiB}, {@code 3gb}: powers of 1024. */
    public static long parseBytes(String s) {
        Matcher m = Pattern.compile("(\\d+(?:\\.\\d+)?)\\s*([kmgt]?)(?:i?b)?").matcher(s.trim().toLowerCase(Locale.ROOT));
        if (!m.matches()) {
            throw new IllegalArgumentException("'" + s + "' is not a size: a number with an optional unit k, m, g, "
                    + "t (e.g. 512m, 1.5g)");
        }
        int shift = switch (m.group(2)) {
            case "k" -> 10;
            case "m" -> 20;
            case "g" -> 30;
            case "t" -> 40;
            default -> 0;
        };
        double bytes = Double.parseDouble(m.group(1)) * (1L << shift);
        if (!(bytes >= 1) || bytes >= 0x1p62) {
            throw new IllegalArgumentException("'" + s + "' is not a usable size: between 1 byte and 4 EiB");
        }
        return (long) bytes;
    }

    /** {@code MemAvailable} of {@code /proc/meminfo} in bytes, or -1 where there is none. */
    private static long meminfoAvailable() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/meminfo"))) {
                Matcher m = Pattern.compile("MemAvailable:\\s+(\\d+)\\s*kB").matcher(line);
                if (m.matches()) {
                    return Long.parseLong(m.group(1)) * 1024;
                }
            }
        } catch (IOException | RuntimeException e) {
            // not Linux: the JVM's figure
        }
        return -1;
    }

    private static long osFree() {
        if (ManagementFactory.getOperatingSystemMXBean() instanceof com.sun.management.OperatingSystemMXBean os) {
            return os.getFreeMemorySize();
        }
        return Long.MAX_VALUE; // unknown: nothing is refused
    }

    /** What the cgroup's memory limit leaves (v2, then v1), or -1 without a limit. */
    private static long cgroupLeft() {
        long v2 = left(Path.of("/sys/fs/cgroup/memory.max"), Path.of("/sys/fs/cgroup/memory.current"));
        return v2 >= 0 ? v2 : left(Path.of("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
                Path.of("/sys/fs/cgroup/memory/memory.usage_in_bytes"));
    }

    private static long left(Path max, Path current) {
        try {
            String limit = Files.readString(max).strip();
            if (limit.equals("max")) {
                return -1;
            }
            long l = Long.parseLong(limit);
            if (l >= 1L << 60) { // v1's "no limit"
                return -1;
            }
            long used = Files.isReadable(current) ? Long.parseLong(Files.readString(current).strip()) : 0;
            return Math.max(0, l - used);
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }
}
