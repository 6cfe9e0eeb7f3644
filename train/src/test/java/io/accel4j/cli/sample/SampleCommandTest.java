package io.accel4j.cli.sample;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cli.Main;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.sample.Sampler;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterLayout;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** {@code accel4j sample} in-process, on a tiny checkpoint the test writes. */
class SampleCommandTest {

    /** V = 300: tokens ≥ 256 exist and print as {@code <id>}; maxT = 16 so that prompts get windowed. */
    static final GptConfig CONFIG = new GptConfig(16, 300, 304, 1, 2, 16);

    @TempDir
    static Path tmp;

    static Path checkpoint;

    @BeforeAll
    static void writeCheckpoint() throws IOException {
        checkpoint = tmp.resolve("tiny.bin");
        try (Parallel pool = new Parallel(1); Gpt2 g = new Gpt2(CONFIG, new CpuOps(pool), 1, CONFIG.maxT())) {
            g.initialise(7);
            MemorySegment p = g.params(); // spread the logits: wte ×20
            ParameterLayout.Span wte = g.layout().tensor(ParameterLayout.Param.WTE);
            for (long i = wte.offset(); i < wte.offset() + wte.count(); i++) {
                p.setAtIndex(ValueLayout.JAVA_FLOAT, i, p.getAtIndex(ValueLayout.JAVA_FLOAT, i) * 20);
            }
            g.save(checkpoint);
        }
    }

    private record Result(int code, String out, String err) {}

    private static Result run(String... args) {
        StringWriter out = new StringWriter(), err = new StringWriter();
        CommandLine cl = Main.commandLine();
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        return new Result(cl.execute(args), out.toString(), err.toString());
    }

    private static Result sample(String prompt, String... more) {
        boolean threads = java.util.Arrays.asList(more).contains("--threads");
        String[] base = threads ? new String[] {"sample", "--model", checkpoint.toString(), "--prompt", prompt}
                : new String[] {"sample", "--model", checkpoint.toString(), "--prompt", prompt, "--threads", "1"};
        String[] all = new String[base.length + more.length];
        System.arraycopy(base, 0, all, 0, base.length);
        System.arraycopy(more, 0, all, base.length, more.length);
        return run(all);
    }

    /** The greedy continuation computed directly with {@link Sampler}, decoded as the command decodes. */
    private static String greedy(String prompt, int n) throws IOException {
        byte[] b = prompt.getBytes(StandardCharsets.UTF_8);
        int[] p = new int[b.length];
        for (int i = 0; i < b.length; i++) {
            p[i] = b[i] & 0xFF;
        }
        try (Parallel pool = new Parallel(1); Gpt2 g = Gpt2.load(checkpoint, new CpuOps(pool), 1, 16);
             Sampler s = new Sampler(g)) {
            return prompt + SampleCommand.decode(s.greedy(p, n, -1));
        }
    }

    @Test
    void aSeedRepeatsItsText() {
        Result a = sample("ab", "--tokens", "20", "--seed", "5", "--temperature", "1.2");
        Result b = sample("ab", "--tokens", "20", "--seed", "5", "--temperature", "1.2");
        Result c = sample("ab", "--tokens", "20", "--seed", "6", "--temperature", "1.2");

        assertThat(a.code()).as(a.err()).isZero();
        assertThat(a.out()).startsWith("ab").endsWith(System.lineSeparator()).isEqualTo(b.out());
        assertThat(c.out()).isNotEqualTo(a.out());
    }

    @Test
    void temperatureZeroAndTopKOneAreSamplersGreedy() throws IOException {
        String expected = greedy("hello", 12) + System.lineSeparator();

        assertThat(sample("hello", "--tokens", "12", "--temperature", "0").out()).isEqualTo(expected);
        assertThat(sample("hello", "--tokens", "12", "--temperature", "2.5", "--top-k", "1", "--seed", "9").out())
                .isEqualTo(expected);
    }

    @Test
    void aPromptLongerThanMaxTIsWindowed() throws IOException {
        String prompt = "the quick brown fox jumps over the lazy dog"; // 43 bytes > maxT 16
        Result r = sample(prompt, "--tokens", "8", "--temperature", "0");

        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).isEqualTo(greedy(prompt, 8) + System.lineSeparator());
    }

    @Test
    void tokensBeyondTheBytesPrintAsIds() {
        assertThat(SampleCommand.decode(new int[] {104, 105, 300, 0xC3, 0xA9, 256})).isEqualTo("hi<300>\u00e9<256>");
        assertThat(SampleCommand.decode(new int[] {0xC3})).isEqualTo("\uFFFD");
    }

    @Test
    void badOptionsAreUsageErrors() {
        String[][] cases = {
            {"--temperature", "-1"}, {"--temperature", "NaN"}, {"--temperature", "Infinity"}, {"--top-k", "-1"},
            {"--tokens", "0"}, {"--seed", "-1"}, {"--seed", "4294967296"}, {"--threads", "0"}
        };
        for (String[] c : cases) {
            Result r = sample("ab", c);
            assertThat(r.code()).as(String.join(" ", c)).isEqualTo(2);
            assertThat(r.err()).startsWith("accel4j: error: " + c[0]);
        }
        Result empty = sample("");
        assertThat(empty.code()).isEqualTo(2);
        assertThat(empty.err()).contains("--prompt is empty");
        Result missing = run("sample", "--model", tmp.resolve("nope.bin").toString(), "--prompt", "x");
        assertThat(missing.code()).isEqualTo(2);
        assertThat(missing.err()).contains("--model", "nope.bin", "is not an existing file");
        Result noModel = run("sample", "--prompt", "x");
        assertThat(noModel.code()).isEqualTo(2);
    }

    @Test
    void aCorruptCheckpointIsARuntimeError() throws IOException {
        Path bad = tmp.resolve("bad.bin");
        java.nio.file.Files.write(bad, new byte[100]);
        Result r = run("sample", "--model", bad.toString(), "--prompt", "x");

        assertThat(r.code()).isEqualTo(1);
        assertThat(r.err()).startsWith("accel4j: error: cannot read the model " + bad).doesNotContain("\tat ");
    }

    @Test
    void theHelpSaysTokensAreBytes() {
        Result r = run("sample", "--help");

        assertThat(r.code()).isZero();
        assertThat(r.out()).contains("UTF-8 bytes", "<id>", "--top-k", "--temperature", "--seed");
    }

    /**
     * {@code --tokens 2000000000} streams: the first tokens are printed while generation goes on and nothing of the
     * size of the request is allocated (it was a 8 GB int[] and a Java-heap OutOfMemoryError); the output stream that
     * stops it stands for a user's Ctrl-C.
     */
    @Test
    void aHugeTokenCountStreamsItsOutput() {
        StringWriter seen = new StringWriter(), err = new StringWriter();
        java.io.Writer stopping = new java.io.Writer() {
            @Override
            public void write(char[] c, int off, int len) {
                seen.write(c, off, len);
                if (seen.getBuffer().length() > 40) {
                    throw new IllegalStateException("stopped by the reader after " + seen.getBuffer().length()
                            + " chars");
                }
            }

            @Override
            public void flush() {}

            @Override
            public void close() {}
        };
        CommandLine cl = Main.commandLine();
        cl.setOut(new PrintWriter(stopping, false));
        cl.setErr(new PrintWriter(err, true));
        int code = cl.execute("sample", "--model", checkpoint.toString(), "--prompt", "ab", "--threads", "1",
                "--tokens", "2000000000", "--temperature", "0");
        assertThat(code).isEqualTo(1);
        assertThat(err.toString()).contains("stopped by the reader").doesNotContain("OutOfMemoryError");
        assertThat(seen.toString()).startsWith("ab").hasSizeGreaterThan(40);
    }

    @Test
    void theStreamingPrinterDecodesAsDecodeDoes() {
        int[][] cases = {{104, 105}, {0xC3, 0xA9, 300, 0xE2, 0x82}, {0xE2, 0x82, 0xAC, 256, 65}, {0xFF, 66}, {}};
        for (int[] tokens : cases) {
            StringWriter w = new StringWriter();
            SampleCommand.TokenPrinter p = new SampleCommand.TokenPrinter(new PrintWriter(w, true));
            for (int t : tokens) {
                p.accept(t);
            }
            p.finish();
            assertThat(w.toString()).as(java.util.Arrays.toString(tokens)).isEqualTo(SampleCommand.decode(tokens));
        }
    }

    @Test
    void aModelLargerThanMemoryIsRefusedInOneLine() throws IOException {
        Path huge = io.accel4j.cli.HugeModelFile.write(tmp.resolve("huge.bin"));
        Result r = run("sample", "--model", huge.toString(), "--prompt", "a", "--threads", "1");
        assertThat(r.code()).isEqualTo(1);
        assertThat(r.err().lines().toList()).singleElement().asString().startsWith("accel4j: error: sampling from "
                + huge + " (L=1, C=768, V=100000000, maxT=64) needs ").contains("(the model file read 286.",
                "available; try a smaller model");
    }
}
