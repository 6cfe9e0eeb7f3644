package io.accel4j.jmh;

import java.util.Map;

/** Stands in for a kernel benchmark in {@link ReportTest}: declares its work the way the real ones do. */
public class FakeKernelBench {

    /** {@code copy} moves 2·n·4 bytes and is the baseline of {@code kernel}, which moves 3·n·4. */
    public static Work work(String method, Map<String, String> params) {
        long n = Long.parseLong(params.get("n"));
        return switch (method) {
            case "copy" -> Work.bytes(2.0 * n * 4, null);
            case "kernel" -> Work.bytes(3.0 * n * 4, "copy");
            default -> throw new IllegalArgumentException("no method " + method);
        };
    }
}
