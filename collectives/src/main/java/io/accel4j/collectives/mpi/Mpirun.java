package io.accel4j.collectives.mpi;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * Open MPI's launcher seen from Java: where {@code mpirun} is, the command line that starts {@code np} copies of a
 * Java main under it, and a bounded run of that command. Used by the tests that start real MPI jobs and by
 * {@code accel4j doctor}.
 *
 * <p>The command adds {@code --allow-run-as-root} when this process runs as root (Open MPI refuses root otherwise),
 * {@code --oversubscribe} (more ranks than cores, as on a 2-core CI runner) and
 * {@code --mca btl_vader_single_copy_mechanism none} (the shared-memory transport's ptrace-based copies fail in
 * containers).
 */
public final class Mpirun {

    /** The JVM flags every accel4j launch needs (the parent pom's {@code accel4j.jvm.flags}). */
    public static final List<String> JVM_FLAGS = List.of("--add-modules=jdk.incubator.vector",
            "--enable-native-access=ALL-UNNAMED");

    private Mpirun() {}

    /** What a bounded run printed (stdout and stderr merged) and how it ended. */
    public record Result(boolean finished, int exitCode, String output, Duration wall) {}

    /** {@code mpirun} on {@code PATH}, if any. */
    public static Optional<Path> find() {
        for (String dir : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
            if (dir.isEmpty()) {
                continue;
            }
            Path p = Path.of(dir, "mpirun");
            if (Files.isExecutable(p)) {
                return Optional.of(p);
            }
        }
        return Optional.empty();
    }

    /** Whether this process runs as root, so that {@code mpirun} needs {@code --allow-run-as-root}. */
    public static boolean root() {
        return "root".equals(System.getProperty("user.name"));
    }

    /**
     * {@code mpirun [root/oversubscribe/vader flags] mpirunArgs… -np np java JVM_FLAGS -cp classpath mainClass args…},
     * with this JVM's {@code java}.
     */
    public static List<String> javaCommand(Path mpirun, int np, List<String> mpirunArgs, String classpath,
                                           String mainClass, List<String> args) {
        if (np < 1) {
            throw new IllegalArgumentException("np must be >= 1, got " + np);
        }
        List<String> cmd = new ArrayList<>();
        cmd.add(mpirun.toString());
        if (root()) {
            cmd.add("--allow-run-as-root");
        }
        cmd.addAll(List.of("--oversubscribe", "--mca", "btl_vader_single_copy_mechanism", "none"));
        cmd.addAll(mpirunArgs);
        cmd.addAll(List.of("-np", Integer.toString(np)));
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(JVM_FLAGS);
        cmd.addAll(List.of("-cp", classpath, mainClass));
        cmd.addAll(args);
        return cmd;
    }

    /**
     * Runs {@code cmd} in {@code dir} for at most {@code limit}; a command still running then is killed (with its
     * children) and reported as not finished. Never hangs longer than {@code limit} plus a few seconds.
     */
    public static Result run(List<String> cmd, Path dir, Duration limit) throws IOException, InterruptedException {
        Path log = Files.createTempFile("accel4j-mpirun", ".log");
        try {
            long start = System.nanoTime();
            Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true)
                    .redirectOutput(log.toFile()).start();
            boolean finished = p.waitFor(limit.toMillis(), TimeUnit.MILLISECONDS);
            if (!finished) {
                p.descendants().forEach(ProcessHandle::destroyForcibly);
                p.destroyForcibly();
                p.waitFor(10, TimeUnit.SECONDS);
            }
            Duration wall = Duration.ofNanos(System.nanoTime() - start);
            String out = new String(Files.readAllBytes(log), StandardCharsets.UTF_8);
            return new Result(finished, finished ? p.exitValue() : -1, out, wall);
        } finally {
            Files.deleteIfExists(log);
        }
    }
}
