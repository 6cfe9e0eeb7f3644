package io.accel4j.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 18, item 4: {@link GpuCheck} streams a TSV row per test as it finishes, names a test that runs past the
 * timeout, and checks the context after each class. Runs {@link Sample} (enabled only here) through it.
 */
class GpuCheckTest {

    static final String SAMPLE = "accel4j.gpucheck.sample";
    static volatile CountDownLatch release = new CountDownLatch(1);

    /** Three tests for GpuCheck to run: one passes, one fails, one waits until the watchdog fires. */
    @EnabledIfSystemProperty(named = SAMPLE, matches = "true")
    static class Sample {
        @Test
        void passes() {}

        @Test
        void fails() {
            assertThat(1).as("on purpose").isEqualTo(2);
        }

        @Test
        void hangs() throws InterruptedException {
            assertThat(release.await(30, TimeUnit.SECONDS)).isTrue();
        }
    }

    @TempDir
    Path tmp;

    @BeforeEach
    void enable() {
        System.setProperty(SAMPLE, "true");
        release = new CountDownLatch(1);
    }

    @AfterEach
    void disable() {
        System.clearProperty(SAMPLE);
    }

    @Test
    void rowsAreStreamedAndAHangingTestIsNamed() throws Exception {
        Path tsv = tmp.resolve("tests.tsv");
        List<String> timedOut = new ArrayList<>();
        List<String> tsvAtTimeout = new ArrayList<>();
        List<String> lost = new ArrayList<>();
        GpuCheck.Options o = GpuCheck.parse(new String[] {"--classes-only", "--class", Sample.class.getName(),
                "--tsv", tsv.toString(), "--test-timeout", "1"});
        StringWriter out = new StringWriter();
        int rc = GpuCheck.run(o, new CudaProbe.NoDevice(12040, "test"), c -> null, (test, s) -> {
            timedOut.add(test + " " + s);
            try {
                tsvAtTimeout.addAll(Files.readAllLines(tsv));
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
            release.countDown();
        }, (c, p) -> lost.add(c), new PrintWriter(out, true));

        assertThat(rc).as(out.toString()).isEqualTo(1);
        assertThat(timedOut).containsExactly("GpuCheckTest$Sample.hangs() 1");
        assertThat(tsvAtTimeout).as("on disk when the watchdog fired").first().isEqualTo("test\tresult\tms\tdetail");
        assertThat(tsvAtTimeout).anyMatch(l -> l.startsWith("GpuCheckTest$Sample.hangs()\tTIMEOUT\t1000\t"));
        List<String> lines = Files.readAllLines(tsv);
        assertThat(lines).anyMatch(l -> l.startsWith("GpuCheckTest$Sample.passes()\tSUCCESSFUL\t"));
        assertThat(lines).anyMatch(l -> l.startsWith("GpuCheckTest$Sample.fails()\tFAILED\t")
                && l.contains("on purpose"));
        assertThat(lines).allMatch(l -> l.split("\t", -1).length == 4);
        assertThat(lost).isEmpty();
        assertThat(out.toString()).contains("3 tests: 2 passed, 1 failed");
    }

    @Test
    void anUnusableContextAfterAClassIsARowAndStopsTheRun() throws Exception {
        release.countDown();
        Path tsv = tmp.resolve("tests.tsv");
        List<String> lost = new ArrayList<>();
        GpuCheck.Options o = GpuCheck.parse(new String[] {"--classes-only", "--class", Sample.class.getName(),
                "--tsv", tsv.toString()});
        GpuCheck.run(o, new CudaProbe.NoDevice(12040, "test"),
                c -> "cuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (700)", (t, s) -> { },
                (c, p) -> lost.add(c + ": " + p), new PrintWriter(new StringWriter(), true));
        assertThat(lost).containsExactly("GpuCheckTest$Sample: cuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (700)");
        assertThat(Files.readAllLines(tsv)).contains("GpuCheckTest$Sample (after class)\tCONTEXT\t0\t"
                + "cuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (700)");
    }
}
