package io.accel4j.cuda;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;
import java.util.function.Function;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;

/**
 * {@link GpuCheck}'s listener: a row per test as it finishes, appended and flushed to a TSV file at once (so a hang
 * or a crash later keeps every row before it), a watchdog per test that names the test still running after the
 * timeout, and, after each test class, a check that the context is still usable (an illegal address poisons every
 * later test of the same context: the rows after it would say nothing).
 *
 * <p>TSV columns: {@code test, result, ms, detail} (a header line first); result is {@code SUCCESSFUL},
 * {@code FAILED}, {@code ABORTED}, {@code SKIPPED}, {@code TIMEOUT} or {@code CONTEXT} (the after-class check).
 */
final class ResultStream implements TestExecutionListener, AutoCloseable {

    /** One finished test (or failed container). */
    record Row(String test, String outcome, long millis, String detail) {
        String tsv() {
            return String.join("\t", clean(test), outcome, Long.toString(millis), clean(firstLine(detail)));
        }

        private static String clean(String s) {
            return s.replace('\t', ' ').replace('\n', ' ').replace('\r', ' ');
        }
    }

    static String firstLine(String s) {
        String line = s == null ? "" : s.lines().findFirst().orElse("");
        return line.length() > 300 ? line.substring(0, 300) + "…" : line;
    }

    private final Writer tsv;
    private final long timeoutMillis;
    private final BiConsumer<String, Long> onTimeout;
    private final Function<String, String> afterClass;
    private final BiConsumer<String, String> onContextLost;
    private final ScheduledExecutorService watchdog;
    private final Map<String, Long> started = new ConcurrentHashMap<>();
    private final Map<String, ScheduledFuture<?>> timers = new ConcurrentHashMap<>();
    private final List<Row> rows = Collections.synchronizedList(new ArrayList<>());

    /**
     * @param tsv        the file to append rows to (created with a header), or null for none
     * @param timeout    seconds a test may run before {@code onTimeout} gets its name and the seconds (0: no limit)
     * @param onTimeout  what to do then (GpuCheck: write the row, say which test, halt the JVM with 124)
     * @param afterClass run after each test class with its name: null if the context is fine, else what is wrong
     * @param onContextLost what to do after a {@code CONTEXT} row was written (GpuCheck: say so, halt with 1, since
     *                   every later test of this process would fail too)
     */
    ResultStream(Path tsv, long timeout, BiConsumer<String, Long> onTimeout, Function<String, String> afterClass,
                 BiConsumer<String, String> onContextLost) {
        try {
            this.tsv = tsv == null ? null : Files.newBufferedWriter(tsv, StandardCharsets.UTF_8,
                    StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE);
            if (this.tsv != null) {
                this.tsv.write("test\tresult\tms\tdetail\n");
                this.tsv.flush();
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        this.timeoutMillis = timeout * 1000;
        this.onTimeout = onTimeout;
        this.afterClass = afterClass;
        this.onContextLost = onContextLost;
        this.watchdog = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "gpu-check-watchdog");
            t.setDaemon(true);
            return t;
        });
    }

    @Override
    public void executionStarted(TestIdentifier id) {
        started.put(id.getUniqueId(), System.nanoTime());
        if (id.isTest() && timeoutMillis > 0) {
            String name = name(id);
            timers.put(id.getUniqueId(), watchdog.schedule(() -> {
                add(new Row(name, "TIMEOUT", timeoutMillis, "still running after " + timeoutMillis / 1000 + " s"));
                onTimeout.accept(name, timeoutMillis / 1000);
            }, timeoutMillis, TimeUnit.MILLISECONDS));
        }
    }

    @Override
    public void executionSkipped(TestIdentifier id, String reason) {
        add(new Row(name(id), "SKIPPED", 0, reason));
    }

    @Override
    public void executionFinished(TestIdentifier id, TestExecutionResult result) {
        ScheduledFuture<?> timer = timers.remove(id.getUniqueId());
        if (timer != null) {
            timer.cancel(false);
        }
        long ms = (System.nanoTime() - started.getOrDefault(id.getUniqueId(), System.nanoTime())) / 1_000_000;
        if (id.isTest() || result.getStatus() != TestExecutionResult.Status.SUCCESSFUL) {
            String detail = result.getThrowable().map(t -> String.valueOf(t.getMessage())).orElse("");
            add(new Row(name(id), result.getStatus().name(), ms, detail));
        }
        if (!id.isTest() && id.getSource().map(s -> s instanceof org.junit.platform.engine.support.descriptor.ClassSource)
                .orElse(false)) {
            String problem = afterClass.apply(id.getDisplayName());
            if (problem != null) {
                add(new Row(id.getDisplayName() + " (after class)", "CONTEXT", 0, problem));
                onContextLost.accept(id.getDisplayName(), problem);
            }
        }
    }

    /** Appends {@code row} to the list and to the file, flushed. */
    synchronized void add(Row row) {
        rows.add(row);
        if (tsv != null) {
            try {
                tsv.write(row.tsv());
                tsv.write('\n');
                tsv.flush();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    List<Row> rows() {
        synchronized (rows) {
            return List.copyOf(rows);
        }
    }

    /** The table printed at the end. */
    String table() {
        StringBuilder b = new StringBuilder(String.format(Locale.ROOT, "%-70s %-10s %8s  %s%n", "test", "result", "ms",
                "detail"));
        for (Row r : rows()) {
            String detail = firstLine(r.detail());
            b.append(String.format(Locale.ROOT, "%-70s %-10s %8d  %s%n", r.test(), r.outcome(), r.millis(),
                    detail.length() > 160 ? detail.substring(0, 160) + "…" : detail));
        }
        return b.toString();
    }

    @Override
    public void close() {
        watchdog.shutdownNow();
        if (tsv != null) {
            try {
                tsv.close();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    static String name(TestIdentifier id) {
        String parent = id.getParentId().map(p -> p.replaceAll(".*\\[class:([^\\]]+)\\].*", "$1"))
                .map(c -> c.substring(c.lastIndexOf('.') + 1)).orElse("");
        return id.isTest() ? parent + "." + id.getDisplayName() : id.getDisplayName();
    }
}
