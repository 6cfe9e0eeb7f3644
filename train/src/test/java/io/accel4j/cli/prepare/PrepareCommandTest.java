package io.accel4j.cli.prepare;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cli.Main;
import io.accel4j.train.data.TokenFile;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

class PrepareCommandTest {

    @TempDir
    Path dir;

    private record Result(int code, String out, String err) {}

    private static Result run(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        CommandLine cl = Main.commandLine();
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        return new Result(cl.execute(args), out.toString(), err.toString());
    }

    @Test
    void writesTrainAndValTokenFilesSplitAtLineStarts() throws IOException {
        // 10 lines of 10 bytes: val 10% = the last line of each file exactly
        String a = "line 0000\n".repeat(9) + "last a..\u00e9\n"; // é: two UTF-8 bytes, 0xC3 0xA9
        String b = "bbbbbbbbb\n".repeat(9) + "last b...\n";
        Path fa = write("a.txt", a);
        Path fb = write("b.txt", b);
        Path out = dir.resolve("out/data");

        Result r = run("prepare", "--text", fa.toString(), fb.toString(), "--out", out.toString());

        assertThat(r.err()).isEmpty();
        assertThat(r.code()).isZero();
        byte[] ba = a.getBytes(StandardCharsets.UTF_8);
        byte[] bb = b.getBytes(StandardCharsets.UTF_8);
        assertThat(r.out().lines().toList()).containsExactly("prepared 2 files (" + (ba.length + bb.length)
                + " bytes): " + out.resolve("train.bin") + " 180 tokens, " + out.resolve("val.bin")
                + " 21 tokens (byte-level, vocabulary 256)");
        assertThat(read(out.resolve("train.bin"))).isEqualTo(concat(slice(ba, 0, 90), slice(bb, 0, 90)));
        assertThat(read(out.resolve("val.bin"))).isEqualTo(concat(slice(ba, 90, ba.length), slice(bb, 90, 100)));
    }

    @Test
    void aZeroFractionWritesNoValFile() throws IOException {
        Path f = write("t.txt", "hello\n");
        Path out = dir.resolve("o");
        Result r = run("prepare", "--text", f.toString(), "--out", out.toString(), "--val-fraction", "0");
        assertThat(r.code()).isZero();
        assertThat(r.out()).contains("6 tokens, no val.bin");
        assertThat(out.resolve("val.bin")).doesNotExist();
    }

    @Test
    void theSplitMovesToTheNearestLineStartWithinReach() {
        byte[] text = "aaaaaaa\nbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\ncc\n".getBytes(StandardCharsets.US_ASCII);
        // 54 bytes, line starts inside at 8 and 51. 0.1 -> val 5 from 49; 51 is 2 away, within 5/2
        assertThat(PrepareCommand.split(text, 0.1)).isEqualTo(51);
        // 0.3 -> val 16 from 38; 51 is 13 away (> 8), 8 is 30 away: no line start in reach, keep 38
        assertThat(PrepareCommand.split(text, 0.3)).isEqualTo(38);
        assertThat(PrepareCommand.split(text, 0)).isEqualTo(54);
        assertThat(PrepareCommand.split(new byte[] {'x'}, 0.1)).isEqualTo(1);
    }

    @Test
    void errorsAreOneLineWithTheRightExitCode() throws IOException {
        Path out = dir.resolve("o");
        Path ok = write("ok.txt", "some text\nmore text\n");

        Result missing = run("prepare", "--text", dir.resolve("nope.txt").toString(), "--out", out.toString());
        assertThat(missing.code()).isEqualTo(1);
        assertThat(missing.err().lines().toList()).containsExactly(
                "accel4j: error: the text file " + dir.resolve("nope.txt") + " does not exist");

        Path empty = write("empty.txt", "");
        Result none = run("prepare", "--text", empty.toString(), "--out", out.toString());
        assertThat(none.code()).isEqualTo(1);
        assertThat(none.err()).isEqualTo("accel4j: error: the text file " + empty + " is empty: nothing to prepare"
                + System.lineSeparator());

        Result tiny = run("prepare", "--text", write("one.txt", "x").toString(), "--out", out.toString());
        assertThat(tiny.code()).isEqualTo(1);
        assertThat(tiny.err()).contains("too small to split with --val-fraction 0.1", "--val-fraction 0");

        for (String bad : new String[] {"1", "-0.1", "1.5", "NaN"}) {
            Result r = run("prepare", "--text", ok.toString(), "--out", out.toString(), "--val-fraction", bad);
            assertThat(r.code()).as(bad).isEqualTo(2);
            assertThat(r.err().lines().toList()).singleElement().asString()
                    .startsWith("accel4j: error: --val-fraction must be in [0, 1)")
                    .endsWith("(see 'accel4j prepare --help')");
        }
        Result noOut = run("prepare", "--text", ok.toString());
        assertThat(noOut.code()).isEqualTo(2);
        assertThat(noOut.err()).contains("--out");

        Path blocker = write("file-not-dir", "x");
        Result cannot = run("prepare", "--text", ok.toString(), "--out", blocker.resolve("sub").toString());
        assertThat(cannot.code()).isEqualTo(1);
        assertThat(cannot.err()).startsWith("accel4j: error: cannot write the token files in " + blocker.resolve("sub"));
        assertThat(out).doesNotExist();
    }

    private Path write(String name, String content) throws IOException {
        Path p = dir.resolve(name);
        Files.writeString(p, content, StandardCharsets.UTF_8);
        return p;
    }

    private static byte[] read(Path tokenFile) throws IOException {
        try (TokenFile tf = TokenFile.open(tokenFile)) {
            byte[] out = new byte[(int) tf.size()];
            for (int i = 0; i < out.length; i++) {
                int t = tf.token(i);
                assertThat(t).isBetween(0, 255);
                out[i] = (byte) t;
            }
            return out;
        }
    }

    private static byte[] slice(byte[] b, int from, int to) {
        return java.util.Arrays.copyOfRange(b, from, to);
    }

    private static byte[] concat(byte[] x, byte[] y) {
        byte[] out = java.util.Arrays.copyOf(x, x.length + y.length);
        System.arraycopy(y, 0, out, x.length, y.length);
        return out;
    }
}
