package io.accel4j.cuda;

import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectPackage;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.BiConsumer;
import java.util.function.Function;
import org.junit.platform.engine.DiscoverySelector;
import org.junit.platform.launcher.Launcher;
import org.junit.platform.launcher.LauncherDiscoveryRequest;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;
import org.junit.platform.launcher.listeners.SummaryGeneratingListener;

/**
 * Runs this module's tests without Maven (on a GPU machine with only a jlink'd runtime; see
 * {@code scripts/gpu-check.sh}): a row per test streamed to {@code --tsv FILE} as each finishes
 * ({@link ResultStream}), a table of every test last. Exit code 1 if any failed, 3 if the GPU tests were skipped
 * although {@code --require-gpu} was given, 124 if a test ran past {@code --test-timeout} seconds (default
 * {@value #DEFAULT_TEST_TIMEOUT_S}; the watchdog names it, and every row before it is in the TSV), and 1 at once if
 * the context is unusable after a test class (an illegal address is sticky: later tests would only repeat it).
 * {@code --class NAME} (repeatable) adds a test class of another module, which must be on the class path (the
 * kernels module's {@code GpuOpsTest}); {@code --classes-only} runs those classes without this module's tests.
 */
public final class GpuCheck {

    static final long DEFAULT_TEST_TIMEOUT_S = 120;

    private GpuCheck() {}

    /** The parsed command line. */
    record Options(boolean requireGpu, List<DiscoverySelector> selectors, Path tsv, long testTimeoutS) {}

    static Options parse(String[] args) {
        boolean requireGpu = false, classesOnly = false;
        Path tsv = null;
        long timeout = DEFAULT_TEST_TIMEOUT_S;
        List<DiscoverySelector> selectors = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--require-gpu" -> requireGpu = true;
                case "--classes-only" -> classesOnly = true;
                case "--class" -> selectors.add(selectClass(value(args, ++i, "--class needs a class name")));
                case "--tsv" -> tsv = Path.of(value(args, ++i, "--tsv needs a file"));
                case "--test-timeout" -> timeout = Long.parseLong(value(args, ++i, "--test-timeout needs seconds"));
                default -> throw new IllegalArgumentException("unknown argument " + args[i]
                        + " (--require-gpu, --class NAME, --classes-only, --tsv FILE, --test-timeout S)");
            }
        }
        if (!classesOnly) {
            selectors.addFirst(selectPackage("io.accel4j.cuda"));
        } else if (selectors.isEmpty()) {
            throw new IllegalArgumentException("--classes-only needs at least one --class NAME");
        }
        return new Options(requireGpu, selectors, tsv, timeout);
    }

    private static String value(String[] args, int i, String missing) {
        if (i >= args.length) {
            throw new IllegalArgumentException(missing);
        }
        return args[i];
    }

    public static void main(String[] args) {
        Options o = parse(args);
        CudaProbe probe = Cuda.probe();
        PrintWriter out = new PrintWriter(System.out, true);
        out.println("CUDA probe: " + probe.describe());
        BiConsumer<String, Long> timeout = (test, s) -> {
            out.println("TIMEOUT: " + test + " still running after " + s + " s; the rows so far are in "
                    + (o.tsv() == null ? "(no --tsv)" : o.tsv()));
            out.flush();
            Runtime.getRuntime().halt(124);
        };
        BiConsumer<String, String> contextLost = (testClass, problem) -> {
            out.println("CONTEXT: unusable after " + testClass + ": " + problem
                    + "; the remaining tests need a new process");
            out.flush();
            Runtime.getRuntime().halt(1);
        };
        int rc = run(o, probe, GpuCheck::contextProblem, timeout, contextLost, out);
        System.exit(rc);
    }

    /** Runs the tests; returns the exit code. The after-class check and the two halts are parameters for tests. */
    static int run(Options o, CudaProbe probe, Function<String, String> afterClass, BiConsumer<String, Long> timeout,
                   BiConsumer<String, String> contextLost, PrintWriter out) {
        SummaryGeneratingListener summary = new SummaryGeneratingListener();
        LauncherDiscoveryRequest request = LauncherDiscoveryRequestBuilder.request().selectors(o.selectors()).build();
        Launcher launcher = LauncherFactory.create();
        try (ResultStream rows = new ResultStream(o.tsv(), o.testTimeoutS(), timeout, afterClass, contextLost)) {
            launcher.execute(request, rows, summary);
            out.println();
            out.print(rows.table());
        }
        var s = summary.getSummary();
        long notRun = s.getTestsFoundCount() - s.getTestsSucceededCount() - s.getTestsFailedCount();
        out.printf(Locale.ROOT, "%d tests: %d passed, %d failed, %d skipped or not run (containers failed: %d)%n",
                s.getTestsFoundCount(), s.getTestsSucceededCount(), s.getTestsFailedCount(), notRun,
                s.getContainersFailedCount());
        if (s.getTotalFailureCount() > 0) {
            s.printFailuresTo(out, 30);
            return 1;
        }
        if (o.requireGpu() && !probe.ready()) {
            out.println("--require-gpu: no usable GPU (" + probe.describe() + ")");
            return 3;
        }
        return 0;
    }

    /**
     * After a test class: null if there is no GPU or device 0's primary context synchronises, else the error (a
     * sticky one, such as {@code CUDA_ERROR_ILLEGAL_ADDRESS}, fails every later call of the process).
     */
    static String contextProblem(String testClass) {
        if (!Cuda.probe().ready()) {
            return null;
        }
        try (CudaContext c = CudaContext.primary(0)) {
            c.synchronize();
            return null;
        } catch (CudaException e) {
            return ResultStream.firstLine(e.getMessage());
        }
    }
}
