package io.accel4j.cuda;

import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectPackage;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.platform.engine.DiscoverySelector;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.launcher.Launcher;
import org.junit.platform.launcher.LauncherDiscoveryRequest;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;
import org.junit.platform.launcher.listeners.SummaryGeneratingListener;

/**
 * Runs this module's tests without Maven (on a GPU machine with only a jlink'd runtime; see
 * {@code scripts/gpu-check.sh}) and prints a table of every test last. Exit code 1 if any failed, and 3 if the
 * GPU tests were skipped although {@code --require-gpu} was given. {@code --class NAME} (repeatable) adds a test
 * class of another module, which must be on the class path (the kernels module's {@code GpuOpsTest});
 * {@code --classes-only} runs those classes without this module's tests.
 */
public final class GpuCheck {

    private GpuCheck() {}

    record Row(String test, String outcome, long millis, String detail) {}

    public static void main(String[] args) {
        boolean requireGpu = false, classesOnly = false;
        List<DiscoverySelector> selectors = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--require-gpu" -> requireGpu = true;
                case "--classes-only" -> classesOnly = true;
                case "--class" -> {
                    if (i + 1 == args.length) {
                        throw new IllegalArgumentException("--class needs a class name");
                    }
                    selectors.add(selectClass(args[++i]));
                }
                default -> throw new IllegalArgumentException("unknown argument " + args[i]
                        + " (--require-gpu, --class NAME, --classes-only)");
            }
        }
        if (!classesOnly) {
            selectors.addFirst(selectPackage("io.accel4j.cuda"));
        } else if (selectors.isEmpty()) {
            throw new IllegalArgumentException("--classes-only needs at least one --class NAME");
        }
        CudaProbe probe = Cuda.probe();
        System.out.println("CUDA probe: " + probe.describe());

        Map<String, Long> started = new ConcurrentHashMap<>();
        List<Row> rows = Collections.synchronizedList(new ArrayList<>());
        TestExecutionListener table = new TestExecutionListener() {
            @Override
            public void executionStarted(TestIdentifier id) {
                started.put(id.getUniqueId(), System.nanoTime());
            }

            @Override
            public void executionSkipped(TestIdentifier id, String reason) {
                rows.add(new Row(name(id), "SKIPPED", 0, reason));
            }

            @Override
            public void executionFinished(TestIdentifier id, TestExecutionResult result) {
                if (!id.isTest() && result.getStatus() == TestExecutionResult.Status.SUCCESSFUL) {
                    return;
                }
                long ms = (System.nanoTime() - started.getOrDefault(id.getUniqueId(), System.nanoTime())) / 1_000_000;
                String detail = result.getThrowable().map(t -> String.valueOf(t.getMessage())).orElse("");
                rows.add(new Row(name(id), result.getStatus().name(), ms, detail));
            }
        };
        SummaryGeneratingListener summary = new SummaryGeneratingListener();
        LauncherDiscoveryRequest request = LauncherDiscoveryRequestBuilder.request()
                .selectors(selectors).build();
        Launcher launcher = LauncherFactory.create();
        launcher.execute(request, table, summary);

        PrintWriter out = new PrintWriter(System.out, true);
        out.println();
        out.printf(Locale.ROOT, "%-70s %-10s %8s  %s%n", "test", "result", "ms", "detail");
        for (Row r : rows) {
            String detail = r.detail().lines().findFirst().orElse("");
            out.printf(Locale.ROOT, "%-70s %-10s %8d  %s%n", r.test(), r.outcome(), r.millis(),
                    detail.length() > 160 ? detail.substring(0, 160) + "…" : detail);
        }
        var s = summary.getSummary();
        long notRun = s.getTestsFoundCount() - s.getTestsSucceededCount() - s.getTestsFailedCount();
        out.printf(Locale.ROOT, "%d tests: %d passed, %d failed, %d skipped or not run (containers failed: %d)%n",
                s.getTestsFoundCount(), s.getTestsSucceededCount(), s.getTestsFailedCount(), notRun,
                s.getContainersFailedCount());
        if (s.getTotalFailureCount() > 0) {
            s.printFailuresTo(out, 30);
            System.exit(1);
        }
        if (requireGpu && !probe.ready()) {
            out.println("--require-gpu: no usable GPU (" + probe.describe() + ")");
            System.exit(3);
        }
    }

    private static String name(TestIdentifier id) {
        String parent = id.getParentId().map(p -> p.replaceAll(".*\\[class:([^\\]]+)\\].*", "$1"))
                .map(c -> c.substring(c.lastIndexOf('.') + 1)).orElse("");
        return id.isTest() ? parent + "." + id.getDisplayName() : id.getDisplayName();
    }
}
