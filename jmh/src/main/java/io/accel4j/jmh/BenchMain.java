package io.accel4j.jmh;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The benchmarks jar's main class: JMH's own command line ({@code -h} lists it), with the JVM flags every accel4j
 * launch needs ({@code accel4j.jvm.flags} in the parent pom, copied into the jar's {@code accel4j-jvm.flags} at
 * build time) added to every fork's {@code -jvmArgsAppend}, before any the user gives.
 *
 * <p>Forks only: with {@code -f 0} the benchmarks run in this JVM, which then needs the flags on its own command line.
 */
public final class BenchMain {

    static final String FLAGS_RESOURCE = "/accel4j-jvm.flags";
    private static final String APPEND = "-jvmArgsAppend";

    private BenchMain() {}

    public static void main(String[] args) throws Exception {
        org.openjdk.jmh.Main.main(withJvmFlags(args, jvmFlags()));
    }

    /** The JVM flags baked into the jar. */
    static String jvmFlags() throws IOException {
        try (InputStream in = BenchMain.class.getResourceAsStream(FLAGS_RESOURCE)) {
            if (in == null) {
                throw new IllegalStateException(FLAGS_RESOURCE + " is missing from the class path: rebuild the jmh module");
            }
            String flags = new String(in.readAllBytes(), StandardCharsets.UTF_8).trim();
            if (flags.isEmpty() || flags.contains("${")) {
                throw new IllegalStateException(FLAGS_RESOURCE + " was not filtered by Maven (holds '" + flags
                        + "'): rebuild with mvn -pl jmh -am package");
            }
            return flags;
        }
    }

    /**
     * Returns {@code args} with every {@code -jvmArgsAppend} value merged into a single one that starts with
     * {@code flags}. (JMH splits a single value at spaces, but takes several values verbatim, so one option it is.)
     */
    static String[] withJvmFlags(String[] args, String flags) {
        StringBuilder append = new StringBuilder(flags);
        List<String> rest = new ArrayList<>(args.length + 2);
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals(APPEND) || a.equals("-" + APPEND)) {
                if (i + 1 < args.length) {
                    append.append(' ').append(args[++i]);
                }
            } else if (a.startsWith(APPEND + "=") || a.startsWith("-" + APPEND + "=")) {
                append.append(' ').append(a.substring(a.indexOf('=') + 1));
            } else {
                rest.add(a);
            }
        }
        rest.add(0, append.toString());
        rest.add(0, APPEND);
        return rest.toArray(String[]::new);
    }
}
