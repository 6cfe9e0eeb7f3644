package io.accel4j.cli.sample;

import io.accel4j.cli.CliException;
import io.accel4j.cli.MemoryCheck;
import io.accel4j.cli.token.TokenizerOptions;
import io.accel4j.train.token.ByteTokenizer;
import io.accel4j.train.token.Vocabulary;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.sample.Generator;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.checkpoint.LlmcCheckpoint;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code accel4j sample}: continues a prompt with a model from an llm.c checkpoint, through {@link Generator}.
 * Byte-level by default: the prompt's UTF-8 bytes are tokens 0…255 and generated tokens below 256 are bytes again;
 * a token ≥ 256 is printed as {@code <id>}. With {@code --tokenizer gpt2}, GPT-2-format files or an llm.c tokenizer
 * file, the prompt is BPE-encoded and tokens decode to their bytes. Prints the prompt followed by the continuation.
 */
@Command(name = "sample", sortOptions = false,
        description = {
            "Generate text from an llm.c checkpoint (e.g. one that 'accel4j train' saved).",
            "Tokens are bytes by default: the prompt's UTF-8 bytes become tokens 0-255, and generated tokens 0-255 "
                    + "are printed as bytes; tokens >= 256 are printed as <id>. With --tokenizer gpt2 (or a "
                    + "tokenizer.bin that prepare wrote) the prompt is GPT-2 BPE and tokens decode as GPT-2's.",
            "Temperature 0 is greedy; otherwise each token is drawn from softmax(logits/temperature) over the top-k "
                    + "tokens with a Mersenne Twister seeded by --seed, so a seed repeats its text."})
public final class SampleCommand implements Callable<Integer> {

    private static final Logger LOG = LoggerFactory.getLogger(SampleCommand.class);

    @Spec
    CommandSpec spec;

    @Option(names = "--model", paramLabel = "FILE", required = true,
            description = "An llm.c checkpoint (fp32 or bf16), e.g. a run directory's model_*.bin.")
    Path model;

    @Option(names = "--prompt", paramLabel = "TEXT", required = true,
            description = "The text to continue (its UTF-8 bytes are the tokens; only the last max_seq_len tokens "
                    + "of the context are seen).")
    String prompt;

    @Option(names = {"-n", "--tokens"}, paramLabel = "N", defaultValue = "64",
            description = "Tokens to generate (default: ${DEFAULT-VALUE}).")
    int tokens;

    @Option(names = "--temperature", paramLabel = "X", defaultValue = "1.0",
            description = "Softmax temperature, >= 0; 0: greedy (default: ${DEFAULT-VALUE}).")
    float temperature;

    @Option(names = "--top-k", paramLabel = "K", defaultValue = "0",
            description = "Draw only from the K most likely tokens; 0: from all (default: ${DEFAULT-VALUE}).")
    int topK;

    @Option(names = "--seed", paramLabel = "N", defaultValue = "42",
            description = "Seed of the sampling, 0 to 4294967295 (default: ${DEFAULT-VALUE}).")
    long seed;

    @Option(names = "--threads", paramLabel = "N", description = "Kernel threads (default: all processors).")
    Integer threads;

    @Mixin
    TokenizerOptions tokenizerOptions;

    @Override
    public Integer call() {
        checkOptions();
        TokenizerOptions.Pair tok = tokenizerOptions.both(this::usage);
        int[] promptTokens = tok.encoder().encode(prompt.getBytes(StandardCharsets.UTF_8));
        Integer capped = io.accel4j.cli.Threads.cap(threads, spec.commandLine().getErr());
        int nThreads = capped != null ? capped : Parallel.defaultThreads();
        PrintWriter out = spec.commandLine().getOut();
        checkMemory();
        try (Parallel pool = new Parallel(nThreads);
             Gpt2 gpt = load(new CpuOps(pool));
             Generator generator = new Generator(gpt)) {
            GptConfig c = gpt.config();
            if (c.V() < 256 && tokenizerOptions.byteLevel()) {
                throw new CliException(model + " has a vocabulary of " + c.V() + " tokens, fewer than the 256 byte "
                        + "tokens this command uses");
            }
            if (c.V() < tok.decoder().size()) {
                throw new CliException(model + " has a vocabulary of " + c.V() + " tokens, fewer than the "
                        + tok.decoder().size() + " of the tokenizer (" + tok.decoder().describe() + "): was it "
                        + "trained on tokens from another tokenizer?");
            }
            if (tokenizerOptions.byteLevel() && c.V() == 50257) {
                LOG.warn("{} has GPT-2's vocabulary but the tokens are read as bytes: --tokenizer gpt2 (or the "
                        + "tokenizer.bin that prepare wrote) encodes the prompt and decodes the tokens as GPT-2's",
                        model);
            }
            if (promptTokens.length == 0) {
                throw usage("--prompt encodes to no tokens");
            }
            LOG.info("sampling {} tokens from {} (L={}, NH={}, C={}, V={}, maxT={}) on {}, {}", tokens, model,
                    c.L(), c.NH(), c.C(), c.V(), c.maxT(), gpt.ops().describe(), temperature == 0 ? "greedy"
                    : "temperature " + temperature + (topK > 0 ? ", top-k " + topK : "") + ", seed " + seed);
            out.print(prompt);
            out.flush();
            TokenPrinter printer = new TokenPrinter(out, tok.decoder());
            generator.stream(promptTokens, tokens, temperature, topK, seed, printer);
            printer.finish();
            out.println();
            out.flush();
        } catch (IOException e) {
            throw new CliException("cannot read the model " + model + ": " + io.accel4j.cli.IoMessages.describe(e,
                    model), e);
        }
        return 0;
    }

    /** Bytes for tokens 0…255 (decoded as UTF-8, invalid sequences as U+FFFD), {@code <id>} for the others. */
    public static String decode(int[] tokens) {
        return decode(tokens, ByteTokenizer.INSTANCE);
    }

    /**
     * The tokens' bytes in {@code vocab} decoded as UTF-8 (invalid sequences as U+FFFD), {@code <id>} for a token
     * outside it.
     */
    public static String decode(int[] tokens, Vocabulary vocab) {
        StringBuilder sb = new StringBuilder();
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        for (int t : tokens) {
            if (t >= 0 && t < vocab.size()) {
                bytes.writeBytes(vocab.bytes(t));
            } else {
                sb.append(bytes.toString(StandardCharsets.UTF_8)).append('<').append(t).append('>');
                bytes.reset();
            }
        }
        return sb.append(bytes.toString(StandardCharsets.UTF_8)).toString();
    }

    /**
     * Refuses, with one line, a model whose loading and sampling buffers do not fit in what this process can have:
     * the file read (fp32), the model's parameters and gradients, its activations for one sequence of max_seq_len
     * tokens and the generator's buffers.
     */
    private void checkMemory() {
        GptConfig c;
        try {
            c = LlmcCheckpoint.readConfig(model);
        } catch (IOException e) {
            throw new CliException("cannot read the model " + model + ": " + io.accel4j.cli.IoMessages.describe(e,
                    model), e);
        }
        long params = c.parameterCount() * Float.BYTES;
        MemoryCheck.require("sampling from " + model + " (L=" + c.L() + ", C=" + c.C() + ", V=" + c.V() + ", maxT="
                + c.maxT() + ")", List.of(new MemoryCheck.Part("the model file read", params),
                        new MemoryCheck.Part("parameters", params), new MemoryCheck.Part("gradients", params),
                        new MemoryCheck.Part("activations", Gpt2.activationBytes(c, 1, c.maxT(), Recompute.NONE)),
                        new MemoryCheck.Part("sampling buffers", ((long) c.maxT() + c.V()) * Float.BYTES)),
                "a smaller model or a machine with more memory");
    }

    /**
     * Prints tokens as {@link #decode} does, as they come: bytes decoded as UTF-8 (a sequence split over tokens is
     * held until it is complete), {@code <id>} for the others; nothing grows with the number of tokens.
     */
    static final class TokenPrinter implements java.util.function.IntConsumer {
        private final PrintWriter out;
        private final Vocabulary vocab;
        private final java.nio.charset.CharsetDecoder decoder = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(java.nio.charset.CodingErrorAction.REPLACE)
                .onUnmappableCharacter(java.nio.charset.CodingErrorAction.REPLACE);
        private final java.nio.ByteBuffer bytes = java.nio.ByteBuffer.allocate(16 + 255);
        private final java.nio.CharBuffer chars = java.nio.CharBuffer.allocate(32 + 2 * 255);

        TokenPrinter(PrintWriter out) {
            this(out, ByteTokenizer.INSTANCE);
        }

        TokenPrinter(PrintWriter out, Vocabulary vocab) {
            this.out = out;
            this.vocab = vocab;
        }

        @Override
        public void accept(int t) {
            if (t >= 0 && t < vocab.size()) {
                bytes.put(vocab.bytes(t));
                bytes.flip();
                decoder.decode(bytes, chars, false);
                bytes.compact();
                drain();
            } else {
                finish();
                out.print("<" + t + ">");
            }
            out.flush();
        }

        /** Decodes what is held (an incomplete sequence becomes U+FFFD). */
        void finish() {
            bytes.flip();
            decoder.decode(bytes, chars, true);
            decoder.flush(chars);
            decoder.reset();
            bytes.clear();
            drain();
        }

        private void drain() {
            chars.flip();
            out.append(chars);
            chars.clear();
        }
    }

    private Gpt2 load(CpuOps ops) throws IOException {
        return Gpt2.load(model, ops, 1, Integer.MAX_VALUE); // maxT capped at the checkpoint's max_seq_len
    }

    private void checkOptions() {
        if (Files.isDirectory(model)) {
            throw usage("--model " + model + " is a directory, not an llm.c model file (e.g. a run directory's "
                    + "model_NNNNNNNN.bin)");
        }
        if (!Files.isRegularFile(model)) {
            throw usage("--model " + model + " is not an existing file");
        }
        if (prompt.isEmpty()) {
            throw usage("--prompt is empty: give at least one character to continue");
        }
        if (tokens < 1) {
            throw usage("--tokens must be >= 1, got " + tokens);
        }
        if (!(temperature >= 0) || !Float.isFinite(temperature)) {
            throw usage("--temperature must be finite and >= 0 (0: greedy), got " + temperature);
        }
        if (topK < 0) {
            throw usage("--top-k must be >= 0 (0: all tokens), got " + topK);
        }
        if (seed < 0 || seed > 0xFFFF_FFFFL) {
            throw usage("--seed must be in [0, 4294967295], got " + seed);
        }
        if (threads != null && threads < 1) {
            throw usage("--threads must be >= 1, got " + threads);
        }
    }

    private ParameterException usage(String message) {
        return new ParameterException(spec.commandLine(), message);
    }
}
