package io.accel4j.cli.launch;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;

/**
 * The processes of the local ranks: started with their environments, their output copied line by line with a
 * {@code [rank r] } prefix (stdout to {@code out}, stderr to {@code err}), watched together so that the first one
 * to exit with a non-zero code stops the others ({@link #await}). {@link #stop} ends them: {@code SIGTERM}, then,
 * after {@link #GRACE_MS}, {@code SIGKILL}. A shutdown hook stops them too, so that a launcher interrupted
 * ({@code SIGINT}, {@code SIGTERM}) passes the signal on and leaves no rank behind.
 */
final class RankProcesses implements AutoCloseable {

    /** How long a rank may take to exit after {@code SIGTERM} before it is killed. */
    static final long GRACE_MS = 5_000;

    /** How the job ended: {@code code} 0 with {@code rank} −1 when every rank succeeded. */
    record Outcome(int code, int rank) {}

    private final List<Process> processes = new ArrayList<>();
    private final List<Integer> ranks = new ArrayList<>();
    private final List<Thread> pumps = new ArrayList<>();
    private final Thread hook = new Thread(this::stop, "accel4j-launch-stop");

    private RankProcesses() {}

    /**
     * Starts one process per entry of {@code envs} (rank {@code ranks[i]}, its variables added to this process's
     * environment), running {@code command}. {@code lines} sees every line of a rank's stdout before it is printed.
     *
     * @throws IOException when a process cannot be started (those already started are stopped)
     */
    static RankProcesses start(List<String> command, List<Map<String, String>> envs, int[] ranks, PrintWriter out,
                               PrintWriter err, BiConsumer<Integer, String> lines) throws IOException {
        RankProcesses p = new RankProcesses();
        Runtime.getRuntime().addShutdownHook(p.hook);
        boolean ok = false;
        try {
            for (int i = 0; i < envs.size(); i++) {
                ProcessBuilder pb = new ProcessBuilder(command);
                Map<String, String> env = pb.environment();
                env.keySet().removeIf(k -> k.startsWith("OMPI_COMM_WORLD_")); // this job is the launcher's, not MPI's
                env.putAll(envs.get(i));
                Process proc = pb.start();
                proc.getOutputStream().close(); // the ranks read nothing from the terminal
                p.processes.add(proc);
                p.ranks.add(ranks[i]);
                int rank = ranks[i];
                p.pump(proc.getInputStream(), out, rank, line -> lines.accept(rank, line));
                p.pump(proc.getErrorStream(), err, rank, line -> { });
            }
            ok = true;
            return p;
        } finally {
            if (!ok) {
                p.close();
            }
        }
    }

    private void pump(InputStream in, PrintWriter to, int rank, java.util.function.Consumer<String> seen) {
        String prefix = "[rank " + rank + "] ";
        Thread t = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    seen.accept(line);
                    synchronized (to) {
                        to.println(prefix + line);
                        to.flush();
                    }
                }
            } catch (IOException e) {
                // the process is gone: nothing more to copy
            }
        }, "accel4j-launch-output-rank-" + rank);
        t.setDaemon(true);
        t.start();
        pumps.add(t);
    }

    /**
     * Waits for every rank; the first to exit non-zero gives the outcome (its rank and code) and, with
     * {@code stopOnFailure}, stops the others. Returns once every process has exited and its output has been copied.
     */
    Outcome await(boolean stopOnFailure) throws InterruptedException {
        Outcome failed = null;
        List<Integer> running = new ArrayList<>();
        for (int i = 0; i < processes.size(); i++) {
            running.add(i);
        }
        while (!running.isEmpty()) {
            CompletableFuture<?>[] exits = running.stream().map(i -> processes.get(i).onExit())
                    .toArray(CompletableFuture[]::new);
            try {
                CompletableFuture.anyOf(exits).get();
            } catch (ExecutionException e) {
                throw new IllegalStateException("waiting for the ranks failed", e);
            }
            for (var it = running.iterator(); it.hasNext(); ) {
                int i = it.next();
                Process proc = processes.get(i);
                if (proc.isAlive()) {
                    continue;
                }
                it.remove();
                int code = proc.exitValue();
                if (code != 0 && failed == null) {
                    failed = new Outcome(code, ranks.get(i));
                    if (stopOnFailure) {
                        stop();
                    }
                }
            }
        }
        for (Thread t : pumps) {
            t.join(GRACE_MS);
        }
        return failed != null ? failed : new Outcome(0, -1);
    }

    /** {@code SIGTERM} to every rank still running, {@code SIGKILL} to those still there after the grace. */
    void stop() {
        for (Process p : processes) {
            p.destroy();
        }
        long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(GRACE_MS);
        for (Process p : processes) {
            try {
                long left = until - System.nanoTime();
                if (left <= 0 || !p.waitFor(left, TimeUnit.NANOSECONDS)) {
                    p.destroyForcibly();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                p.destroyForcibly();
            }
        }
    }

    /** Stops every rank still running and forgets the shutdown hook. */
    @Override
    public void close() {
        stop();
        try {
            Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException e) {
            // shutting down already: the hook is running or has run
        }
    }
}
