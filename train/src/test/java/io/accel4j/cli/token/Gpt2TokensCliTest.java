package io.accel4j.cli.token;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cli.Main;
import io.accel4j.cli.sample.SampleCommand;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.sample.Sampler;
import io.accel4j.train.token.BpeTokenizer;
import io.accel4j.train.token.TokenizerFile;
import io.accel4j.train.token.Vocabularies;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** {@code prepare --tokenizer gpt2} and {@code sample --tokenizer …} in-process. */
class Gpt2TokensCliTest {

    @TempDir
    static Path dir;

    static BpeTokenizer gpt2;

    @BeforeAll
    static void load() {
        gpt2 = BpeTokenizer.gpt2();
    }

    private record Result(int code, String out, String err) {}

    private static Result run(String... args) {
        StringWriter out = new StringWriter(), err = new StringWriter();
        CommandLine cl = Main.commandLine();
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        return new Result(cl.execute(args), out.toString(), err.toString());
    }

    private static int[] tokens(Path f) throws IOException {
        try (TokenFile tf = TokenFile.open(f)) {
            int[] t = new int[(int) tf.size()];
            tf.read(0, t, t.length);
            return t;
        }
    }

    private static int[] withEot(String s) {
        int[] body = gpt2.encode(s.getBytes(StandardCharsets.UTF_8));
        int[] t = new int[body.length + 1];
        t[0] = 50256;
        System.arraycopy(body, 0, t, 1, body.length);
        return t;
    }

    @Test
    void prepareWritesGpt2TokensEachPartAfterAnEndOfTextAndTheTokenizerFile() throws IOException {
        String train = "Hello world, it's a test.\n".repeat(9);
        String val = "The last line\n";
        Path text = Files.writeString(dir.resolve("t.txt"), train + val);
        Path out = dir.resolve("gpt2data");
        Result r = run("prepare", "--text", text.toString(), "--out", out.toString(), "--tokenizer", "gpt2");
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.err()).isEmpty();
        assertThat(r.out()).contains("(GPT-2 BPE r50k_base, vocabulary 50257); tokenizer for sample: "
                + out.resolve("tokenizer.bin"));
        assertThat(tokens(out.resolve("train.bin"))).containsExactly(withEot(train));
        assertThat(tokens(out.resolve("val.bin"))).containsExactly(withEot(val));
        assertThat(Vocabularies.sameTokens(TokenizerFile.read(out.resolve("tokenizer.bin")), gpt2)).isTrue();
    }

    @Test
    void textThatIsNotUtf8IsEncodedAsBytesWithANote() throws IOException {
        byte[] bytes = "caf\u00e9 ok\n".repeat(10).getBytes(StandardCharsets.UTF_8);
        bytes[3] = (byte) 0xFF; // breaks the first é: 0xFF then a lone continuation byte 0xA9
        Path text = dir.resolve("latin.txt");
        Files.write(text, bytes);
        Path out = dir.resolve("latin");
        Result r = run("prepare", "--text", text.toString(), "--out", out.toString(), "--tokenizer", "gpt2",
                "--val-fraction", "0");
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.err().lines().toList()).singleElement().asString().isEqualTo("accel4j: note: " + text
                + " has 2 bytes that are not valid UTF-8; each is encoded as its own byte token (GPT-2's BPE works "
                + "on bytes), so the text decodes back exactly");
        int[] t = tokens(out.resolve("train.bin"));
        assertThat(t[0]).isEqualTo(50256);
        java.io.ByteArrayOutputStream back = new java.io.ByteArrayOutputStream();
        for (int i = 1; i < t.length; i++) {
            back.writeBytes(gpt2.bytes(t[i]));
        }
        assertThat(back.toByteArray()).isEqualTo(bytes);
    }

    @Test
    void badTokenizerOptionsAreUsageErrors() throws IOException {
        Path text = Files.writeString(dir.resolve("u.txt"), "some text\nmore\n");
        Path out = dir.resolve("bad");
        Result r = run("prepare", "--text", text.toString(), "--out", out.toString(), "--tokenizer", "gpt3");
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err()).startsWith("accel4j: error: --tokenizer must be byte, gpt2 or an existing llm.c "
                + "tokenizer file, got 'gpt3'");
        Result f = run("prepare", "--text", text.toString(), "--out", out.toString(), "--tokenizer-files",
                dir.resolve("none").toString());
        assertThat(f.code()).isEqualTo(2);
        assertThat(f.err()).contains("--tokenizer-files " + dir.resolve("none") + " is not a directory");
        Files.createDirectories(dir.resolve("empty"));
        Result e = run("prepare", "--text", text.toString(), "--out", out.toString(), "--tokenizer-files",
                dir.resolve("empty").toString());
        assertThat(e.code()).isEqualTo(2);
        assertThat(e.err()).contains("encoder.json does not exist");
        Path bad = Files.write(dir.resolve("bad-tokenizer.bin"), new byte[2000]);
        Result s = run("sample", "--model", bad.toString(), "--prompt", "x", "--tokenizer", bad.toString());
        assertThat(s.code()).isEqualTo(1);
        assertThat(s.err().lines().toList()).singleElement().asString().contains("header[0] (magic) is 0, expected "
                + "20240328: not an llm.c tokenizer file");
        assertThat(out).doesNotExist();
    }

    @Test
    void sampleEncodesThePromptAndDecodesWithGpt2() throws IOException {
        GptConfig cfg = new GptConfig(16, 50257, 50304, 1, 2, 8);
        Path model = dir.resolve("gpt2-tiny.bin");
        try (Parallel pool = new Parallel(1); Gpt2 g = new Gpt2(cfg, new CpuOps(pool), 1, cfg.maxT())) {
            g.initialise(3);
            g.save(model);
        }
        String prompt = "Hello, world";
        int[] p = gpt2.encode(prompt.getBytes(StandardCharsets.UTF_8));
        int[] generated;
        try (Parallel pool = new Parallel(1); Gpt2 g = Gpt2.load(model, new CpuOps(pool), 1, 16);
             Sampler s = new Sampler(g)) {
            generated = s.greedy(p, 6, -1);
        }
        String expected = prompt + SampleCommand.decode(generated, gpt2) + System.lineSeparator();
        Result r = run("sample", "--model", model.toString(), "--prompt", prompt, "--tokens", "6", "--temperature",
                "0", "--threads", "1", "--tokenizer", "gpt2");
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).isEqualTo(expected);
        assertThat(r.out()).doesNotContain("<"); // every id decodes
        // the same through an llm.c tokenizer file
        Path tok = dir.resolve("gpt2_tokenizer.bin");
        TokenizerFile.write(tok, gpt2);
        Result viaFile = run("sample", "--model", model.toString(), "--prompt", prompt, "--tokens", "6",
                "--temperature", "0", "--threads", "1", "--tokenizer", tok.toString());
        assertThat(viaFile.out()).isEqualTo(expected);
        assertThat(Arrays.stream(generated).allMatch(t -> t >= 0 && t < 50257)).isTrue();
    }
}
